import { isPvbTerminal } from '@stowage/kube';
import type { PipelineDeps } from '../deps.js';
import { PipelineError, PipelineErrorCode } from '../errors.js';
import { runPodHooks } from '../hooks/hook-runner.js';
import { type BlockPlan, podKey } from '../plan/block-plan.js';
import { isPvbSettled, recordPvbGaveUp, recordPvbMissing, recordPvbObservation } from '../pvb/pvb-observation.js';

export interface FinishBlockInput {
  backupName: string;
  blockId: string;
  plan: BlockPlan;
  /** The item-block job failed for good: its pods are derived from state. */
  blockJobFailed?: string | undefined;
  /** PVBs whose pvb-watch job failed for good (by PVB name → reason). */
  failedWatches?: ReadonlyMap<string, string>;
  attempt: number;
}

export interface FinishBlockResult {
  state: 'Completed' | 'PartiallyFailed';
  postHookPods: number;
  hooksFailed: number;
}

/**
 * The tail of a block: every PVB of the block is settled (asserted), then the post hooks of
 * its pods run — except pods whose pre hook failed with `onError: Fail` — even when PVBs or item
 * writes failed, then the block's final state and `block.done`. Used by the post-hooks job and by
 * inline mode.
 */
export async function finishBlock(deps: PipelineDeps, input: FinishBlockInput): Promise<FinishBlockResult> {
  const { state } = deps;
  const { backupName, blockId, plan } = input;
  const block = await state.getBlock(backupName, blockId);
  const pvbNames = block?.pvbs ?? [];
  let records = await state.getPvbs(backupName, pvbNames);

  // Legit ways to end up with an unsettled PVB: the item-block job died between registering and
  // watching it, or its watch job failed for good. Reconcile those from the API server.
  const unsettled = pvbNames.filter((_, i) => !isPvbSettled(records[i]));
  for (const name of unsettled) {
    const why =
      input.failedWatches?.get(name) ?? (input.blockJobFailed !== undefined ? `item-block job failed: ${input.blockJobFailed}` : undefined);
    if (why === undefined) continue;
    const previous = await state.getPvb(backupName, name);
    const pvb = await deps.pvbs.getPvb(name);
    if (!pvb) await recordPvbMissing(deps, backupName, name, previous, `never created or deleted (${why})`);
    else if (isPvbTerminal(pvb)) await recordPvbObservation(deps, backupName, pvb, previous);
    else {
      await deps.pvbs.requestCancel(name);
      await recordPvbGaveUp(deps, backupName, name, previous, 'canceled', 0);
    }
  }
  if (unsettled.length > 0) records = await state.getPvbs(backupName, pvbNames);
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
