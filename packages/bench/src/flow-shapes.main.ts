/**
 * pnpm bench:flow-shapes [blocks] — what BullMQ alone costs in Redis commands per block, for the
 * job shapes a block could have (issue #23's "≤ 150 Redis commands per fs-backup block"):
 *
 * - `two jobs` (today's, for a block with PVBs or post hooks): `post-hooks ← item-block` under
 *   finalize; the post-hooks job is parked (delayed) when its child ends and promoted when the
 *   block's PVBs end, then runs;
 * - `one job, parked`: the item-block job under finalize parks itself (moveToDelayed) after its
 *   items, is promoted when the PVBs end and runs the post hooks in its second run;
 * - `one job, parked, its second run first`: the same, with new blocks added at a low BullMQ
 *   priority and the parked job raised to a high one before it parks, so its promoted run (the
 *   post hooks) does not wait behind every block queued after it;
 * - `one job` (today's solo block: no PVB, no post hook): one item-block job under finalize.
 *
 * Real redis-server, real BullMQ workers with Stowage's job options (`addBlockFlows`,
 * `childJobOptions`, the park, `promoteParked`, `repark`, KEEP_FINISHED_JOBS) and the bench's
 * deployment (2 worker processes' worth of Workers: item-blocks × 2, hooks × 16 each). The
 * processors do nothing else, so the counts are the queue machinery's own: Stowage's state writes
 * (~69 commands per fs-backup block in `pnpm bench --redis-monitor`) come on top. Commands are
 * INFO commandstats deltas (a script's own commands included), from the first add to the last
 * job's end. Each shape runs twice: with finished jobs kept as today (KEEP_FINISHED_JOBS: 24 h,
 * 10,000 per queue) and removed on completion (`removeOnComplete: { count: 0 }`). Prints a Markdown table
 * and the JSON.
 */

import { blockJobId } from '@stowage/core';
import { startEmbeddedRedis } from '@stowage/platform';
import {
  addBlockFlows,
  childJobOptions,
  createFlowProducer,
  createQueue,
  JobName,
  KEEP_FINISHED_JOBS,
  promoteParked,
  QUEUE_PREFIX,
  QueueName,
  qualifiedQueueName,
  repark,
} from '@stowage/queue';
import { type Job, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { commandStatsDelta, parseCommandStats, sum } from './stats.js';

type Shape = 'two jobs' | 'one job, parked' | 'one job, parked, its second run first' | 'one job';
const SHAPES: readonly Shape[] = ['two jobs', 'one job, parked', 'one job, parked, its second run first', 'one job'];
/** BullMQ priorities (1 is the highest): new blocks low, a promoted second run ahead of them. */
const NEW_BLOCK_PRIORITY = 10;
const SECOND_RUN_PRIORITY = 1;
/** The bench's deployment: 2 worker processes, item-blocks concurrency 2 and hooks 16 in each. */
const PROCESSES = 2;
const ITEM_BLOCK_CONCURRENCY = 2;
const HOOK_CONCURRENCY = 16;
/** How long a job is parked for (postHooksParkMs): it is promoted long before. */
const PARK_MS = 30_000;

interface ShapeResult {
  shape: Shape;
  /** Completed jobs kept (KEEP_FINISHED_JOBS) or removed on completion. */
  finished: 'kept' | 'removed';
  blocks: number;
  jobsPerBlock: number;
  commandsPerBlock: number;
  /** Script calls (EVALSHA/EVAL) per block: a round trip each. */
  scriptCallsPerBlock: number;
  /** Commands per block by name, most first. */
  byCommand: Record<string, number>;
  ms: number;
}

const say = (line: string) => process.stderr.write(`${line}\n`);
const arg = process.argv[2];
if (arg !== undefined && (!/^\d+$/.test(arg) || Number(arg) < 1)) {
  say(`bench:flow-shapes: blocks must be a whole number >= 1, got ${arg}\nusage: pnpm bench:flow-shapes [blocks]`);
  process.exit(2);
}
const BLOCKS = arg === undefined ? 400 : Number(arg);

async function measure(shape: Shape, finishedJobs: ShapeResult['finished'], blocks: number): Promise<ShapeResult> {
  const keep = finishedJobs === 'kept' ? KEEP_FINISHED_JOBS : { ...KEEP_FINISHED_JOBS, removeOnComplete: { count: 0 } };
  const redis = await startEmbeddedRedis();
  const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
  const flowProducer = createFlowProducer({ connection });
  const backups = createQueue(QueueName.backups, { connection });
  const itemBlocks = createQueue(QueueName.itemBlocks, { connection });
  const hooks = createQueue(QueueName.hooks, { connection });
  const workers: Worker[] = [];
  const connections: Redis[] = [];
  try {
    const base = { backupName: 'shapes', backupUid: 'uid-shapes' };
    // finalize waits on a plan child nobody runs: it stays in waiting-children, as while a backup runs.
    await flowProducer.add({
      name: JobName.finalize,
      queueName: QueueName.backups,
      data: base,
      opts: { jobId: 'finalize' },
      children: [{ name: JobName.plan, queueName: QueueName.backups, data: base, opts: { jobId: 'plan' } }],
    });
    const ids = Array.from({ length: blocks }, (_, i) => `blk-${i}`);
    const finalJobsExpected = blocks;
    let finished = 0;
    let done: () => void = () => undefined;
    const allDone = new Promise<void>((resolve) => {
      done = resolve;
    });
    const parkedOnce = new Set<string>();
    const itemBlock = async (job: Job, token?: string) => {
      if (shape.startsWith('one job, parked') && !parkedOnce.has(job.id as string)) {
        parkedOnce.add(job.id as string);
        if (shape === 'one job, parked, its second run first') await job.changePriority({ priority: SECOND_RUN_PRIORITY });
        // Parked after its items; the PVB informer's promotion when the PVBs end (at once here).
        return repark(job, token, PARK_MS, async () => void (await promoteParked(itemBlocks, JobName.backupItemBlock, job.id as string)));
      }
      return { pvbs: [] };
    };
    for (let p = 0; p < PROCESSES; p++) {
      const processConnection = new Redis(redis.url, { maxRetriesPerRequest: null });
      connections.push(processConnection);
      const blocksWorker = new Worker(QueueName.itemBlocks, itemBlock, {
        connection: processConnection,
        prefix: QUEUE_PREFIX,
        concurrency: ITEM_BLOCK_CONCURRENCY,
        ...keep,
      });
      blocksWorker.on('completed', (job: Job) => {
        if (shape === 'two jobs') {
          // releaseBlockTail: the worker that ran the child promotes its parked post-hooks parent.
          void promoteParked(hooks, JobName.runPostHooks, job.parent?.id as string);
        } else if (++finished === finalJobsExpected) done();
      });
      const hooksWorker = new Worker(QueueName.hooks, async () => ({ hooks: 0 }), {
        connection: processConnection,
        prefix: QUEUE_PREFIX,
        concurrency: HOOK_CONCURRENCY,
        ...keep,
      });
      hooksWorker.on('completed', () => {
        if (++finished === finalJobsExpected) done();
      });
      workers.push(blocksWorker, hooksWorker);
    }
    await Promise.all(workers.map((w) => w.waitUntilReady()));
    const before = parseCommandStats(await connection.info('commandstats'));
    const startedAt = Date.now();
    if (shape === 'one job, parked, its second run first') {
      // As addBlockFlows adds a solo block, at a low priority (it takes none).
      const parent = { id: 'finalize', queue: qualifiedQueueName(QUEUE_PREFIX, QueueName.backups) };
      await itemBlocks.addBulk(
        ids.map((blockId) => ({
          name: JobName.backupItemBlock,
          data: { ...base, blockId, solo: true },
          opts: { ...childJobOptions(QueueName.itemBlocks, blockJobId(base.backupName, blockId)), parent, priority: NEW_BLOCK_PRIORITY },
        })),
      );
    } else {
      await addBlockFlows(
        { flowProducer, itemBlocks },
        {
          ...base,
          finalizeJobId: 'finalize',
          blocks: shape === 'two jobs' ? ids : ids.map((id) => ({ id, solo: true })),
          parentKnown: true,
          postHooksParkMs: PARK_MS,
        },
      );
    }
    const timeout = setTimeout(() => done(), 120_000);
    await allDone;
    clearTimeout(timeout);
    const ms = Date.now() - startedAt;
    if (finished !== finalJobsExpected) throw new Error(`${shape}: ${finished} of ${finalJobsExpected} jobs ended within 120 s`);
    const delta = commandStatsDelta(before, parseCommandStats(await connection.info('commandstats')));
    // The measurement's own INFO is not the blocks'.
    delete delta.info;
    const byCommand = Object.fromEntries(
      Object.entries(delta)
        .sort(([, a], [, b]) => b - a)
        .map(([cmd, calls]) => [cmd, Number((calls / blocks).toFixed(2))]),
    );
    return {
      shape,
      finished: finishedJobs,
      blocks,
      jobsPerBlock: shape === 'two jobs' ? 2 : 1,
      commandsPerBlock: sum(Object.values(delta)) / blocks,
      scriptCallsPerBlock: ((delta.evalsha ?? 0) + (delta.eval ?? 0)) / blocks,
      byCommand,
      ms,
    };
  } finally {
    await Promise.allSettled(workers.map((w) => w.close()));
    await Promise.allSettled(connections.map((c) => c.quit()));
    await Promise.allSettled([flowProducer.close(), backups.close(), itemBlocks.close(), hooks.close()]);
    await connection.quit().catch(() => undefined);
    await redis.stop();
  }
}

const results: ShapeResult[] = [];
for (const finishedJobs of ['kept', 'removed'] as const) {
  for (const shape of SHAPES) {
    const r = await measure(shape, finishedJobs, BLOCKS);
    say(
      `  ${shape}, finished jobs ${finishedJobs}: ${r.commandsPerBlock.toFixed(1)} Redis commands per block (${r.scriptCallsPerBlock.toFixed(1)} script calls), ${r.ms} ms`,
    );
    results.push(r);
  }
}
const top = (r: ShapeResult) =>
  Object.entries(r.byCommand)
    .slice(0, 8)
    .map(([cmd, n]) => `${cmd} ${n}`)
    .join(', ');
const lines = [
  `command: \`pnpm bench:flow-shapes${arg === undefined ? '' : ` ${arg}`}\` (${BLOCKS} blocks per shape, ${PROCESSES} × (item-blocks ${ITEM_BLOCK_CONCURRENCY}, hooks ${HOOK_CONCURRENCY}))`,
  '',
  '| shape | jobs per block | completed jobs | BullMQ Redis commands per block | script calls per block | most frequent commands per block |',
  '| --- | ---: | --- | ---: | ---: | --- |',
  ...results.map(
    (r) =>
      `| ${r.shape} | ${r.jobsPerBlock} | ${r.finished} | ${r.commandsPerBlock.toFixed(1)} | ${r.scriptCallsPerBlock.toFixed(1)} | ${top(r)} |`,
  ),
];
process.stdout.write(`${lines.join('\n')}\n\n${JSON.stringify(results, null, 2)}\n`);
process.exit(0);
