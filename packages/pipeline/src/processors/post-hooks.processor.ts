import { blockJobId, pvbWatchJobId } from '@stowage/core';
import { parsePostHooksJobData, QueueName, qualifiedQueueName, repark } from '@stowage/queue';
import type { Job } from 'bullmq';
import { z } from 'zod';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import type { BlockPlan } from '../plan/block-plan.js';
import { isPvbSettled } from '../pvb/pvb-observation.js';
import { pvbTracker, type WatchProgress, watchProgressSchema } from '../pvb/pvb-wait-step.js';
import type { PipelineRuntime } from '../runtime.js';
import {
  blockSnapshots,
  lookAtBlockCuts,
  recheckSnapshots,
  type SnapshotStateRecord,
  settleBlockSnapshots,
  snapshotField,
  snapshotParkMs,
} from '../snapshots/block-snapshots.js';
import type { BlockTail, PvbStateRecord } from '../state/backup-state.js';
import { watchProgressChanged } from '../volume-ops/volume-op-wait-step.js';
import { afterEndRecords, reparkWatching, watchVolumeOps } from '../volume-ops/watch-volume-ops.js';
import {
  type FinishBlockInput,
  finishBlock,
  type PostHooksRan,
  runBlockPostHooks,
  settleOrphanedPvbs,
  writeBlockEnd,
} from './block-post-hooks.js';
import type { ItemBlockResult } from './item-block.processor.js';

/** Poll state of orphaned PVBs between re-parks (in the post-hooks job's data under `orphans`). */
const orphanProgressSchema = z.record(z.string(), watchProgressSchema);

export type PostHooksResult = { skipped: 'inline' | 'canceled' } | { state: string; postHookPods: number; hooksFailed: number };

/**
 * post-hooks: BullMQ releases it when its child, the item-block job, is done (completed or failed
 * for good; backups started by older versions also had a pvb-watch child per PVB). It reads the
 * child's value and failure, then waits for every PVB of the block to be terminal — watching them
 * itself, re-parked without a slot and promoted by the PVB informer, or, when the item-block job
 * failed for good, winding them down (settleOrphanedPvbs) — and only then runs the block's post
 * hooks (finishBlock).
 */
export async function processPostHooks(rt: PipelineRuntime, job: Job, token: string | undefined): Promise<PostHooksResult> {
  const { deps } = rt;
  const data = parsePostHooksJobData(job.data);
  const { backupName, blockId } = data;
  const prefix = deps.queuePrefix;
  // Everything the block's tail starts from, at once: the post hook waits on this chain.
  const [values, tail] = await Promise.all([job.getChildrenValues(), deps.state.readBlockTail<BlockPlan>(backupName, blockId)]);
  const blockKey = `${qualifiedQueueName(prefix, QueueName.itemBlocks)}:${blockJobId(backupName, blockId)}`;
  const blockValue = values[blockKey] as ItemBlockResult | undefined;
  // The item-block job completed and was the only child: no failure to read. Otherwise (it failed,
  // or an older version added a pvb-watch child per PVB) the failures are read.
  const failures = blockValue !== undefined && !mayHaveWatchChildren(blockValue) ? {} : await job.getIgnoredChildrenFailures();
  const blockFailed = failures[blockKey];

  // A BlockWait (the benchmark's inline mode) ran the post hooks in the item-block job already.
  if (blockValue && 'inline' in blockValue && blockValue.inline) return { skipped: 'inline' };
  if (blockValue?.canceled) {
    await deps.state.countOnce(backupName, `block-done:${blockId}`, 'blocksDone');
    return { skipped: 'canceled' };
  }

  const { plan } = tail;
  if (!plan) throw new UnrecoverablePipelineError(PipelineErrorCode.blockMissing, `backup ${backupName} has no plan for block ${blockId}`);
  const cancelRequested = async () => (await deps.state.cancelRequestedAt(backupName)) !== undefined;
  const finishInput: FinishBlockInput = {
    backupName,
    blockId,
    plan,
    attempt: job.attemptsMade + 1,
    ...(blockFailed !== undefined ? { blockJobFailed: blockFailed } : {}),
  };
  // The post hooks ran at an earlier wake (at the cut): the block's snapshots settle, then its end.
  const ranBefore = tail.block?.postHooksDone as PostHooksRan | undefined;
  if (ranBefore) return settleSnapshotsThenEnd(rt, job, token, finishInput, tail, ranBefore, blockSnapshots(tail.block));
  if (blockFailed !== undefined) {
    await deps.state.recordProblem(backupName, {
      level: 'error',
      onceKey: `block-failed:${blockId}`,
      msg: `item-block job of ${blockId} failed: ${blockFailed}`,
      blockId,
    });
  }
  // A PVB left without a watcher (its block job, or a watch job an older version added, failed for
  // good) may still be copying: never run post hooks before it stops (or the bounded cancel wait
  // ends). Wait without holding a slot.
  const childFailed = Object.keys(failures).length > 0;
  if (childFailed) {
    const watchPrefix = `${qualifiedQueueName(prefix, QueueName.pvbWatch)}:`;
    const orphans = await settleOrphanedPvbs(deps, {
      backupName,
      blockId,
      blockJobFailed: blockFailed,
      failedWatchOf: (name) => {
        const reason = failures[`${watchPrefix}${pvbWatchJobId(backupName, name)}`];
        return reason === undefined ? undefined : `pvb-watch job failed: ${reason}`;
      },
      progress: orphanProgressSchema.parse((job.data as { orphans?: unknown }).orphans ?? {}),
    });
    if (!orphans.settled) {
      await job.updateData({ ...(job.data as object), orphans: orphans.progress });
      return repark(job, token, orphans.recheckInMs);
    }
    // Settling orphans changed PVB records: the tail is read again. Snapshots a dead item-block
    // job left uncut are deleted (as at a cancel): nobody keeps the freeze for them.
    const settledTail = await deps.state.readBlockTail<BlockPlan>(backupName, blockId);
    const cuts = await lookAtBlockCuts(deps, {
      backupName,
      blockId,
      records: blockSnapshots(settledTail.block),
      cancelRequested: async () => true,
      timeoutMs: await csiSnapshotTimeoutMs(rt, backupName),
    });
    return hooksAtTheCut(rt, job, token, finishInput, settledTail, cuts.records);
  }
  // The block's PVBs are watched here (no job per PVB): one look at each PVB not settled yet, then
  // re-parked until they all are; every worker's PVB informer promotes this job the moment the
  // block's last PVB ends.
  const progress = watchesSchema.parse((job.data as { watch?: unknown }).watch ?? {});
  const watched = await watchBlockPvbs(rt, {
    backupName,
    tail,
    // Read only if a PVB is still running when looked at (a cancel winds it down).
    cancelRequested: async () => (await deps.state.cancelRequestedAt(backupName)) !== undefined,
    deadlineAt: blockValue?.deadlineAt,
    readAt: blockValue?.pvbsReadAt,
    progress,
  });
  // The block's snapshots: one look at each not cut yet (the post hooks wait for cuts, not for
  // readiness or data movement).
  const snapshotRecords = blockSnapshots(tail.block);
  const cuts =
    snapshotRecords.length > 0
      ? await lookAtBlockCuts(deps, {
          backupName,
          blockId,
          records: snapshotRecords,
          cancelRequested,
          timeoutMs: await csiSnapshotTimeoutMs(rt, backupName),
        })
      : ({ settled: true, records: [] } as const);
  if (watched.settled && !cuts.settled) {
    await watched.recording;
    // A healthy snapshot informer promotes the job at the next cut: it parks until a real read is due.
    const parkMs = snapshotParkMs(rt.snapshotHub, cuts.records, {
      recheckInMs: cuts.recheckInMs,
      now: deps.clock.now(),
      realReadEveryMs: deps.config.pvbRealReadEveryMs,
      timeoutMs: await csiSnapshotTimeoutMs(rt, backupName),
    });
    return reparkWatching(rt, job, token, parkMs, { cancelRequested, recheck: recheckSnapshots(rt.snapshotHub, cuts.records) });
  }
  if (!watched.settled) {
    if (watchProgressChanged(progress, watched.progress)) await job.updateData({ ...(job.data as object), watch: watched.progress });
    // A look may have read the cache just before the last end arrived, or the cancel flag just
    // before a cancel, whose wake-up then found this job running, not parked: both looked at again once parked.
    return reparkWatching(rt, job, token, cuts.settled ? watched.recheckInMs : Math.min(watched.recheckInMs, cuts.recheckInMs), {
      recheck: () => rt.hub?.promoteIfDue(watched.open),
      cancelSeen: watched.cancelSeen,
      cancelRequested: async () => (await deps.state.cancelRequestedAt(backupName)) !== undefined,
    });
  }
  return afterEndRecords(watched.recording, () => hooksAtTheCut(rt, job, token, finishInput, watched.tail, cuts.records));
}

/** The backup's csiSnapshotTimeout (Velero's default 10 minutes for specs without it). */
async function csiSnapshotTimeoutMs(rt: PipelineRuntime, backupName: string): Promise<number> {
  const record = await rt.deps.state.getBackup(backupName);
  const timeout = (record?.spec as { csiSnapshotTimeoutMs?: unknown } | undefined)?.csiSnapshotTimeoutMs;
  return typeof timeout === 'number' && timeout > 0 ? timeout : 10 * 60_000;
}

/** The tail with the snapshot records as the looks left them. */
function withSnapshots(tail: BlockTail<BlockPlan>, records: readonly SnapshotStateRecord[]): BlockTail<BlockPlan> {
  if (records.length === 0 || !tail.block) return tail;
  return { ...tail, block: { ...tail.block, ...Object.fromEntries(records.map((r) => [snapshotField(r.name), r])) } };
}

/**
 * Every PVB terminal and every snapshot cut or failed: the post hooks run now. A block without
 * snapshots ends here; one with snapshots records that its hooks ran (`postHooksDone`: a later
 * wake never runs them again) and goes on until its snapshots are ready or their data moved.
 */
async function hooksAtTheCut(
  rt: PipelineRuntime,
  job: Job,
  token: string | undefined,
  input: FinishBlockInput,
  readTail: BlockTail<BlockPlan>,
  snapshots: readonly SnapshotStateRecord[],
): Promise<PostHooksResult> {
  const { deps } = rt;
  const tail = withSnapshots(readTail, snapshots);
  if (snapshots.length === 0) return finishBlock(deps, input, tail);
  const ran = await runBlockPostHooks(deps, input, tail);
  await deps.state.updateBlock(input.backupName, input.blockId, { postHooksDone: ran });
  return settleSnapshotsThenEnd(rt, job, token, input, tail, ran, snapshots);
}

/** After the post hooks: the block's snapshots until each is settled (re-parked between looks), then the block's end. */
async function settleSnapshotsThenEnd(
  rt: PipelineRuntime,
  job: Job,
  token: string | undefined,
  input: FinishBlockInput,
  tail: BlockTail<BlockPlan>,
  ran: PostHooksRan,
  snapshots: readonly SnapshotStateRecord[],
): Promise<PostHooksResult> {
  const { deps } = rt;
  const cancelRequested = async () => (await deps.state.cancelRequestedAt(input.backupName)) !== undefined;
  const timeoutMs = await csiSnapshotTimeoutMs(rt, input.backupName);
  const look = await settleBlockSnapshots(deps, {
    backupName: input.backupName,
    blockId: input.blockId,
    records: snapshots,
    cancelRequested,
    timeoutMs,
  });
  if (!look.settled) {
    // Snapshots waiting to be ready: a healthy snapshot informer promotes the job when one is.
    const parkMs = snapshotParkMs(rt.snapshotHub, look.records, {
      recheckInMs: look.recheckInMs,
      now: deps.clock.now(),
      realReadEveryMs: deps.config.pvbRealReadEveryMs,
      timeoutMs,
    });
    return reparkWatching(rt, job, token, parkMs, { cancelRequested, recheck: recheckSnapshots(rt.snapshotHub, look.records) });
  }
  return writeBlockEnd(deps, input, tail, ran, look.records);
}

/**
 * The item-block job of a backup started by an older version, which added a pvb-watch child per
 * PVB (one may have failed for good): its result has PVBs but no deadline (this version's always
 * has one with PVBs).
 */
function mayHaveWatchChildren(value: ItemBlockResult): boolean {
  return !value.canceled && value.pvbs.length > 0 && value.deadlineAt === undefined;
}

/** Poll state of each watched PVB between re-parks (in the post-hooks job's data under `watch`). */
const watchesSchema = z.record(z.string(), watchProgressSchema);

type BlockPvbsWatch =
  /** `recording`: the records of the PVBs seen ending, sent (see VolumeOpsWatch); awaited before the job ends. */
  | { settled: true; tail: BlockTail<BlockPlan>; recording: Promise<void> }
  | { settled: false; recheckInMs: number; progress: Record<string, WatchProgress>; open: string; cancelSeen: boolean };

/**
 * The block's PVBs through watchVolumeOps (one look at each not settled in the tail just read).
 * Settled: the tail with the PVB records as they now are (no read back).
 */
async function watchBlockPvbs(
  rt: PipelineRuntime,
  input: {
    backupName: string;
    tail: BlockTail<BlockPlan>;
    cancelRequested: () => Promise<boolean>;
    deadlineAt: number | undefined;
    readAt: number | undefined;
    progress: Readonly<Record<string, WatchProgress>>;
  },
): Promise<BlockPvbsWatch> {
  const { deps } = rt;
  const { backupName, tail } = input;
  const names = tail.block?.pvbs ?? [];
  if (names.every((_, i) => isPvbSettled(tail.pvbs[i]))) return { settled: true, tail, recording: Promise.resolve() };
  // Item-block jobs of older versions returned no deadline: the record has it.
  const deadlineAt = input.deadlineAt ?? (await deps.state.getBackup(backupName))?.fsDeadlineAt ?? Number.MAX_SAFE_INTEGER;
  const watched = await watchVolumeOps(deps, pvbTracker(deps), rt.hub, {
    runName: backupName,
    ops: names.map((name, i) => ({ name, previous: tail.pvbs[i] })),
    cancelRequested: input.cancelRequested,
    deadlineAt,
    readAt: input.readAt,
    progress: input.progress,
  });
  if (!watched.settled) return watched;
  const pvbs = names.map((name, i): PvbStateRecord | undefined => {
    const ended = watched.ended.get(name);
    if (!ended) return tail.pvbs[i];
    return { ...(tail.pvbs[i] as PvbStateRecord), name, phase: ended.phase, ...(ended.timedOut ? { timedOut: true } : {}) };
  });
  return { settled: true, tail: { ...tail, pvbs }, recording: watched.recording };
}
