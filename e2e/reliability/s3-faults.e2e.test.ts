/*
 * A whole backup (api, worker and node agent processes; plan, item blocks, PVBs, hooks,
 * finalize) with backups and the volume repository on S3, every S3 request of the services going through a proxy
 * that answers some with 503 SlowDown or 500, cuts some uploads off mid-body and delays all.
 * The SDK's retries must carry the backup to Completed with everything in it, and every object
 * in the bucket must read back whole (its checksum verified).
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { S3Fault, S3RequestInfo } from '../../packages/testing/src/index.js';
import { backupFacts, configMap, execsOf, FREEZE, namespace, node, pod, UNFREEZE } from './support/fixtures.js';
import { recordRun } from './support/run-figures.js';
import { type ServiceProcess, type Stack, startStack, waitFor, waitForBackupEnd } from './support/stack.js';

const fixture = {
  objects: [
    namespace('shop'),
    namespace('stowage'),
    node('node-a'),
    pod({ name: 'db-0', node: 'node-a', volumes: [{ name: 'data', mib: 2 }], pre: FREEZE, post: UNFREEZE }),
    pod({ name: 'web-0', node: 'node-a', volumes: [{ name: 'cache', mib: 1 }] }),
    ...Array.from({ length: 40 }, (_, i) => configMap(`settings-${i}`, 'shop', 2_000)),
  ],
};

/** A deterministic fault schedule by request and upload count (see beforeAll). */
/** Faults only once `armed()`: the services' start-up storage checks run before the backup, cleanly. */
function faultSchedule(armed: () => boolean): (req: S3RequestInfo) => S3Fault | undefined {
  let uploads = 0;
  return (req) => {
    if (!armed()) return undefined;
    if (req.bodyBytes >= 2 && ++uploads % 7 === 3) return 'dropMidUpload';
    if (req.seq % 9 === 4) return 'slowDown';
    if (req.seq % 13 === 6) return 'internalError';
    return undefined;
  };
}

describe('a backup on S3 through SlowDown, 500s, cut uploads and latency', () => {
  let stack: Stack;
  let api: ServiceProcess;
  let armed = false;

  beforeAll(async () => {
    stack = await startStack({
      fixture,
      storage: 's3',
      // About one S3 request in six fails; the SDK makes up to 6 attempts per request. A fixed
      // schedule, not seeded chances: the order of requests across the three processes varies, and
      // a backup this size makes only ~15 uploads, so a chance of 0.08 per upload cut none in ~1 run
      // of 5. Every 9th request is a SlowDown, every 13th a 500, every 7th upload is cut mid-body.
      s3Faults: { decide: faultSchedule(() => armed), latencyMs: [0, 20] },
    });
    [api] = await Promise.all([
      stack.spawn('api', 'api'),
      stack.spawn('node-agent', 'agent', stack.agentEnv('node-a')),
      stack.spawn('worker', 'worker'),
    ]);
    await waitFor('node-a heartbeat', async () => ((await stack.agents.nodesWithAgent()).has('node-a') ? true : undefined), 20_000);
    // What is under test is the backup through the faults; the three processes' concurrent start-up
    // checks through the same fixed schedule could stall one of them past its readiness wait.
    armed = true;
  }, 180_000);

  afterAll(async () => {
    await stack?.close();
  });

  it('completes with every item and PVB, and every object reads back whole', async () => {
    const since = Date.now();
    const res = await fetch(`http://127.0.0.1:${api.port}/v1/backups`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 's3-faults', spec: { includedNamespaces: ['shop'] } }),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    const rec = await waitForBackupEnd(stack.state, 's3-faults', 150_000);
    expect(rec.phase).toBe('Completed');

    const facts = await backupFacts(stack, 's3-faults');
    expect(facts.totalItems).toBeGreaterThan(40);
    expect(facts.itemsBackedUp).toBe(facts.totalItems);
    expect(facts.tarballItems).toBe(facts.totalItems);
    expect(facts.pvbs).toBe(2);
    expect(facts.pvbsCompleted).toBe(2);
    expect(execsOf(stack, 'shop', 'db-0', UNFREEZE, since)).toHaveLength(1);

    const keys = await stack.backupStorage.list('backups/s3-faults/');
    expect(keys).toContain('backups/s3-faults/velero-backup.json');
    for (const key of keys) expect(await stack.backupStorage.getObject(key)).toBeDefined(); // throws on a bad checksum
    // The node agent's packs went through the same faults into the bucket.
    expect((await stack.backupStorage.list('repository/packs/')).length).toBeGreaterThan(0);

    // The faults really happened, to the services' requests.
    const stats = stack.s3FaultProxy!.stats;
    expect(stats.slowDown).toBeGreaterThan(0);
    expect(stats.internalError).toBeGreaterThan(0);
    expect(stats.dropMidUpload).toBeGreaterThan(0);
    recordRun('s3-faults', {
      faults: stats.slowDown + stats.internalError + stats.dropMidUpload,
      backups: 1,
      completed: 1,
      itemsLost: facts.totalItems - facts.itemsBackedUp,
      s3Requests: stats.requests,
    });
  }, 200_000);
});
