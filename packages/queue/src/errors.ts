import { UnrecoverableError } from 'bullmq';

/** Error codes of @stowage/queue (one catalogue). */
export const QueueErrorCode = {
  /** A job's data does not match its schema; retrying cannot help. */
  badPayload: 'QUEUE_BAD_PAYLOAD',
  /** A flow was to be added under a parent job that does not exist. */
  parentMissing: 'QUEUE_PARENT_MISSING',
  /** A job that must be a flow child (item-block) has no parent. */
  jobHasNoParent: 'QUEUE_JOB_HAS_NO_PARENT',
  /** A helper that moves a job was called without the worker's lock token. */
  missingToken: 'QUEUE_MISSING_TOKEN',
  /** A caller passed an argument outside its contract (programming error). */
  badArgument: 'QUEUE_BAD_ARGUMENT',
} as const;
export type QueueErrorCode = (typeof QueueErrorCode)[keyof typeof QueueErrorCode];

/** A broken invariant or an infrastructure problem in the queue layer. */
export class QueueError extends Error {
  override readonly name = 'QueueError';
  constructor(
    readonly code: QueueErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${message}`, options);
  }
}

/**
 * Thrown by the `parse*JobData` functions. It is an `UnrecoverableError`, so a worker that lets
 * it escape fails the job at once instead of retrying a payload that can never parse.
 */
export class JobPayloadError extends UnrecoverableError {
  readonly code = QueueErrorCode.badPayload;
  constructor(
    readonly jobName: string,
    readonly problems: readonly string[],
    options?: { cause?: unknown },
  ) {
    super(`${QueueErrorCode.badPayload}: ${jobName} job data is invalid: ${problems.join('; ')}`);
    this.name = 'JobPayloadError';
    if (options && 'cause' in options) this.cause = options.cause;
  }
}
