import type { RunningWorkers } from '@stowage/pipeline';
import { DispatchWindow, startWorkers, submitBackup } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { useTestRedis } from '@stowage/testing';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, namespace, node, pod } from './support/fixtures.js';
import { type Harness, startHarness, waitForBackupEnd } from './support/harness.js';
import { tarballEntries } from './support/inspect.js';

const FREEZE = ['/bin/freeze'];
const BIG_PODS = 24;
const CAP = 5;
const objects: unknown[] = [
  namespace('big'),
  namespace('small'),
  node('node-a'),
  // Each big block runs a short pre hook, so the big backup is still running when the small one is submitted.
  ...Array.from({ length: BIG_PODS }, (_, i) =>
    pod({
      name: `big-${i}`,
      namespace: 'big',
      annotations: { 'pre.hook.backup.velero.io/command': JSON.stringify(FREEZE) },
      exec: { '*': { rules: [{ command: FREEZE, durationMs: 40 }] } },
    }),
  ),
  pod({ name: 'small-0', namespace: 'small' }),
  pod({ name: 'small-1', namespace: 'small' }),
];

describe(`dispatch window (fairness): at most ${CAP} blocks of a backup in the queues`, () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({
      redisUrl: redisHandle.url,
      fixture: { objects },
      agentNodes: ['node-a'],
      config: { blocksInFlightPerBackup: CAP },
    });
  });
  afterAll(async () => {
    await workers?.close();
    await h?.close();
    await redisHandle?.stop();
  });

  it('a small backup submitted while a big one runs completes before it; the big one never has more than the cap queued or active, and loses nothing', async () => {
    // One item-block slot: the big backup's blocks run one after the other.
    workers = startWorkers({
      deps: h.deps,
      queues: [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks],
      concurrency: { itemBlocks: 1 },
    });
    const itemBlocks = new Queue(QueueName.itemBlocks, { connection: h.redis, prefix: h.queuePrefix });
    const window = new DispatchWindow(h.deps.state);
    const submit = (name: string, ns: string) =>
      submitBackup(
        { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
        { name, spec: backupSpec({ includedNamespaces: [ns] }) },
      );
    // Sampled all along: the big backup's blocks that are queued or in progress.
    let sampling = true;
    const bigInQueue: number[] = [];
    const inflight: number[] = [];
    const sampler = (async () => {
      while (sampling) {
        const jobs = (await itemBlocks.getJobs(['waiting', 'active', 'delayed', 'prioritized', 'paused'])).filter(
          (j) => j?.data?.backupName === 'big',
        );
        // A job that ends a block adds the next one as its last step, so it is still active for a
        // moment after its block is done: blocks queued or in progress are those not yet done.
        const blocks = await h.deps.state.getBlocks(
          'big',
          jobs.map((j) => j.data.blockId as string),
        );
        bigInQueue.push(blocks.filter((b) => b?.completedAt === undefined).length);
        const status = await window.status('big');
        if (status) inflight.push(status.inflight);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    try {
      await submit('big', 'big');
      // The small backup goes in once the big one is under way.
      for (;;) {
        const c = await h.deps.state.counters('big');
        if ((c.blocksDone ?? 0) >= 1) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      await submit('small', 'small');
      expect(await waitForBackupEnd(h.deps.state, 'small', 60_000)).toBe('Completed');
      const bigWhenSmallEnded = await h.deps.state.getBackup('big');
      const bigCounters = await h.deps.state.counters('big');
      expect(bigWhenSmallEnded?.phase).toBe('InProgress');
      expect(bigCounters.blocksDone ?? 0).toBeLessThan(bigCounters.blocksPlanned ?? Number.POSITIVE_INFINITY);

      expect(await waitForBackupEnd(h.deps.state, 'big', 120_000)).toBe('Completed');
    } finally {
      sampling = false;
      await sampler;
      await itemBlocks.close();
    }
    expect(Math.max(...bigInQueue)).toBeLessThanOrEqual(CAP);
    expect(Math.max(...inflight)).toBeLessThanOrEqual(CAP);
    // The window was full at times (the cap, not a slow planner, kept the queue short).
    expect(Math.max(...bigInQueue)).toBe(CAP);

    // Nothing lost: every big pod backed up, each pre hook run once, every block done.
    const counters = await h.deps.state.counters('big');
    expect(counters.blocksDone).toBe(counters.blocksPlanned);
    expect(counters.blocksPlanned).toBeGreaterThanOrEqual(BIG_PODS);
    const entries = tarballEntries(h.storageDir, 'big');
    for (let i = 0; i < BIG_PODS; i++) expect(entries).toContain(`resources/pods/namespaces/big/big-${i}.json`);
    expect(h.sim.execLog({ namespace: 'big' }).filter((e) => e.command.join(' ') === FREEZE.join(' '))).toHaveLength(BIG_PODS);
    expect(tarballEntries(h.storageDir, 'small')).toEqual(
      expect.arrayContaining(['resources/pods/namespaces/small/small-0.json', 'resources/pods/namespaces/small/small-1.json']),
    );
  });
});
