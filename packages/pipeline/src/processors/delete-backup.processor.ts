import { finalizeJobId } from '@stowage/core';
import { isPvbTerminal, pvbLabels } from '@stowage/kube';
import { parseDeleteBackupJobData } from '@stowage/queue';
import { DelayedError, type Job } from 'bullmq';
import { deleteBackup } from '../deletion/delete-backup.js';
import { requestPrune } from '../deletion/repository-gc.js';
import { NO_PIPELINE_METRICS, scheduleOf } from '../metrics.js';
import type { PipelineRuntime } from '../runtime.js';
import { isRunning } from '../schedules/schedule-control.js';

export type DeleteBackupResult = { outcome: 'deleted' } | { outcome: 'gone' };

/** A backup whose TTL ran out while it still runs is looked at again this much later. */
export const EXPIRED_RECHECK_MS = 5 * 60_000;
/** A backup a user deleted while it ran was asked to cancel (or its finalize still runs); it is looked at again this often. */
export const CANCELED_RECHECK_MS = 1_000;

/**
 * delete-backup (repository queue, in the backup workers): deletes a backup and its data — delayed by the backup's TTL when
 * it is submitted (one delayed job per backup, not a scan of every backup), or added at once when
 * a user deletes it. A backup that still runs is never deleted under its workers: a requested
 * deletion cancels it first, an expiry leaves it to finish; either way the job re-parks (no slot
 * held) and deletes once it has ended. Safe to run twice and after a crash of the process running
 * it (BullMQ hands the stalled job to another): deletion is idempotent and removes the record last.
 */
export async function processDeleteBackup(rt: PipelineRuntime, job: Job, token: string | undefined): Promise<DeleteBackupResult> {
  const { state, storage, pvbs, clock, logger, repository, kube } = rt.deps;
  const data = parseDeleteBackupJobData(job.data);
  const record = await state.getBackup(data.backupName);
  // Gone already, or a newer backup that reuses the name (it has jobs of its own).
  if (!record || record.uid !== data.backupUid) return { outcome: 'gone' };
  if (isRunning(record.phase)) {
    if (data.reason === 'requested') await state.requestCancel(record.name);
    await job.moveToDelayed(clock.now() + (data.reason === 'requested' ? CANCELED_RECHECK_MS : EXPIRED_RECHECK_MS), token);
    throw new DelayedError();
  }
  // A PVB the backup gave up on (its agent did not stop within pvbCancelWaitMs) may still be
  // copying: the snapshot it writes after the forget below would never be forgotten. It is asked
  // to cancel and waited for, as post-hooks waits: at most pvbCancelWaitMs more.
  if (pvbs) {
    const open = (await pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${record.name}` })).filter((p) => !isPvbTerminal(p));
    if (open.length > 0) {
      const since = data.pvbsOpenSince ?? clock.now();
      if (clock.now() - since < rt.deps.config.pvbCancelWaitMs) {
        for (const pvb of open) if (pvb.spec.cancel !== true) await pvbs.requestCancel(pvb.metadata.name);
        if (data.pvbsOpenSince === undefined) await job.updateData({ ...data, pvbsOpenSince: since });
        await job.moveToDelayed(clock.now() + CANCELED_RECHECK_MS, token);
        throw new DelayedError();
      }
      logger.warn(
        { backup: record.name, pvbs: open.map((p) => p.metadata.name) },
        'deleting a backup whose PVBs did not stop when asked to cancel: a snapshot they still write is not forgotten',
      );
    }
  }
  // Its finished job tree goes first (the record goes last), so a new backup of the same name is
  // never taken for a re-add of this one. The phase ends before finalize writes the archive: while
  // finalize (or a job under it) still runs, its lock holds and nothing is removed (0) — deleting
  // now would let it write the archive back after the data went. It is looked at again shortly.
  if ((await rt.backupsQueue.remove(finalizeJobId(record.name), { removeChildren: true })) === 0) {
    await job.moveToDelayed(clock.now() + CANCELED_RECHECK_MS, token);
    throw new DelayedError();
  }
  const metrics = rt.deps.metrics ?? NO_PIPELINE_METRICS;
  const schedule = scheduleOf(record);
  metrics.backupDeletion({ schedule, outcome: 'attempt' });
  let snapshots: Awaited<ReturnType<typeof deleteBackup>>['snapshots'] = [];
  try {
    ({ snapshots } = await deleteBackup({ state, storage, pvbs, repository, kube }, record.name));
  } catch (err) {
    metrics.backupDeletion({ schedule, outcome: 'failure' });
    throw err;
  }
  metrics.backupDeletion({ schedule, outcome: 'success' });
  logger.info({ backup: record.name, phase: record.phase, reason: data.reason, snapshots }, 'backup deleted');
  // Its chunks are freed by a prune job (one per minute at most, however many backups go).
  if (repository) await requestPrune(rt.repositoryQueue(), clock.now());
  return { outcome: 'deleted' };
}
