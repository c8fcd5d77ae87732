import { UnrecoverableError } from 'bullmq';

/** Error codes of @stowage/pipeline (one catalogue). */
export const PipelineErrorCode = {
  /** The job names a backup that has no record (deleted, or a bug in the producer). */
  backupMissing: 'PIPELINE_BACKUP_MISSING',
  /** The job names a block the plan never stored. */
  blockMissing: 'PIPELINE_BLOCK_MISSING',
  /** A post-hooks job found a PVB of its block that is not terminal: the job graph is broken. */
  pvbNotTerminal: 'PIPELINE_PVB_NOT_TERMINAL',
  /** A job arrived on a queue whose processor does not handle its name. */
  unknownJob: 'PIPELINE_UNKNOWN_JOB',
  /** A caller passed something outside the contract (programming error or bad user input). */
  badArgument: 'PIPELINE_BAD_ARGUMENT',
  /** finalize found fewer staged items than were counted as backed up, even after staging them again. */
  itemsMissing: 'PIPELINE_ITEMS_MISSING',
  /** A stored block plan cannot be read: a format this version does not know, or its dictionary is missing. */
  planUnreadable: 'PIPELINE_PLAN_UNREADABLE',
  /** The backup spec failed validation. */
  specInvalid: 'PIPELINE_SPEC_INVALID',
  /**
   * A count against a run whose live state finalize already archived and dropped: a stalled
   * duplicate of a finished job, still running. Refused, so the run's counters stay as archived.
   */
  runArchived: 'PIPELINE_RUN_ARCHIVED',
  /** A restore's plan ran out of its process's heap (STOWAGE_RESTORE_PLAN_HEAP_MB): a re-run would too. */
  restorePlanOutOfMemory: 'PIPELINE_RESTORE_PLAN_OUT_OF_MEMORY',
} as const;
export type PipelineErrorCode = (typeof PipelineErrorCode)[keyof typeof PipelineErrorCode];

/** A broken invariant or an infrastructure failure in the pipeline (retryable unless wrapped). */
export class PipelineError extends Error {
  override readonly name = 'PipelineError';
  constructor(
    readonly code: PipelineErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${message}`, options);
  }
}

/** A pipeline error that retrying cannot fix: BullMQ fails the job at once. */
export class UnrecoverablePipelineError extends UnrecoverableError {
  constructor(
    readonly code: PipelineErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${message}`);
    this.name = 'UnrecoverablePipelineError';
    if (options && 'cause' in options) this.cause = options.cause;
  }
}
