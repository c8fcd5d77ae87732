import type { PipelineDeps } from '../deps.js';
import { PipelineError, PipelineErrorCode } from '../errors.js';
import { runPodHooks } from '../hooks/hook-runner.js';
import { type BlockPlan, podKey } from '../plan/block-plan.js';
import { isPvbSettled } from '../pvb/pvb-observation.js';
import { pvbTracker, type WatchProgress } from '../pvb/pvb-wait-step.js';
import { blockSnapshots, isSnapshotCutOrFailed, type SnapshotStateRecord } from '../snapshots/block-snapshots.js';
import type { BlockTail } from '../state/backup-state.js';
import { watchVolumeOps } from '../volume-ops/watch-volume-ops.js';

export interface FinishBlockInput {
  backupName: string;
  blockId: string;
  plan: BlockPlan;
  /** The item-block job failed for good: only pods whose pre hooks ran through get post hooks. */
  blockJobFailed?: string | undefined;
  attempt: number;
}

export interface OrphanedPvbsInput {
  backupName: string;
  blockId: string;
  /** The item-block job failed for good (its reason): PVBs it registered may have no watcher. */
  blockJobFailed?: string | undefined;
  /** The reason a PVB's pvb-watch job failed for good, or undefined. */
  failedWatchOf: (pvbName: string) => string | undefined;
  /** Poll state of each orphan from the previous look (kept in the post-hooks job's data). */
  progress: Readonly<Record<string, WatchProgress>>;
}

export type OrphanedPvbs = { settled: true } | { settled: false; recheckInMs: number; progress: Record<string, WatchProgress> };

/**
 * PVBs nobody watches any more — the item-block job died for good between creating a PVB and
 * watching it, or the PVB's watch job failed for good — are settled here before any post hook may
 * run, by the looks a post-hooks job takes at its PVBs (watchVolumeOps), wound down as at the deadline: a missing PVB
 * is recorded Failed, a terminal one as it ended, and a running one is asked to cancel once and
 * waited for at most `pvbCancelWaitMs`, then recorded as given up. Until then the caller re-parks
 * after `recheckInMs`, keeping `progress` for the next look.
 */
export async function settleOrphanedPvbs(deps: PipelineDeps, input: OrphanedPvbsInput): Promise<OrphanedPvbs> {
  const { backupName, blockId } = input;
  const [record, block] = await Promise.all([deps.state.getBackup(backupName), deps.state.getBlock(backupName, blockId)]);
  const pvbNames = block?.pvbs ?? [];
  const records = await deps.state.getPvbs(backupName, pvbNames);
  const ops = pvbNames.flatMap((name, i) => {
    const why =
      input.failedWatchOf(name) ?? (input.blockJobFailed !== undefined ? `item-block job failed: ${input.blockJobFailed}` : undefined);
    return why === undefined ? [] : [{ name, previous: records[i], orphanedBecause: why }];
  });
  if (!record && ops.some((op) => !isPvbSettled(op.previous))) {
    throw new PipelineError(PipelineErrorCode.backupMissing, `backup ${backupName} has no record`);
  }
  // The same looks as the post-hooks job's own (watchVolumeOps), each wound down as an orphan.
  const watched = await watchVolumeOps(deps, pvbTracker(deps), undefined, {
    runName: backupName,
    ops,
    cancelRequested: record?.cancelRequestedAt !== undefined,
    deadlineAt: record?.fsDeadlineAt ?? Number.MAX_SAFE_INTEGER,
    progress: input.progress,
  });
  if (!watched.settled) return { settled: false, recheckInMs: watched.recheckInMs, progress: watched.progress };
  // The caller reads the block's PVB records next.
  await watched.recording;
  return { settled: true };
}

export interface FinishBlockResult {
  state: 'Completed' | 'PartiallyFailed';
  postHookPods: number;
  hooksFailed: number;
}

/** What a block's post hooks did (kept in the block's `postHooksDone` while its snapshots settle). */
export interface PostHooksRan {
  postHookPods: number;
  hooksFailed: number;
}

/**
 * The tail of a block: every PVB of the block is settled (asserted — orphaned PVBs are settled
 * first by settleOrphanedPvbs) and every snapshot cut or failed, then the post hooks of
 * its pods run — except pods whose pre hook failed with `onError: Fail` — even when PVBs or item
 * writes failed, then the block's final state and `block.done`. Used by the post-hooks job and by
 * inline mode.
 */
export async function finishBlock(deps: PipelineDeps, input: FinishBlockInput, readTail?: BlockTail): Promise<FinishBlockResult> {
  const tail = readTail ?? (await deps.state.readBlockTail(input.backupName, input.blockId));
  const ran = await runBlockPostHooks(deps, input, tail);
  return writeBlockEnd(deps, input, tail, ran);
}

/** The post hooks of the block's pods (see finishBlock), once its PVBs are terminal and its snapshots cut or failed. */
export async function runBlockPostHooks(deps: PipelineDeps, input: FinishBlockInput, tail: BlockTail): Promise<PostHooksRan> {
  const { state } = deps;
  const { backupName, blockId } = input;
  const { block, pvbs: records } = tail;
  const pvbNames = block?.pvbs ?? [];
  const stillOpen = pvbNames.filter((_, i) => !isPvbSettled(records[i]));
  if (stillOpen.length > 0) {
    throw new PipelineError(
      PipelineErrorCode.pvbNotTerminal,
      `block ${blockId} of backup ${backupName}: post hooks would run before PVBs ${stillOpen.join(', ')} are terminal`,
    );
  }
  const snapshots = blockSnapshots(block);
  const uncut = snapshots.filter((r) => !isSnapshotCutOrFailed(r)).map((r) => r.name);
  if (uncut.length > 0) {
    throw new PipelineError(
      PipelineErrorCode.pvbNotTerminal,
      `block ${blockId} of backup ${backupName}: post hooks would run before VolumeSnapshots ${uncut.join(', ')} are cut`,
    );
  }
  const pods = hookedPods(input, block);
  // For post hooks' executionPolicy: the block succeeded when it was not skipped, its job did not
  // fail, every PVB it created completed and every snapshot was cut (a block without PVBs and
  // without trouble counts).
  const pvbsAllCompleted =
    block?.skipped === undefined &&
    input.blockJobFailed === undefined &&
    records.every((r) => r?.phase === 'Completed' && !r.timedOut) &&
    snapshots.every((r) => r.phase !== 'Failed' && r.phase !== 'Canceled');
  let hooksFailed = 0;
  // Sent, not awaited: the hook's own writes follow it on the same connection, and its exec waits
  // for those (one round trip less before the post hook).
  const running = pods.some((pod) => pod.hooks.post.length > 0)
    ? state.updateBlock(backupName, blockId, { state: 'RunningPostHooks' })
    : undefined;
  running?.catch(() => {}); // awaited below
  for (const pod of pods) {
    if (pod.hooks.post.length === 0) continue;
    const res = await runPodHooks(deps, {
      runName: backupName,
      scope: blockId,
      pod,
      phase: 'post',
      hooks: pod.hooks.post,
      attempt: input.attempt,
      pvbsAllCompleted,
    });
    hooksFailed += res.failed;
  }
  await running;
  return { postHookPods: pods.length, hooksFailed };
}

/** The pods owed post hooks. */
function hookedPods(input: FinishBlockInput, block: BlockTail['block']) {
  const failedPods = new Set(block?.failedPods ?? []);
  const prePhaseDone = new Set(block?.prePhaseDonePods ?? []);
  const skipped = typeof block?.skipped === 'string' ? block.skipped : undefined;
  return input.plan.pods.filter((pod) => {
    const key = podKey(pod);
    if (failedPods.has(key)) return false;
    // A block skipped by a FailBlock pre hook: the pods whose pre hooks ran and passed are owed
    // their post hooks (to undo what the pre hooks did); the others never ran a hook.
    if (skipped !== undefined) return pod.hooks.pre.length > 0 && prePhaseDone.has(key);
    // A dead item-block job: only pods whose pre hooks ran through are owed their post hooks.
    return input.blockJobFailed === undefined || prePhaseDone.has(key);
  });
}

/**
 * The block's final state, its once-counted block-done and its event, in one step: PartiallyFailed
 * when anything went wrong — a skip, a failed hook or pod, a PVB or snapshot that did not complete
 * (`snapshots`: their records as they ended, when not those of the tail), a dead job, an item error.
 */
export async function writeBlockEnd(
  deps: PipelineDeps,
  input: FinishBlockInput,
  tail: BlockTail,
  ran: PostHooksRan,
  snapshots: readonly SnapshotStateRecord[] = blockSnapshots(tail.block),
): Promise<FinishBlockResult> {
  const { state } = deps;
  const { backupName, blockId } = input;
  const { block, pvbs: records } = tail;
  const pvbNames = block?.pvbs ?? [];
  const failedPods = new Set(block?.failedPods ?? []);
  const skipped = typeof block?.skipped === 'string' ? block.skipped : undefined;
  const pvbTrouble = records.some((r) => r && (r.phase !== 'Completed' || r.timedOut));
  const snapshotTrouble = snapshots.some((r) => r.phase !== 'Completed');
  const itemErrors = typeof block?.itemErrors === 'number' ? block.itemErrors : 0;
  const partially =
    skipped !== undefined ||
    ran.hooksFailed > 0 ||
    failedPods.size > 0 ||
    pvbTrouble ||
    snapshotTrouble ||
    input.blockJobFailed !== undefined ||
    itemErrors > 0;
  const finalState = partially ? 'PartiallyFailed' : 'Completed';
  // Final state, the once-counted block-done and its event in one step (the hooks slot frees sooner).
  await state.blockStep(backupName, blockId, {
    set: { state: finalState, completedAt: deps.clock.now() },
    once: [{ onceKey: `block-done:${blockId}`, field: 'blocksDone' }],
    event: {
      type: 'block.done',
      data: {
        blockId,
        state: finalState,
        pvbs: pvbNames.length,
        ...(snapshots.length > 0 ? { snapshots: snapshots.length } : {}),
        postHookPods: ran.postHookPods,
      },
      ifCounted: 0,
    },
  });
  return { state: finalState, postHookPods: ran.postHookPods, hooksFailed: ran.hooksFailed };
}
