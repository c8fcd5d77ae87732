import { parsePvrWatchJobData } from '@stowage/queue';
import type { Job } from 'bullmq';
import { pvrTracker } from '../restore/pvr-tracker.js';
import { restoreDepsOf } from '../restore/restore-runtime.js';
import type { PipelineRuntime } from '../runtime.js';
import type { VolumeOpWatchResult } from '../volume-ops/volume-op-wait-step.js';
import { processVolumeOpWatch } from '../volume-ops/volume-op-watch.js';

export type PvrWatchResult = VolumeOpWatchResult & { pvr: string };

/**
 * pvr-watch: the shared volume-operation watch (the same code as pvb-watch) over one PVR, re-parked
 * without a slot until the PVR is terminal; its restore-hooks parent is released when every PVR of
 * the pod is settled. Only restores started by older versions have these jobs (a restore-hooks job
 * now watches its pod's PVRs itself); the PVR informer no longer promotes them, so they poll.
 */
export async function processPvrWatch(rt: PipelineRuntime, job: Job, token: string | undefined): Promise<PvrWatchResult> {
  const data = parsePvrWatchJobData(job.data);
  const restoreDeps = { ...rt.deps, ...restoreDepsOf(rt.deps) };
  const result = await processVolumeOpWatch(rt.deps, pvrTracker(restoreDeps), rt.pvrHub, job, token, {
    runName: data.restoreName,
    opName: data.pvrName,
    deadlineAt: data.deadlineAt,
  });
  return { pvr: data.pvrName, ...result };
}
