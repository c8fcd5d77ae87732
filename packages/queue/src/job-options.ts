import type { JobsOptions } from 'bullmq';
import { QueueName } from './constants.js';

const HOUR_S = 60 * 60;

/*
 * Redis stays bounded: finished jobs are removed by age and count. A parent still sees its
 * children's results after they are removed, because BullMQ copies each child's return value
 * into the parent's `processed` hash (and failures into its `failed` hash) when the child ends.
 */
const removeOnComplete = { age: 24 * HOUR_S, count: 10_000 } as const;
const removeOnFail = { age: 7 * 24 * HOUR_S, count: 10_000 } as const;

/**
 * What every Worker keeps of finished jobs (startWorkers passes it). BullMQ applies it to a job
 * whose own options say nothing, so the queues with a job per block or per PVB (item-blocks,
 * hooks, pvb-watch) leave it out of each job: ~90 bytes of Redis less per queued job (issue #23).
 * Jobs added by older versions carry their own, which win; an older worker finishing a new job
 * keeps it until a newer one trims the set by count.
 */
export const KEEP_FINISHED_JOBS = { removeOnComplete, removeOnFail } as const;

/**
 * Default options per queue. Retries are for retryable errors (Redis/API blips); a processor
 * throws `UnrecoverableError` for the rest. Re-parking with `moveToDelayed` does not use attempts.
 */
export const DEFAULT_JOB_OPTIONS: Readonly<Record<QueueName, Readonly<JobsOptions>>> = {
  [QueueName.backups]: { attempts: 5, backoff: { type: 'exponential', delay: 1_000 }, removeOnComplete, removeOnFail },
  [QueueName.itemBlocks]: { attempts: 5, backoff: { type: 'exponential', delay: 1_000 } },
  [QueueName.pvbWatch]: { attempts: 5, backoff: { type: 'exponential', delay: 1_000 } },
  [QueueName.hooks]: { attempts: 3, backoff: { type: 'exponential', delay: 2_000 } },
  [QueueName.restores]: { attempts: 5, backoff: { type: 'exponential', delay: 1_000 }, removeOnComplete, removeOnFail },
  [QueueName.restoreItems]: { attempts: 5, backoff: { type: 'exponential', delay: 1_000 }, removeOnComplete, removeOnFail },
  [QueueName.repository]: { attempts: 5, backoff: { type: 'exponential', delay: 1_000 }, removeOnComplete, removeOnFail },
};

/**
 * Options of a flow child: the queue defaults plus `ignoreDependencyOnFailure`, so a child that
 * fails for good never leaves its parent in waiting-children; the parent reads the failure with
 * `getIgnoredChildrenFailures()`.
 */
export function childJobOptions(queueName: QueueName, jobId: string): JobsOptions {
  return { ...DEFAULT_JOB_OPTIONS[queueName], jobId, ignoreDependencyOnFailure: true };
}
