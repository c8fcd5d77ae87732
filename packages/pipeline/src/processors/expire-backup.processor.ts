import { parseExpireBackupJobData } from '@stowage/queue';
import { DelayedError, type Job } from 'bullmq';
import { deleteBackup } from '../deletion/delete-backup.js';
import type { PipelineRuntime } from '../runtime.js';
import { isRunning } from '../schedules/schedule-control.js';

export type ExpireBackupResult = { outcome: 'deleted' } | { outcome: 'gone' };

/** A backup whose TTL ran out while it still runs is looked at again this much later. */
export const EXPIRE_RECHECK_MS = 5 * 60_000;

/**
 * expire-backup (backups queue, delayed by the backup's TTL when it is submitted): deletes the
 * backup and its data. One delayed job per backup, not a scan of every backup. A backup that
 * still runs is not deleted under its workers: the job re-parks and looks again later. Safe to
 * run twice and after a crash: deletion is idempotent and removes the record last.
 */
export async function processExpireBackup(rt: PipelineRuntime, job: Job, token: string | undefined): Promise<ExpireBackupResult> {
  const { state, storage, pvbs, clock, logger } = rt.deps;
  const data = parseExpireBackupJobData(job.data);
  const record = await state.getBackup(data.backupName);
  // Gone already, or a newer backup that reuses the name (with its own expiry job).
  if (!record || record.uid !== data.backupUid) return { outcome: 'gone' };
  if (isRunning(record.phase)) {
    await job.moveToDelayed(clock.now() + EXPIRE_RECHECK_MS, token);
    throw new DelayedError();
  }
  await deleteBackup({ state, storage, pvbs }, record.name);
  logger.info({ backup: record.name, phase: record.phase }, 'expired backup deleted (TTL)');
  return { outcome: 'deleted' };
}
