import { repark } from '@stowage/queue';
import type { Job } from 'bullmq';
import type { PipelineDeps } from '../deps.js';
import type { PromotingInformerHub } from '../informers/promoting-informer-hub.js';
import {
  stepVolumeOpWait,
  type VolumeOpPrevious,
  type VolumeOpTracker,
  type VolumeOpWaitInput,
  type VolumeOpWatchResult,
  watchProgressChanged,
  watchProgressSchema,
} from './volume-op-wait-step.js';

/**
 * The body of a watch job (pvb-watch, pvr-watch): one look at the operation per run. Not
 * terminal → re-park with moveToDelayed + DelayedError (no slot held) and a capped backoff; the
 * process's informer hub promotes the job the moment the operation turns terminal. The poll
 * state travels in `job.data.watch`.
 *
 * No end is missed: every worker's informer sees every event and updates its cache before it
 * promotes. An event that reaches the informer of the process running this look either comes
 * before the look ends (the cache check after parking sees it) or after the job is parked (the
 * promotion finds it delayed).
 */
export async function processVolumeOpWatch<T, P extends VolumeOpPrevious>(
  deps: Pick<PipelineDeps, 'clock' | 'config'>,
  tracker: VolumeOpTracker<T, P>,
  hub: PromotingInformerHub<T> | undefined,
  job: Job,
  token: string | undefined,
  input: VolumeOpWaitInput,
): Promise<VolumeOpWatchResult> {
  const progress = watchProgressSchema.parse((job.data as { watch?: unknown }).watch ?? {});
  const step = await stepVolumeOpWait(deps, tracker, hub, input, progress);
  if (step.kind === 'done') return step.result;
  if (watchProgressChanged({ [input.opName]: progress }, { [input.opName]: step.progress })) {
    await job.updateData({ ...(job.data as object), watch: step.progress });
  }
  // The look above may have read the cache just before the end arrived, and the informer's
  // promotion then found this job running, not parked: look at the cache again once parked.
  return repark(job, token, step.delayMs, async () => {
    await hub?.promoteIfDue(input.opName);
  });
}
