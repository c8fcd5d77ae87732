import { Redis, type RedisOptions } from 'ioredis';
import { cappedBackoffMs } from './backoff.js';

export interface RedisConnectionOptions {
  /**
   * Called for every connection error. ioredis reconnects by itself; this is where a
   * service logs. Without it, ioredis prints unhandled error events to the console.
   */
  onError?: (err: Error) => void;
  /** Reconnect backoff: first delay and cap, in ms. Defaults 100 ms and 5 s. */
  reconnectBaseMs?: number;
  reconnectMaxMs?: number;
  /** Client name shown by `CLIENT LIST` (helps when reading a busy Redis). */
  connectionName?: string;
  /** Extra ioredis options; the role-specific ones below always win. */
  extra?: RedisOptions;
}

/**
 * ioredis `retryStrategy`: capped exponential backoff with a little jitter, retrying forever
 * (a service should ride out a Redis restart; readiness reports the outage meanwhile).
 */
export function reconnectStrategy(baseMs = 100, maxMs = 5_000): (times: number) => number {
  return (times) => cappedBackoffMs(Math.max(0, times - 1), { baseMs, maxMs, jitter: 0.2 });
}

function build(url: string, opts: RedisConnectionOptions, role: RedisOptions): Redis {
  const client = new Redis(url, {
    ...opts.extra,
    retryStrategy: reconnectStrategy(opts.reconnectBaseMs, opts.reconnectMaxMs),
    ...(opts.connectionName ? { connectionName: opts.connectionName } : {}),
    ...role,
  });
  if (opts.onError) client.on('error', opts.onError);
  return client;
}

/**
 * A connection for BullMQ `Worker`s and `QueueEvents` (blocking commands): BullMQ requires
 * `maxRetriesPerRequest: null`, and commands wait in the offline queue across reconnects.
 * BullMQ does not close a connection it was given: `quit()` it after closing the workers.
 */
export function createWorkerConnection(url: string, opts: RedisConnectionOptions = {}): Redis {
  return build(url, opts, { maxRetriesPerRequest: null, enableOfflineQueue: true });
}

/**
 * A connection for producers (`Queue.add`, `FlowProducer`) on a request path: with Redis down,
 * commands fail fast instead of queueing, so an HTTP call answers 503 rather than hanging.
 */
export function createProducerConnection(url: string, opts: RedisConnectionOptions = {}): Redis {
  return build(url, opts, { maxRetriesPerRequest: 1, enableOfflineQueue: false });
}
