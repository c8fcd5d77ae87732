import { FlowProducer, Queue, type QueueOptions } from 'bullmq';
import type { RedisClient } from './connections.js';
import { QUEUE_PREFIX, type QueueName } from './constants.js';
import { DEFAULT_JOB_OPTIONS } from './job-options.js';

export interface QueueFactoryOptions {
  connection: RedisClient;
  /** Hash-tagged prefix shared by every queue; default QUEUE_PREFIX. */
  prefix?: string;
}

/** A `Queue` with Stowage's prefix and the queue's default job options. */
export function createQueue(name: QueueName, opts: QueueFactoryOptions & Pick<QueueOptions, 'streams'>): Queue {
  return new Queue(name, {
    connection: opts.connection,
    prefix: opts.prefix ?? QUEUE_PREFIX,
    defaultJobOptions: { ...DEFAULT_JOB_OPTIONS[name] },
    ...(opts.streams ? { streams: opts.streams } : {}),
  });
}

/** A `FlowProducer` with Stowage's prefix (flow nodes inherit it, so every queue of a flow shares one slot). */
export function createFlowProducer(opts: QueueFactoryOptions): FlowProducer {
  return new FlowProducer({ connection: opts.connection, prefix: opts.prefix ?? QUEUE_PREFIX });
}
