import { QueueError, QueueErrorCode } from './errors.js';

export interface CappedBackoffOptions {
  /** Delay of attempt 0. */
  baseMs: number;
  /** No delay is ever longer than this. */
  maxMs: number;
  /** Fraction (0..1) of the delay that is randomised away, so many pollers do not fire in step. Default 0. */
  jitter?: number;
  /** Source of randomness in [0, 1); injectable so tests need no sleeping or mocking. Default Math.random. */
  random?: () => number;
}

/**
 * Exponential backoff `baseMs * 2^attempt`, capped at `maxMs`, minus up to `jitter` of itself.
 * Pure: the same inputs (and `random` result) give the same delay.
 */
export function cappedBackoffMs(attempt: number, opts: CappedBackoffOptions): number {
  const { baseMs, maxMs, jitter = 0, random = Math.random } = opts;
  if (!Number.isInteger(attempt) || attempt < 0) {
    throw new QueueError(QueueErrorCode.badArgument, `cappedBackoffMs: attempt must be a non-negative integer, got ${attempt}`);
  }
  if (!(baseMs >= 0) || !(maxMs >= 0)) {
    throw new QueueError(QueueErrorCode.badArgument, `cappedBackoffMs: baseMs and maxMs must be >= 0, got ${baseMs} and ${maxMs}`);
  }
  if (!(jitter >= 0 && jitter <= 1)) {
    throw new QueueError(QueueErrorCode.badArgument, `cappedBackoffMs: jitter must be within 0..1, got ${jitter}`);
  }
  // 2^1024 is Infinity; past ~60 doublings every sane base is over the cap anyway.
  const uncapped = baseMs * 2 ** Math.min(attempt, 60);
  const capped = Math.min(maxMs, uncapped);
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.round(capped * (1 - jitter * r));
}
