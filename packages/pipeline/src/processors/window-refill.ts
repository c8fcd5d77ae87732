import { addBlockFlows } from '@stowage/queue';
import { DelayedError, type Job, UnrecoverableError, WaitingChildrenError } from 'bullmq';
import type { PipelineConfig } from '../deps.js';
import { type BlockPlan, needsPostHooksJob } from '../plan/block-plan.js';
import type { PipelineRuntime } from '../runtime.js';
import type { ClaimedBlock } from '../state/dispatch-window.js';

export interface WindowedBackup {
  backupName: string;
  backupUid: string;
  requestId?: string | undefined;
  finalizeJobId: string;
}

/**
 * How long a block's post-hooks job is parked once its item-block job is done:
 * until a real read of its PVBs is due, as a watch look parks while an informer will promote it.
 * Promotions end it sooner (releaseBlockTail, the informers); releaseBlockTail shortens it to the
 * poll cap in a process without a healthy informer. At the poll cap, a block whose PVBs copy for
 * longer woke once only to park again (~36 Redis commands, issue #23).
 */
export function postHooksParkMs(config: Pick<PipelineConfig, 'pvbRealReadEveryMs'>): number {
  return config.pvbRealReadEveryMs;
}

/**
 * Flows in one FlowProducer.addBulk. BullMQ builds a whole addBulk's commands in one synchronous
 * go (500 flows held the api's event loop for ~70 ms, seconds on a loaded machine: issue #45), so a
 * batch of blocks is added in transactions of at most this many flows, one after the other.
 */
export const FLOWS_PER_ADD = 100;

export function flowsPerAdd(blockBatchSize: number): number {
  return Math.min(blockBatchSize, FLOWS_PER_ADD);
}

/**
 * Adds claimed blocks under finalize (deterministic ids: adding one that exists is a no-op), in
 * their stored shape. A block without one (planned by an older version) is judged by its plan;
 * one whose plan is missing too gets the two-job shape: its post-hooks job reports the missing plan.
 */
export async function addClaimedBlocks(
  rt: PipelineRuntime,
  backup: WindowedBackup,
  claimed: ReadonlyArray<ClaimedBlock<BlockPlan>>,
): Promise<void> {
  if (claimed.length === 0) return;
  await addBlockFlows(
    { flowProducer: rt.flowProducer, itemBlocks: rt.itemBlocksQueue },
    {
      backupName: backup.backupName,
      backupUid: backup.backupUid,
      finalizeJobId: backup.finalizeJobId,
      blocks: claimed.map((c) => ({ id: c.id, solo: c.solo ?? (c.plan ? !needsPostHooksJob(c.plan) : false) })),
      batchSize: flowsPerAdd(rt.deps.config.blockBatchSize),
      requestId: backup.requestId,
      windowed: true,
      parentKnown: true,
      postHooksParkMs: postHooksParkMs(rt.deps.config),
    },
  );
}

/**
 * What a job's own last step claimed already (DispatchWindow.stepAndClaim, a solo block's end),
 * by job: its refill adds these without a second claim round trip (the claim is the same).
 */
const claimedByStep = new WeakMap<Job, ReadonlyArray<ClaimedBlock<BlockPlan>>>();

export function claimedInStep(job: Job, claimed: ReadonlyArray<ClaimedBlock<BlockPlan>>): void {
  claimedByStep.set(job, claimed);
}

/**
 * Runs the processor of a job that ends a block (a solo item-block job, or a post-hooks job) and,
 * for a windowed backup, adds the next blocks before the job returns — so finalize, whose child it
 * is, always has a child left while blocks wait — or before it fails for good. A re-park or a
 * retry to come adds nothing.
 */
export async function endingBlock<T>(rt: PipelineRuntime, job: Job, run: () => Promise<T>): Promise<T> {
  const data = job.data as { windowed?: unknown; backupName?: unknown; backupUid?: unknown; requestId?: unknown };
  if (data.windowed !== true) return run();
  const refill = async () => {
    const finalizeJobId = job.parent?.id;
    if (!finalizeJobId || typeof data.backupName !== 'string' || typeof data.backupUid !== 'string') return;
    const claimed = claimedByStep.get(job) ?? (await rt.window.claim<BlockPlan>(data.backupName, `job:${job.id}`, true));
    await addClaimedBlocks(
      rt,
      {
        backupName: data.backupName,
        backupUid: data.backupUid,
        requestId: typeof data.requestId === 'string' ? data.requestId : undefined,
        finalizeJobId,
      },
      claimed,
    );
  };
  let result: T;
  try {
    result = await run();
  } catch (err) {
    const parked = err instanceof DelayedError || err instanceof WaitingChildrenError;
    const lastTry = err instanceof UnrecoverableError || job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    if (!parked && lastTry) {
      // Failing for good: the next blocks still go in (finalize's backstop covers a failure here).
      await refill().catch((refillErr: unknown) =>
        rt.deps.logger.warn({ backup: data.backupName, jobId: job.id, err: refillErr }, 'dispatch window refill failed'),
      );
    }
    throw err;
  }
  await refill();
  return result;
}
