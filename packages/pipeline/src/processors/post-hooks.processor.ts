import { blockJobId, pvbWatchJobId } from '@stowage/core';
import { parsePostHooksJobData, QueueName, qualifiedQueueName, repark } from '@stowage/queue';
import type { Job } from 'bullmq';
import { z } from 'zod';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import type { BlockPlan } from '../plan/block-plan.js';
import { watchProgressSchema } from '../pvb/pvb-wait-step.js';
import type { PipelineRuntime } from '../runtime.js';
import { finishBlock, settleOrphanedPvbs } from './block-post-hooks.js';
import type { ItemBlockResult } from './item-block.processor.js';

/** Poll state of orphaned PVBs between re-parks (in the post-hooks job's data under `orphans`). */
const orphanProgressSchema = z.record(z.string(), watchProgressSchema);

export type PostHooksResult = { skipped: 'inline' | 'canceled' } | { state: string; postHookPods: number; hooksFailed: number };

/**
 * post-hooks: BullMQ releases it only when its children — the item-block job and one pvb-watch
 * job per PVB the block created — are all done (completed or failed for good). It reads their
 * values and failures, settles PVBs left without a watcher (re-parking itself while one still
 * runs), then runs the block's post hooks (finishBlock).
 */
export async function processPostHooks(rt: PipelineRuntime, job: Job, token: string | undefined): Promise<PostHooksResult> {
  const { deps } = rt;
  const data = parsePostHooksJobData(job.data);
  const { backupName, blockId } = data;
  const prefix = deps.queuePrefix;
  // Everything the block's tail starts from, at once: the post hook waits on this chain.
  const [values, failures, tail] = await Promise.all([
    job.getChildrenValues(),
    job.getIgnoredChildrenFailures(),
    deps.state.readBlockTail<BlockPlan>(backupName, blockId),
  ]);
  const blockKey = `${qualifiedQueueName(prefix, QueueName.itemBlocks)}:${blockJobId(backupName, blockId)}`;
  const blockValue = values[blockKey] as ItemBlockResult | undefined;
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
  // A PVB left without a watcher (its block job or its watch job failed for good) may still be
  // copying: never run post hooks before it stops (or the bounded cancel wait ends). Wait without
  // holding a slot, like a pvb-watch job. When no child failed, every PVB was watched to its end.
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
  }
  // Settling orphans changed PVB records: then the tail is read again.
  return finishBlock(
    deps,
    { backupName, blockId, plan, blockJobFailed: blockFailed, attempt: job.attemptsMade + 1 },
    childFailed ? undefined : tail,
  );
}
