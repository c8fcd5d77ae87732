import { parsePvbWatchJobData } from '@stowage/queue';
import type { Job } from 'bullmq';
import type { PvbWatchResult } from '../pvb/pvb-observation.js';
import { pvbTracker } from '../pvb/pvb-wait-step.js';
import type { PipelineRuntime } from '../runtime.js';
import { processVolumeOpWatch } from '../volume-ops/volume-op-watch.js';

/**
 * pvb-watch: the shared volume-operation watch (processVolumeOpWatch) over one PVB — re-parked
 * without a slot until the PVB is terminal, promoted by the process's PVB informer.
 */
export async function processPvbWatch(rt: PipelineRuntime, job: Job, token: string | undefined): Promise<PvbWatchResult> {
  const data = parsePvbWatchJobData(job.data);
  const result = await processVolumeOpWatch(rt.deps, pvbTracker(rt.deps), rt.hub, job, token, {
    runName: data.backupName,
    opName: data.pvbName,
    deadlineAt: data.deadlineAt,
  });
  return { pvb: data.pvbName, ...result };
}
