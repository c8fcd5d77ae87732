import type { RedisClient } from '@stowage/queue';
import { createQueue, QueueName } from '@stowage/queue';

/** Requests one restore-items job may have in flight at most (its share of the cap). */
export const RESTORE_JOB_SHARE = 10;

/**
 * How the restore's cap on API requests in flight (`restoreMaxInFlight`, STOWAGE_RESTORE_MAX_INFLIGHT)
 * is split so that it holds across any number of worker processes: at most `jobsAtOnce`
 * restore-items jobs run at once in the whole deployment (BullMQ global concurrency, kept in Redis),
 * each with at most `perJob` requests in flight, and jobsAtOnce × perJob ≤ cap. A cap of 1 is
 * Velero's way: one item after another, whatever the number of workers.
 */
export function restoreApiShares(cap: number): { jobsAtOnce: number; perJob: number } {
  if (!Number.isInteger(cap) || cap < 1) throw new RangeError(`restoreMaxInFlight must be a positive integer, got ${cap}`);
  const jobsAtOnce = Math.ceil(cap / RESTORE_JOB_SHARE);
  return { jobsAtOnce, perJob: Math.floor(cap / jobsAtOnce) };
}

/**
 * Stores the restore-items queue's global concurrency for `cap` in Redis. Every process that
 * hosts restore-items or submits restores sets it (same value when their config agrees; the last
 * one wins otherwise), so it is in place before the first restore-items job is taken.
 */
export async function applyRestoreApiCap(opts: { connection: RedisClient; queuePrefix: string; cap: number }): Promise<void> {
  const queue = createQueue(QueueName.restoreItems, { connection: opts.connection, prefix: opts.queuePrefix });
  try {
    await queue.setGlobalConcurrency(restoreApiShares(opts.cap).jobsAtOnce);
  } finally {
    await queue.close();
  }
}
