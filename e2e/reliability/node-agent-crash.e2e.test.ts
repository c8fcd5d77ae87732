/*
 * The node agent SIGKILLed mid-copy and started again (a DaemonSet pod restarting): the PVB it
 * was copying ends Completed or Failed with a message (never left InProgress), the block's post
 * hook runs after it, and the backup's phase tells the truth about it.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupFacts, execsOf, FREEZE, namespace, node, pod, pvbsOf, UNFREEZE } from './support/fixtures.js';
import { recordRun } from './support/run-figures.js';
import { type ServiceProcess, type Stack, startStack, waitFor, waitForBackupEnd } from './support/stack.js';

const fixture = {
  objects: [
    namespace('shop'),
    namespace('stowage'),
    node('node-a'),
    pod({ name: 'db-0', node: 'node-a', volumes: [{ name: 'data', mib: 6 }], pre: FREEZE, post: UNFREEZE }),
    pod({ name: 'web-0', node: 'node-a', volumes: [{ name: 'cache', mib: 1 }] }),
  ],
};

// The same run with backup storage in a directory and in an S3 bucket (a private S3 server).
describe.each(['directory', 's3'] as const)('node agent killed mid-copy and restarted, backup storage on %s', (storage) => {
  let stack: Stack;
  let api: ServiceProcess;
  let agent: ServiceProcess;

  beforeAll(async () => {
    stack = await startStack({ fixture, storage });
    // ~1 MiB/s: the 6 MiB volume takes about six seconds, long enough to be cut off mid-copy.
    const agentEnv = stack.agentEnv('node-a', { STOWAGE_BANDWIDTH_LIMIT: '1MiB' });
    [api, agent] = await Promise.all([
      stack.spawn('api', 'api'),
      stack.spawn('node-agent', 'agent-1', agentEnv),
      stack.spawn('worker', 'worker'),
    ]);
    // The agent's heartbeat tells the planner node-a has an agent.
    await waitFor('node-a heartbeat', async () => ((await stack.agents.nodesWithAgent()).has('node-a') ? true : undefined), 20_000);
  }, 180_000);

  afterAll(async () => {
    await stack?.close();
  });

  it('the PVB ends Completed or Failed with a message, the post hook runs after it, the phase tells the truth', async () => {
    const since = Date.now();
    const res = await fetch(`http://127.0.0.1:${api.port}/v1/backups`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'agent-crash', spec: { includedNamespaces: ['shop'] } }),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    const copying = await waitFor(
      'db-0 PVB copying',
      async () => {
        const pvb = (await pvbsOf(stack, 'agent-crash')).find((p) => p.spec.pod.name === 'db-0');
        return pvb?.status?.phase === 'InProgress' && (pvb.status.progress?.bytesDone ?? 0) > 0 ? pvb : undefined;
      },
      90_000,
    );
    await agent.killHard();
    // Nothing moves it while no agent runs: no post hook yet, the PVB still InProgress.
    await new Promise((r) => setTimeout(r, 1_500));
    const stuck = (await pvbsOf(stack, 'agent-crash')).find((p) => p.metadata.name === copying.metadata.name);
    expect(stuck?.status?.phase).toBe('InProgress');
    expect(execsOf(stack, 'shop', 'db-0', UNFREEZE, since)).toHaveLength(0);

    agent = await stack.spawn('node-agent', 'agent-2', stack.agentEnv('node-a', { STOWAGE_BANDWIDTH_LIMIT: '4MiB' }));
    const rec = await waitForBackupEnd(stack.state, 'agent-crash', 120_000);

    const pvbs = await pvbsOf(stack, 'agent-crash');
    expect(pvbs).toHaveLength(2);
    const cut = pvbs.find((p) => p.metadata.name === copying.metadata.name);
    expect(['Completed', 'Failed']).toContain(cut?.status?.phase);
    if (cut?.status?.phase === 'Failed') expect(cut.status.message?.length ?? 0).toBeGreaterThan(10);
    // The post hook ran once, after the PVB reached its final phase.
    const posts = execsOf(stack, 'shop', 'db-0', UNFREEZE, since);
    expect(posts).toHaveLength(1);
    expect(posts[0]?.exitCode).toBe(0);
    expect(Date.parse(posts[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(cut?.status?.completionTimestamp ?? 'x'));
    // The phase tells the truth: Completed only if every PVB completed.
    const facts = await backupFacts(stack, 'agent-crash');
    const allCompleted = pvbs.every((p) => p.status?.phase === 'Completed');
    expect(rec.phase).toBe(allCompleted ? 'Completed' : 'PartiallyFailed');
    expect(facts.itemsBackedUp).toBe(facts.totalItems);
    expect(facts.tarballItems).toBe(facts.totalItems);
    const counters = await stack.state.counters('agent-crash');
    expect((counters.pvbsCompleted ?? 0) + (counters.pvbsFailed ?? 0)).toBe(2);
    const view = (await (
      await fetch(`http://127.0.0.1:${api.port}/v1/backups/agent-crash`, { headers: { authorization: `Bearer ${stack.token}` } })
    ).json()) as { phase: string };
    expect(view.phase).toBe(rec.phase);
    if (storage === 's3') {
      // Everything finalize wrote is in the bucket, and reads back whole (checksums verified).
      const keys = await stack.backupStorage.list('backups/agent-crash/');
      expect(keys).toEqual(
        expect.arrayContaining([
          'backups/agent-crash/velero-backup.json',
          'backups/agent-crash/agent-crash.tar.gz',
          'backups/agent-crash/agent-crash-podvolumebackups.json.gz',
        ]),
      );
      for (const key of keys) expect(await stack.backupStorage.getObject(key)).toBeDefined();
      // The volume data went into the bucket too (the repository beside the backups), not to a local directory.
      const repository = await stack.backupStorage.list('repository/');
      expect(repository).toContain('repository/config.json');
      expect(repository.some((key) => key.startsWith('repository/snapshots/'))).toBe(true);
      expect(repository.some((key) => key.startsWith('repository/packs/'))).toBe(true);
      expect(await stack.backupStorage.list('')).toEqual([...keys, ...repository].sort()); // nothing else
      expect(existsSync(join(stack.storageDir, 'repository'))).toBe(false);
    }
    recordRun(storage === 's3' ? 'node-agent-crash-s3' : 'node-agent-crash', {
      faults: 1,
      backups: 1,
      completed: rec.phase === 'Completed' ? 1 : 0,
      itemsLost: facts.totalItems - facts.itemsBackedUp,
      cutPvbPhase: cut?.status?.phase ?? 'missing',
    });
  }, 240_000);
});
