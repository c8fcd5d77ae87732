import { blockJobId, finalizeJobId, postHooksJobId, pvbWatchJobId } from '@stowage/core';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { type FlowProducer, type Job, type Processor, type Queue, UnrecoverableError, Worker } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../src/connections.js';
import {
  addBackupFlow,
  addBlockFlows,
  addPvbWatch,
  type BlockFlowProducers,
  createFlowProducer,
  createProducerConnection,
  createQueue,
  createWorkerConnection,
  parseItemBlockJobData,
  parsePvbWatchJobData,
  postHooksParentOf,
  promoteParked,
  QueueName,
  repark,
  wakeParkedIn,
} from '../src/index.js';

let redis: { url: string; stop: () => Promise<void> };
beforeAll(async () => {
  redis = await useTestRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/** Everything one test opens, closed in reverse order afterwards. */
class Harness {
  readonly prefix = uniquePrefix();
  readonly workerConnection: RedisClient;
  readonly producerConnection: RedisClient;
  readonly flow: FlowProducer;
  private readonly workers: Worker[] = [];
  private readonly queues = new Map<QueueName, Queue>();

  constructor(url: string) {
    this.workerConnection = createWorkerConnection(url);
    this.producerConnection = createProducerConnection(url);
    this.flow = createFlowProducer({ connection: this.producerConnection, prefix: this.prefix });
  }

  /** What addBlockFlows adds with. */
  get producers(): BlockFlowProducers {
    return { flowProducer: this.flow, itemBlocks: this.queue(QueueName.itemBlocks) };
  }

  queue(name: QueueName): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = createQueue(name, { connection: this.workerConnection, prefix: this.prefix });
      this.queues.set(name, queue);
    }
    return queue;
  }

  work(name: QueueName, processor: Processor, concurrency = 4): Worker {
    const worker = new Worker(name, processor, { connection: this.workerConnection, prefix: this.prefix, concurrency });
    worker.on('error', () => {});
    this.workers.push(worker);
    return worker;
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.close()));
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    await this.flow.close();
    this.workerConnection.disconnect();
    this.producerConnection.disconnect();
  }
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function stateOf(queue: Queue, id: string): Promise<string> {
  return (await queue.getJobState(id)) as string;
}

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const BACKUP = 'nightly';
const UID = 'uid-1';

/** The item-block processor shape of docs/architecture.md#the-backup-job-graph: attach one pvb-watch per PVB under the post-hooks parent, return. */
function itemBlockAttaching(h: Harness, pvbsOfBlock: Record<string, string[]>): Processor {
  return async (job: Job) => {
    const data = parseItemBlockJobData(job.data);
    const parent = postHooksParentOf(job);
    for (const pvbName of pvbsOfBlock[data.blockId] ?? []) {
      await addPvbWatch(h.queue(QueueName.pvbWatch), parent, { ...data, pvbName, namespace: 'stowage', deadlineAt: Date.now() + 60_000 });
    }
    return { block: data.blockId, items: 1 };
  };
}

describe('block flow graph (docs/architecture.md#the-backup-job-graph)', () => {
  it('runs post-hooks only after its item-block and the pvb-watch children attached at run time', async () => {
    const h = new Harness(redis.url);
    harness = h;
    const { finalizeJobId: fid } = await addBackupFlow(h.flow, { backupName: BACKUP, backupUid: UID });
    await addBlockFlows(h.producers, { backupName: BACKUP, backupUid: UID, finalizeJobId: fid, blocks: ['blk-a'] });

    const terminal = new Set<string>();
    const completedWatches: string[] = [];
    let postHooksSaw: { values: Record<string, unknown>; watchesDoneBefore: number } | undefined;

    h.work(QueueName.itemBlocks, itemBlockAttaching(h, { 'blk-a': ['pvb-1', 'pvb-2'] }));
    h.work(QueueName.pvbWatch, async (job, token) => {
      const data = parsePvbWatchJobData(job.data);
      if (!terminal.has(data.pvbName)) return repark(job, token, 30);
      completedWatches.push(data.pvbName);
      return { phase: 'Completed', pvb: data.pvbName };
    });
    h.work(QueueName.hooks, async (job) => {
      postHooksSaw = { values: await job.getChildrenValues(), watchesDoneBefore: completedWatches.length };
      return 'ok';
    });

    const hooks = h.queue(QueueName.hooks);
    const postHooksId = postHooksJobId(BACKUP, 'blk-a');
    await waitFor(
      'item-block to complete',
      async () => (await stateOf(h.queue(QueueName.itemBlocks), blockJobId(BACKUP, 'blk-a'))) === 'completed',
    );
    // The item-block is done but its PVBs are not: post-hooks must still be waiting.
    await waitFor('pvb-watch jobs to be parked', async () => (await h.queue(QueueName.pvbWatch).getDelayedCount()) === 2);
    expect(await stateOf(hooks, postHooksId)).toBe('waiting-children');
    const parentJob = await hooks.getJob(postHooksId);
    expect(await parentJob?.getDependenciesCount()).toMatchObject({ processed: 1, unprocessed: 2 });

    terminal.add('pvb-1');
    await waitFor('first watch to complete', () => completedWatches.length === 1);
    expect(await stateOf(hooks, postHooksId)).toBe('waiting-children');
    expect(postHooksSaw).toBeUndefined();

    terminal.add('pvb-2');
    await waitFor('post-hooks to run', () => postHooksSaw !== undefined);
    expect(postHooksSaw?.watchesDoneBefore).toBe(2);
    const values = Object.entries(postHooksSaw?.values ?? {});
    expect(values).toHaveLength(3);
    expect(values.map(([key]) => key.split(':').at(-1)).sort()).toEqual(
      [blockJobId(BACKUP, 'blk-a'), pvbWatchJobId(BACKUP, 'pvb-1'), pvbWatchJobId(BACKUP, 'pvb-2')].sort(),
    );
  });

  it('a solo block is one item-block job under finalize (no post-hooks job); finalize waits for it and sees its value', async () => {
    const h = new Harness(redis.url);
    harness = h;
    const { finalizeJobId: fid } = await addBackupFlow(h.flow, { backupName: BACKUP, backupUid: UID });
    await addBlockFlows(h.producers, {
      backupName: BACKUP,
      backupUid: UID,
      finalizeJobId: fid,
      blocks: [{ id: 'blk-solo', solo: true }, 'blk-pair'],
    });

    const hooks = h.queue(QueueName.hooks);
    expect(await hooks.getJob(postHooksJobId(BACKUP, 'blk-solo'))).toBeUndefined();
    expect(await stateOf(hooks, postHooksJobId(BACKUP, 'blk-pair'))).toBe('waiting-children');
    const solo = await h.queue(QueueName.itemBlocks).getJob(blockJobId(BACKUP, 'blk-solo'));
    expect(parseItemBlockJobData(solo?.data).solo).toBe(true);
    expect(solo?.parent?.id).toBe(fid);

    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    h.work(QueueName.itemBlocks, async (job) => {
      const data = parseItemBlockJobData(job.data);
      if (data.solo) await gate;
      return { block: data.blockId };
    });
    h.work(QueueName.hooks, async () => 'ran');
    let finalizeSaw: Record<string, unknown> | undefined;
    h.work(QueueName.backups, async (job) => {
      if (job.name === 'finalize') finalizeSaw = await job.getChildrenValues();
      return 'ok';
    });
    await waitFor('the pair to finish', async () => (await stateOf(hooks, postHooksJobId(BACKUP, 'blk-pair'))) === 'completed');
    await new Promise((r) => setTimeout(r, 200));
    expect(finalizeSaw).toBeUndefined();
    release();
    await waitFor('finalize to run', () => finalizeSaw !== undefined);
    expect(Object.entries(finalizeSaw ?? {}).find(([key]) => key.endsWith(`:${blockJobId(BACKUP, 'blk-solo')}`))?.[1]).toEqual({
      block: 'blk-solo',
    });
  });

  it('does not strand a parent when a child fails for good; the parent sees the failure', async () => {
    const h = new Harness(redis.url);
    harness = h;
    const { finalizeJobId: fid } = await addBackupFlow(h.flow, { backupName: BACKUP, backupUid: UID });
    await addBlockFlows(h.producers, { backupName: BACKUP, backupUid: UID, finalizeJobId: fid, blocks: ['blk-ok', 'blk-bad'] });

    const attach = itemBlockAttaching(h, { 'blk-ok': ['pvb-broken'] });
    h.work(QueueName.itemBlocks, async (job, token) => {
      if (parseItemBlockJobData(job.data).blockId === 'blk-bad') throw new UnrecoverableError('apiserver said no');
      return attach(job, token);
    });
    h.work(QueueName.pvbWatch, async () => {
      throw new UnrecoverableError('PVB phase=Failed');
    });
    const failuresSeen = new Map<string, Record<string, string>>();
    h.work(QueueName.hooks, async (job) => {
      failuresSeen.set(job.id ?? '?', await job.getIgnoredChildrenFailures());
      return 'ran';
    });

    await waitFor('both post-hooks jobs to run', () => failuresSeen.size === 2);
    const okFailures = failuresSeen.get(postHooksJobId(BACKUP, 'blk-ok')) ?? {};
    const badFailures = failuresSeen.get(postHooksJobId(BACKUP, 'blk-bad')) ?? {};
    expect(Object.keys(okFailures).map((k) => k.split(':').at(-1))).toEqual([pvbWatchJobId(BACKUP, 'pvb-broken')]);
    expect(Object.values(okFailures)).toEqual(['PVB phase=Failed']);
    expect(Object.keys(badFailures).map((k) => k.split(':').at(-1))).toEqual([blockJobId(BACKUP, 'blk-bad')]);
    expect(Object.values(badFailures)).toEqual(['apiserver said no']);
  });

  it('treats re-adding the same backup and block flows as a no-op', async () => {
    const h = new Harness(redis.url);
    harness = h;
    const blocks = ['blk-1', 'blk-2', 'blk-3'];
    for (let i = 0; i < 2; i++) {
      const { finalizeJobId: fid } = await addBackupFlow(h.flow, { backupName: BACKUP, backupUid: UID, requestId: `req-${i}` });
      const result = await addBlockFlows(h.producers, { backupName: BACKUP, backupUid: UID, finalizeJobId: fid, blocks, batchSize: 2 });
      expect(result).toEqual({ blocks: 3, batches: 2 });
    }
    const counts = async (name: QueueName) => {
      const c = await h.queue(name).getJobCounts('waiting', 'waiting-children', 'delayed', 'active');
      return Object.values(c).reduce((a, b) => a + b, 0);
    };
    expect(await counts(QueueName.backups)).toBe(2);
    expect(await counts(QueueName.hooks)).toBe(3);
    expect(await counts(QueueName.itemBlocks)).toBe(3);
    const finalize = await h.queue(QueueName.backups).getJob(finalizeJobId(BACKUP));
    expect(await finalize?.getDependenciesCount()).toMatchObject({ unprocessed: 4 });
    // The first add wins: the stored payload is the first request's.
    expect(finalize?.data).toMatchObject({ requestId: 'req-0' });

    const runs = new Map<string, number>();
    const count = async (job: Job) => {
      runs.set(job.id ?? '?', (runs.get(job.id ?? '?') ?? 0) + 1);
      return 'ok';
    };
    h.work(QueueName.backups, count);
    h.work(QueueName.itemBlocks, count);
    h.work(QueueName.hooks, count);
    await waitFor('finalize to run', () => runs.has(finalizeJobId(BACKUP)));
    expect(runs.size).toBe(2 + 3 + 3);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
  });

  it('runs finalize only after plan and every block, with blocks starting while plan adds batches', async () => {
    const h = new Harness(redis.url);
    harness = h;
    const log: string[] = [];
    const blocksDone = new Set<string>();
    let finalizeSaw: Record<string, unknown> | undefined;

    h.work(QueueName.backups, async (job) => {
      if (job.name === 'plan') {
        log.push('plan:start');
        const fid = finalizeJobId(BACKUP);
        const first = await addBlockFlows(h.producers, {
          backupName: BACKUP,
          backupUid: UID,
          finalizeJobId: fid,
          blocks: ['blk-1', 'blk-2'],
          batchSize: 1,
        });
        // Blocks must run while plan is still going: wait until the first batch finished.
        await waitFor('first blocks to finish during plan', () => blocksDone.size === 2);
        log.push('plan:first-blocks-done');
        const rest = await addBlockFlows(h.producers, {
          backupName: BACKUP,
          backupUid: UID,
          finalizeJobId: fid,
          blocks: ['blk-3', 'blk-4', 'blk-5'],
          batchSize: 2,
        });
        log.push('plan:end');
        return { batches: first.batches + rest.batches };
      }
      log.push('finalize');
      finalizeSaw = await job.getChildrenValues();
      return 'done';
    });
    h.work(QueueName.itemBlocks, async (job) => ({ block: parseItemBlockJobData(job.data).blockId }));
    h.work(QueueName.hooks, async (job) => {
      const block = parseItemBlockJobData(job.data).blockId;
      blocksDone.add(block);
      log.push(`post-hooks:${block}`);
      return { block };
    });

    await addBackupFlow(h.flow, { backupName: BACKUP, backupUid: UID });
    await waitFor('finalize to run', () => finalizeSaw !== undefined);

    expect(log.indexOf('plan:first-blocks-done')).toBeLessThan(log.indexOf('plan:end'));
    expect(log.at(-1)).toBe('finalize');
    expect(log.filter((entry) => entry.startsWith('post-hooks:'))).toHaveLength(5);
    const childIds = Object.keys(finalizeSaw ?? {}).map((k) => k.split(':').at(-1));
    expect(childIds.sort()).toEqual(
      ['nightly.plan', ...['blk-1', 'blk-2', 'blk-3', 'blk-4', 'blk-5'].map((b) => postHooksJobId(BACKUP, b))].sort(),
    );
    expect(Object.values(finalizeSaw ?? {})).toContainEqual({ batches: 4 });
  });

  it('parks pvb-watch jobs without holding a slot, and promote() wakes one at once', async () => {
    const h = new Harness(redis.url);
    harness = h;
    const { finalizeJobId: fid } = await addBackupFlow(h.flow, { backupName: BACKUP, backupUid: UID });
    await addBlockFlows(h.producers, { backupName: BACKUP, backupUid: UID, finalizeJobId: fid, blocks: ['blk-a'] });
    const pvbs = ['pvb-1', 'pvb-2', 'pvb-3'];
    const terminal = new Set<string>();
    const polled = new Set<string>();
    let postHooksRan = false;

    h.work(QueueName.itemBlocks, itemBlockAttaching(h, { 'blk-a': pvbs }));
    h.work(
      QueueName.pvbWatch,
      async (job, token) => {
        const data = parsePvbWatchJobData(job.data);
        polled.add(data.pvbName);
        // A re-park far longer than the test's bound: only promote() can wake it in time.
        if (!terminal.has(data.pvbName)) return repark(job, token, 10 * 60_000);
        return { phase: 'Completed' };
      },
      1,
    );
    h.work(QueueName.hooks, async () => {
      postHooksRan = true;
      return 'ok';
    });

    const watchQueue = h.queue(QueueName.pvbWatch);
    // With concurrency 1, every job is polled: a parked job does not keep the slot.
    await waitFor('every pvb-watch to be polled and parked', async () => polled.size === 3 && (await watchQueue.getDelayedCount()) === 3);
    for (const pvb of pvbs) {
      terminal.add(pvb);
      const job = await watchQueue.getJob(pvbWatchJobId(BACKUP, pvb));
      await job?.promote();
    }
    await waitFor('post-hooks after promoted watches', () => postHooksRan);
    expect(await watchQueue.getCompletedCount()).toBe(3);
  });

  it("wakeParkedIn moves a parked job's wake-up; promoteParked wakes it now; both say false for a job not parked", async () => {
    const h = new Harness(redis.url);
    harness = h;
    const queue = h.queue(QueueName.hooks);
    const ran: string[] = [];
    await queue.add('parked', {}, { jobId: 'sleeper', delay: 10 * 60_000 });
    await queue.add('parked', {}, { jobId: 'woken', delay: 10 * 60_000 });
    const wakesAt = async (id: string) => Math.floor(Number(await h.producerConnection.zscore(queue.toKey('delayed'), id)) / 0x1000);

    // Later, then sooner: the wake-up follows, from now.
    expect(await wakeParkedIn(queue, 'parked', 'sleeper', 20 * 60_000)).toBe(true);
    expect(await wakesAt('sleeper')).toBeGreaterThan(Date.now() + 15 * 60_000);
    expect(await wakeParkedIn(queue, 'parked', 'sleeper', 200)).toBe(true);
    expect(await wakesAt('sleeper')).toBeLessThanOrEqual(Date.now() + 200);
    expect(await promoteParked(queue, 'parked', 'woken')).toBe(true);
    h.work(QueueName.hooks, async (job) => {
      ran.push(String(job.id));
      return 'ok';
    });
    await waitFor('both jobs to run', () => ran.length === 2);
    expect(ran.sort()).toEqual(['sleeper', 'woken']);

    // Done, or never added: nothing parked to move.
    expect(await wakeParkedIn(queue, 'parked', 'sleeper', 100)).toBe(false);
    expect(await promoteParked(queue, 'parked', 'sleeper')).toBe(false);
    expect(await wakeParkedIn(queue, 'parked', 'nobody', 100)).toBe(false);
    await expect(wakeParkedIn(queue, 'parked', 'woken', -1)).rejects.toThrow(/delayMs/);
  });
});
