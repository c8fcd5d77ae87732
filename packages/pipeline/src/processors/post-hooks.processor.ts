import { blockJobId, pvbWatchJobId } from '@stowage/core';
import { parsePostHooksJobData, QueueName, qualifiedQueueName, repark } from '@stowage/queue';
import type { Job } from 'bullmq';
import { z } from 'zod';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import type { BlockPlan } from '../plan/block-plan.js';
import { isPvbSettled } from '../pvb/pvb-observation.js';
import { pvbTracker, type WatchProgress, watchProgressSchema } from '../pvb/pvb-wait-step.js';
import type { PipelineRuntime } from '../runtime.js';
import type { BlockTail, PvbStateRecord } from '../state/backup-state.js';
import { watchProgressChanged } from '../volume-ops/volume-op-wait-step.js';
import { afterEndRecords, reparkWatching, watchVolumeOps } from '../volume-ops/watch-volume-ops.js';
import { finishBlock, settleOrphanedPvbs } from './block-post-hooks.js';
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

  if (blockValue && 'inline' in blockValue && blockValue.inline) return { skipped: 'inline' };
  if (blockValue?.canceled) {
    await deps.state.countOnce(backupName, `block-done:${blockId}`, 'blocksDone');
    return { skipped: 'canceled' };
  }

  const { plan } = tail;
  if (!plan) throw new UnrecoverablePipelineError(PipelineErrorCode.blockMissing, `backup ${backupName} has no plan for block ${blockId}`);
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
    // Settling orphans changed PVB records: the tail is read again.
    return finishBlock(deps, { backupName, blockId, plan, blockJobFailed: blockFailed, attempt: job.attemptsMade + 1 });
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
  if (!watched.settled) {
    if (watchProgressChanged(progress, watched.progress)) await job.updateData({ ...(job.data as object), watch: watched.progress });
    // A look may have read the cache just before the last end arrived, or the cancel flag just
    // before a cancel, whose wake-up then found this job running, not parked: both looked at again once parked.
    return reparkWatching(rt, job, token, watched.recheckInMs, {
      recheck: () => rt.hub?.promoteIfDue(watched.open),
      cancelSeen: watched.cancelSeen,
      cancelRequested: async () => (await deps.state.cancelRequestedAt(backupName)) !== undefined,
    });
  }
  return afterEndRecords(watched.recording, () =>
    finishBlock(deps, { backupName, blockId, plan, attempt: job.attemptsMade + 1 }, watched.tail),
  );
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
