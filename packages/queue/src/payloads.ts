import { z } from 'zod';
import { JobPayloadError } from './errors.js';

/*
 * Job payloads outlive deploys: fields are only ever added, and only as optional. Jobs carry
 * ids, never blobs (the plan, items and PVB results live in backup state / storage).
 * Objects are non-strict: an older worker ignores fields a newer producer added.
 */

const name = z.string().min(1);
const requestId = z.string().min(1).optional();

export const planJobSchema = z.object({ backupName: name, backupUid: name, requestId });
export type PlanJobData = z.infer<typeof planJobSchema>;

export const finalizeJobSchema = z.object({ backupName: name, backupUid: name, requestId });
export type FinalizeJobData = z.infer<typeof finalizeJobSchema>;

export const itemBlockJobSchema = z.object({
  backupName: name,
  backupUid: name,
  blockId: name,
  requestId,
  /**
   * The block has no fs-backup volume and no post hook (decided by plan from the stored block
   * plan): the job was added straight under finalize, with no post-hooks parent, and finishes the
   * block itself. Absent on every other block (and on jobs of older producers).
   */
  solo: z.boolean().optional(),
  /**
   * The backup dispatches through a window (a cap of blocks in flight): the job that ends the
   * block (a solo item-block job, or the post-hooks job) adds the next blocks before it returns.
   */
  windowed: z.boolean().optional(),
});
export type ItemBlockJobData = z.infer<typeof itemBlockJobSchema>;

export const pvbWatchJobSchema = z.object({
  backupName: name,
  backupUid: name,
  blockId: name,
  pvbName: name,
  /** Namespace of the PVB object (Stowage's namespace). */
  namespace: name,
  /** The backup's fs-backup deadline, epoch milliseconds. */
  deadlineAt: z.number().int().nonnegative(),
  requestId,
});
export type PvbWatchJobData = z.infer<typeof pvbWatchJobSchema>;

export const postHooksJobSchema = z.object({
  backupName: name,
  backupUid: name,
  blockId: name,
  requestId,
  /** As on item-block jobs: this job ends a block of a windowed backup and adds the next ones. */
  windowed: z.boolean().optional(),
});
export type PostHooksJobData = z.infer<typeof postHooksJobSchema>;

export const backupHooksJobSchema = z.object({
  backupName: name,
  backupUid: name,
  /** Which of the backup's `spec.hooks.backup` lists the job runs. */
  phase: z.enum(['pre', 'post']),
  requestId,
});
export type BackupHooksJobData = z.infer<typeof backupHooksJobSchema>;

function parseWith<T>(schema: z.ZodType<T>, jobName: string, data: unknown): T {
  const result = schema.safeParse(data);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(data)'}: ${issue.message}`);
  throw new JobPayloadError(jobName, problems, { cause: result.error });
}

/** Parses `plan` job data; throws `JobPayloadError` (unrecoverable, QUEUE_BAD_PAYLOAD). */
export const parsePlanJobData = (data: unknown): PlanJobData => parseWith(planJobSchema, 'plan', data);
/** Parses `finalize` job data; throws `JobPayloadError`. */
export const parseFinalizeJobData = (data: unknown): FinalizeJobData => parseWith(finalizeJobSchema, 'finalize', data);
/** Parses `backup-item-block` job data; throws `JobPayloadError`. */
export const parseItemBlockJobData = (data: unknown): ItemBlockJobData => parseWith(itemBlockJobSchema, 'backup-item-block', data);
/** Parses `watch-pvb` job data; throws `JobPayloadError`. */
export const parsePvbWatchJobData = (data: unknown): PvbWatchJobData => parseWith(pvbWatchJobSchema, 'watch-pvb', data);
/** Parses `run-post-hooks` job data; throws `JobPayloadError`. */
export const parsePostHooksJobData = (data: unknown): PostHooksJobData => parseWith(postHooksJobSchema, 'run-post-hooks', data);
/** Parses `run-backup-hooks` job data; throws `JobPayloadError`. */
export const parseBackupHooksJobData = (data: unknown): BackupHooksJobData => parseWith(backupHooksJobSchema, 'run-backup-hooks', data);

export const runScheduleJobSchema = z.object({
  schedule: name,
  /** The tick this run is for (epoch ms); absent on jobs a job scheduler produced (their `opts.prevMillis` is the tick). */
  tickMs: z.number().int().nonnegative().optional(),
});
export type RunScheduleJobData = z.infer<typeof runScheduleJobSchema>;
/** Parses `run-schedule` job data; throws `JobPayloadError`. */
export const parseRunScheduleJobData = (data: unknown): RunScheduleJobData => parseWith(runScheduleJobSchema, 'run-schedule', data);

export const deleteBackupJobSchema = z.object({
  backupName: name,
  backupUid: name,
  /** `ttl`: its TTL ran out (a running backup is left to finish); `requested`: a user deleted it (a running one is canceled first). */
  reason: z.enum(['ttl', 'requested']),
  /** When this deletion first found a PVB of the backup still running (it waits for it, bounded). */
  pvbsOpenSince: z.number().int().nonnegative().optional(),
});
export type DeleteBackupJobData = z.infer<typeof deleteBackupJobSchema>;
/** Parses `delete-backup` job data; throws `JobPayloadError`. */
export const parseDeleteBackupJobData = (data: unknown): DeleteBackupJobData => parseWith(deleteBackupJobSchema, 'delete-backup', data);
