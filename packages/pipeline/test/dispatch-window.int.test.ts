import type { RunningWorkers } from '@stowage/pipeline';
import { BackupState, DispatchWindow, startWorkers, submitBackup } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
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
        const jobs = (await itemBlocks.getJobs(['waiting', 'active', 'delayed', 'prioritized'])).filter(
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

describe('DispatchWindow claims (real Redis)', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let redis: Redis;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    redis = new Redis(redisHandle.url, { maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    redis?.disconnect();
    await redisHandle?.stop();
  });

  it('claims in plan order up to the cap, the same again for the same claimer, and the backstop finds what nobody added, once', async () => {
    const state = new BackupState({ redis, prefix: uniquePrefix() });
    const window = new DispatchWindow(state);
    const ids = ['b1', 'b2', 'b3', 'b4', 'b5'];
    await window.open('bk', 2);
    await state.putBlockPlans(
      'bk',
      ids.map((id) => ({ id, plan: { id, pods: [] }, items: [] })),
    );
    const first = await window.claim('bk', 'plan:1', false);
    expect(first.map((c) => c.id)).toEqual(['b1', 'b2']);
    expect(first[0]?.plan).toEqual({ id: 'b1', pods: [] });
    // The plan re-run (a crash after claiming) gets the same blocks, not the next ones.
    expect((await window.claim('bk', 'plan:1', false)).map((c) => c.id)).toEqual(['b1', 'b2']);
    // Full: a claimer that ends no block gets nothing.
    expect(await window.claim('bk', 'plan:2', false)).toEqual([]);
    // b1 ends: its place goes to b3; its re-run gets b3 again and frees nothing more.
    expect((await window.claim('bk', 'job:b1', true)).map((c) => c.id)).toEqual(['b3']);
    expect((await window.claim('bk', 'job:b1', true)).map((c) => c.id)).toEqual(['b3']);
    expect(await window.status('bk')).toMatchObject({ cap: 2, cursor: 3, inflight: 2 });

    // b1 and b2 ran; b3 was claimed but its claimer died before adding it; b4, b5 were never claimed.
    await state.updateBlock('bk', 'b1', { state: 'Completed' });
    await state.updateBlock('bk', 'b2', { state: 'Completed' });
    expect((await window.backstop('bk')).map((c) => c.id).sort()).toEqual(['b3', 'b4', 'b5']);
    // Added by the backstop once: a block that again never starts is not added again.
    expect(await window.backstop('bk')).toEqual([]);
    expect(await window.status('bk')).toMatchObject({ cursor: 5, backstops: 1 });
  });

  it('a solo block ends and frees its place in one script, and a re-run of that step counts, frees and claims nothing more', async () => {
    const state = new BackupState({ redis, prefix: uniquePrefix() });
    const window = new DispatchWindow(state);
    await window.open('bk', 1);
    await state.putBlockPlans(
      'bk',
      ['b1', 'b2'].map((id) => ({ id, plan: { id, pods: [] }, items: [], solo: true })),
    );
    expect((await window.claim('bk', 'plan:1', false)).map((c) => c.id)).toEqual(['b1']);
    const end = {
      set: { state: 'Completed' as const },
      once: [{ onceKey: 'block-done:b1', field: 'blocksDone' }],
      event: { type: 'block.done', data: { blockId: 'b1' }, ifCounted: 0 },
    };
    expect(await window.stepAndClaim('bk', 'b1', end, 'job:b1')).toEqual([{ id: 'b2', solo: true }]);
    // The job dies after the script and runs again: the same claim (its plan read, as any re-run's), counted and freed once.
    const again = [{ id: 'b2', plan: { id: 'b2', pods: [] } }];
    expect(await window.stepAndClaim('bk', 'b1', end, 'job:b1')).toEqual(again);
    expect(await window.claim('bk', 'job:b1', true)).toEqual(again);
    expect(await window.status('bk')).toMatchObject({ cap: 1, cursor: 2, inflight: 1 });
    expect((await state.counters('bk')).blocksDone).toBe(1);
    expect((await state.getBlock('bk', 'b1'))?.state).toBe('Completed');
    expect((await redis.xrange(state.key('bk', 'events'), '-', '+')).filter(([, f]) => f.includes('block.done'))).toHaveLength(1);
  });

  it('gives each claimed block the shape stored with its plan (no plan decoded), across a re-run of plan and blocks planned without one', async () => {
    const state = new BackupState({ redis, prefix: uniquePrefix() });
    const window = new DispatchWindow(state);
    await window.open('bk', 10);
    const block = (id: string, solo?: boolean) => ({ id, plan: { id, pods: [] }, items: [], ...(solo !== undefined ? { solo } : {}) });
    // Planned by a version that stored no shape: judged by its plan.
    await state.putBlockPlans('bk', [block('old')]);
    await state.putBlockPlans('bk', [block('s1', true), block('p1', false)]);
    // A re-run of plan: s1 is known (keeps its value and shape), p2 and s2 are new.
    await state.putBlockPlans('bk', [block('s1', false), block('p2', false), block('s2', true)]);
    const claimed = await window.claim('bk', 'plan:1', false);
    expect(claimed).toEqual([
      { id: 'old', plan: { id: 'old', pods: [] } },
      { id: 's1', solo: true },
      { id: 'p1', solo: false },
      { id: 'p2', solo: false },
      { id: 's2', solo: true },
    ]);
    // A claim run again (its indices are not kept) and finalize's backstop decode plans instead.
    expect((await window.claim('bk', 'plan:1', false)).map((c) => c.plan)).toEqual(claimed.map((c) => ({ id: c.id, pods: [] })));
    await state.putBlockPlans('bk', [block('s3', true)]);
    expect(await window.backstop('bk')).toEqual([
      ...claimed.map((c) => ({ id: c.id, plan: { id: c.id, pods: [] } })),
      { id: 's3', solo: true },
    ]);
  });
});
