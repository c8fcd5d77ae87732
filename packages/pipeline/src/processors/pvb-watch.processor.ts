import { parsePvbWatchJobData, repark } from '@stowage/queue';
import type { Job } from 'bullmq';
import type { PvbWatchResult } from '../pvb/pvb-observation.js';
import { stepPvbWait, watchProgressSchema } from '../pvb/pvb-wait-step.js';
import type { PipelineRuntime } from '../runtime.js';

/**
 * pvb-watch: one look at the PVB per run. Not terminal → re-park with moveToDelayed +
 * DelayedError (no slot held) and a capped backoff; the process's informer promotes the job the
 * moment the PVB turns terminal. The poll state travels in `job.data.watch`.
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
  return repark(job, token, step.delayMs);
}
