import type { PipelineDeps } from '../deps.js';
import { PipelineError, PipelineErrorCode } from '../errors.js';
import { runPodHooks } from '../hooks/hook-runner.js';
import { type BlockPlan, podKey } from '../plan/block-plan.js';
import { isPvbSettled, recordPvbGaveUp, recordPvbMissing, recordPvbObservation } from '../pvb/pvb-observation.js';

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
  /** PVBs whose pvb-watch job failed for good (by PVB name → reason). */
  failedWatches?: ReadonlyMap<string, string>;
}

/**
 * PVBs nobody watches any more — the item-block job died for good between creating a PVB and
 * watching it, or the PVB's watch job failed for good — are settled here, from the API server,
 * before any post hook may run: a missing PVB is recorded Failed, a terminal one as it ended, and
 * a running one is asked to cancel once and then waited for, at most `pvbCancelWaitMs` from the
 * ask (as at the fs-backup deadline), after which it is recorded as given up. Returns how long to
 * wait before looking again, or undefined when every PVB of the block is settled. The ask time
 * lives in the PVB's state record, so a retried or re-parked job keeps the same bound.
 */
export async function settleOrphanedPvbs(deps: PipelineDeps, input: OrphanedPvbsInput): Promise<number | undefined> {
  const { state, config } = deps;
  const { backupName, blockId } = input;
  const block = await state.getBlock(backupName, blockId);
  const pvbNames = block?.pvbs ?? [];
  const records = await state.getPvbs(backupName, pvbNames);
  let recheckInMs: number | undefined;
  for (const [i, name] of pvbNames.entries()) {
    if (isPvbSettled(records[i])) continue;
    const why =
      input.failedWatches?.get(name) ?? (input.blockJobFailed !== undefined ? `item-block job failed: ${input.blockJobFailed}` : undefined);
    if (why === undefined) continue;
    const previous = records[i];
    const pvb = await deps.pvbs.getPvb(name);
    if (!pvb) {
      await recordPvbMissing(deps, backupName, name, previous, `never created or deleted (${why})`);
      continue;
    }
    const seen = await recordPvbObservation(deps, backupName, pvb, previous);
    if (seen.terminal) continue;
    const now = deps.clock.now();
    const askedAt = typeof previous?.cancelAskedAt === 'number' ? previous.cancelAskedAt : undefined;
    if (askedAt === undefined) {
      if (pvb.spec.cancel !== true) await deps.pvbs.requestCancel(name);
      await state.updatePvb(backupName, name, { cancelRequested: true, cancelAskedAt: now });
      await state.log(backupName, {
        level: 'warn',
        msg: `PVB ${name} (phase ${seen.phase}) has no watcher any more (${why}); asked it to cancel, post hooks wait up to ${config.pvbCancelWaitMs} ms for it to stop`,
        pvb: name,
        blockId,
      });
    } else if (now - askedAt >= config.pvbCancelWaitMs) {
      await recordPvbGaveUp(deps, backupName, name, previous, 'orphaned', now - askedAt);
      continue;
    }
    // Look again soon at first, then less often (the longer it has run on, the less likely it stops
    // in the next moment), and exactly when the bounded wait ends.
    const elapsed = now - (askedAt ?? now);
    const remaining = config.pvbCancelWaitMs - elapsed;
    const delay = Math.max(1, Math.min(remaining, Math.max(config.pvbPollBaseMs, Math.min(config.pvbPollMaxMs, elapsed))));
    recheckInMs = Math.min(recheckInMs ?? delay, delay);
  }
  return recheckInMs;
}

export interface FinishBlockResult {
  state: 'Completed' | 'PartiallyFailed';
  postHookPods: number;
  hooksFailed: number;
}

/**
 * The tail of a block: every PVB of the block is settled (asserted — orphaned PVBs are settled
 * first by settleOrphanedPvbs), then the post hooks of
 * its pods run — except pods whose pre hook failed with `onError: Fail` — even when PVBs or item
 * writes failed, then the block's final state and `block.done`. Used by the post-hooks job and by
 * inline mode.
 */
export async function finishBlock(deps: PipelineDeps, input: FinishBlockInput): Promise<FinishBlockResult> {
  const { state } = deps;
  const { backupName, blockId, plan } = input;
  const block = await state.getBlock(backupName, blockId);
  const pvbNames = block?.pvbs ?? [];
  const records = await state.getPvbs(backupName, pvbNames);
  const stillOpen = pvbNames.filter((_, i) => !isPvbSettled(records[i]));
  if (stillOpen.length > 0) {
    throw new PipelineError(
      PipelineErrorCode.pvbNotTerminal,
      `block ${blockId} of backup ${backupName}: post hooks would run before PVBs ${stillOpen.join(', ')} are terminal`,
    );
  }

  const failedPods = new Set(block?.failedPods ?? []);
  const prePhaseDone = new Set(block?.prePhaseDonePods ?? []);
  const pods = plan.pods.filter((pod) => {
    const key = podKey(pod);
    if (failedPods.has(key)) return false;
    // A dead item-block job: only pods whose pre hooks ran through are owed their post hooks.
    return input.blockJobFailed === undefined || prePhaseDone.has(key);
  });
  let hooksFailed = 0;
  if (pods.some((pod) => pod.hooks.post.length > 0)) await state.updateBlock(backupName, blockId, { state: 'RunningPostHooks' });
  for (const pod of pods) {
    if (pod.hooks.post.length === 0) continue;
    const res = await runPodHooks(deps, { backupName, blockId, pod, phase: 'post', attempt: input.attempt });
    hooksFailed += res.failed;
  }

  const pvbTrouble = records.some((r) => r && (r.phase !== 'Completed' || r.timedOut));
  const itemErrors = typeof block?.itemErrors === 'number' ? block.itemErrors : 0;
  const partially = hooksFailed > 0 || failedPods.size > 0 || pvbTrouble || input.blockJobFailed !== undefined || itemErrors > 0;
  const finalState = partially ? 'PartiallyFailed' : 'Completed';
  await state.updateBlock(backupName, blockId, { state: finalState, completedAt: deps.clock.now() });
  if (await state.countOnce(backupName, `block-done:${blockId}`, 'blocksDone')) {
    await state.appendEvent(backupName, 'block.done', { blockId, state: finalState, pvbs: pvbNames.length, postHookPods: pods.length });
  }
  return { state: finalState, postHookPods: pods.length, hooksFailed };
}
