import { parsePvbWatchJobData } from '@stowage/queue';
import type { Job } from 'bullmq';
import type { PvbWatchResult } from '../pvb/pvb-observation.js';
import { pvbTracker } from '../pvb/pvb-wait-step.js';
import type { PipelineRuntime } from '../runtime.js';
import { processVolumeOpWatch } from '../volume-ops/volume-op-watch.js';

/**
 * pvb-watch: the shared volume-operation watch (processVolumeOpWatch) over one PVB — re-parked
 * without a slot until the PVB is terminal. Kept for backups in flight across an upgrade: item-block
 * jobs of older versions added one per PVB; now the post-hooks job watches its block's PVBs, and
 * the informer promotes post-hooks jobs, so such a job finds its PVB's end by polling.
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
