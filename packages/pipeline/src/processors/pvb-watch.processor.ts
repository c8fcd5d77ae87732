import { parsePvbWatchJobData, repark } from '@stowage/queue';
import type { Job } from 'bullmq';
import type { PvbWatchResult } from '../pvb/pvb-observation.js';
import { stepPvbWait, watchProgressSchema } from '../pvb/pvb-wait-step.js';
import type { PipelineRuntime } from '../runtime.js';

/**
 * pvb-watch: one look at the PVB per run. Not terminal → re-park with moveToDelayed +
 * DelayedError (no slot held) and a capped backoff; the process's informer promotes the job the
 * moment the PVB turns terminal. The poll state travels in `job.data.watch`.
 *
 * No end is missed: every worker's informer sees every PVB event and updates its cache before it
 * promotes. An event that reaches the informer of the process running this look either comes
 * before the look ends (the cache check after parking sees it) or after the job is parked (the
 * promotion finds it delayed).
 */
export async function processPvbWatch(rt: PipelineRuntime, job: Job, token: string | undefined): Promise<PvbWatchResult> {
  const data = parsePvbWatchJobData(job.data);
  const progress = watchProgressSchema.parse((job.data as { watch?: unknown }).watch ?? {});
  const step = await stepPvbWait(
    rt.deps,
    rt.hub,
    { backupName: data.backupName, pvbName: data.pvbName, deadlineAt: data.deadlineAt },
    progress,
  );
  if (step.kind === 'done') return step.result;
  await job.updateData({ ...(job.data as object), watch: step.progress });
  // The look above may have read the cache just before the PVB's end arrived, and the informer's
  // promotion then found this job running, not parked: look at the cache again once parked.
  return repark(job, token, step.delayMs, async () => {
    await rt.hub?.promoteIfTerminal(data.pvbName);
  });
}
