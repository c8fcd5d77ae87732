import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { cappedBackoffMs } from './backoff.js';

/** A connection to one Redis or to a Redis Cluster: BullMQ and our state modules take either. */
export type RedisClient = Redis | Cluster;

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

/** Where Redis is: one server (a redis:// URL as ioredis takes it) or the seed nodes of a cluster. */
export type RedisTarget =
  | { kind: 'single'; url: string }
  | { kind: 'cluster'; nodes: Array<{ host: string; port: number }>; tls: boolean; username?: string; password?: string };

const CLUSTER_URL = /^(rediss?)\+cluster:\/\/(?:([^@/]*)@)?([^/?#@]+)\/?$/;
const HOST_PORT = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/;

/** True for the cluster form `redis+cluster://host:port,host:port` (or `rediss+cluster://`). */
export function isRedisClusterUrl(url: string): boolean {
  return /^rediss?\+cluster:\/\//.test(url);
}

/**
 * Reads a Redis URL: `redis://…`/`rediss://…` name one server; `redis+cluster://[user:pass@]h1:p1,h2:p2`
 * (or `rediss+cluster://` for TLS) names seed nodes of a Redis Cluster — any reachable one suffices,
 * the client discovers the rest. Throws with what is wrong.
 */
export function parseRedisTarget(url: string): RedisTarget {
  if (!isRedisClusterUrl(url)) return { kind: 'single', url };
  const m = CLUSTER_URL.exec(url);
  if (!m) throw new Error(`redis cluster URL ${JSON.stringify(redactUrl(url))}: use redis+cluster://host:port,host:port`);
  const [, scheme, auth, hostList] = m as unknown as [string, string, string | undefined, string];
  const nodes = hostList.split(',').map((part) => {
    const hp = HOST_PORT.exec(part.trim());
    const port = hp?.[2] === undefined ? 6379 : Number(hp[2]);
    if (!hp || port < 1 || port > 65535) throw new Error(`redis cluster URL: node ${JSON.stringify(part)} is not host:port`);
    return { host: (hp[1] as string).replace(/^\[|\]$/g, ''), port };
  });
  const target: RedisTarget = { kind: 'cluster', nodes, tls: scheme === 'rediss' };
  if (auth) {
    const colon = auth.indexOf(':');
    const user = decodeURIComponent(colon < 0 ? '' : auth.slice(0, colon));
    const password = decodeURIComponent(colon < 0 ? auth : auth.slice(colon + 1));
    if (user) target.username = user;
    if (password) target.password = password;
  }
  return target;
}

/** The seed list `host:port,host:port` (STOWAGE_REDIS_CLUSTER_NODES) as a cluster URL. */
export function clusterUrlOf(nodes: string): string {
  return `redis+cluster://${nodes.trim()}`;
}

function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}

/**
 * ioredis `retryStrategy`: capped exponential backoff with a little jitter, retrying forever
 * (a service should ride out a Redis restart; readiness reports the outage meanwhile).
 */
export function reconnectStrategy(baseMs = 100, maxMs = 5_000): (times: number) => number {
  return (times) => cappedBackoffMs(Math.max(0, times - 1), { baseMs, maxMs, jitter: 0.2 });
}

/**
 * Cluster client settings that ride out a failover: a command to a dead master fails with
 * "Connection is closed" or CLUSTERDOWN, and ioredis refreshes the slot map and re-sends it after
 * these delays, up to `maxRedirections` times (64 × 300 ms ≈ 20 s, several node timeouts), so
 * a replica promotion is invisible to callers. Reads go to masters (`scaleReads: 'master'`):
 * BullMQ and our compare-and-set scripts must read what they just wrote.
 */
export const CLUSTER_FAILOVER_OPTIONS: ClusterOptions = {
  scaleReads: 'master',
  maxRedirections: 64,
  retryDelayOnFailover: 300,
  retryDelayOnClusterDown: 300,
  retryDelayOnTryAgain: 300,
  slotsRefreshTimeout: 2_000,
  // Re-read the slot map now and then too, so a promotion is seen even before a command fails.
  slotsRefreshInterval: 5_000,
};

function build(url: string, opts: RedisConnectionOptions, role: RedisOptions): RedisClient {
  const target = parseRedisTarget(url);
  const named = opts.connectionName ? { connectionName: opts.connectionName } : {};
  let client: RedisClient;
  if (target.kind === 'single') {
    client = new Redis(url, {
      ...opts.extra,
      retryStrategy: reconnectStrategy(opts.reconnectBaseMs, opts.reconnectMaxMs),
      ...named,
      ...role,
    });
  } else {
    const { enableOfflineQueue, ...nodeRole } = role;
    client = new Cluster(target.nodes, {
      ...CLUSTER_FAILOVER_OPTIONS,
      clusterRetryStrategy: reconnectStrategy(opts.reconnectBaseMs, opts.reconnectMaxMs),
      ...(enableOfflineQueue === undefined ? {} : { enableOfflineQueue }),
      // No retryStrategy per node: ioredis must drop a dead node and follow the new slot map.
      redisOptions: {
        ...opts.extra,
        ...named,
        ...nodeRole,
        ...(target.username ? { username: target.username } : {}),
        ...(target.password ? { password: target.password } : {}),
        ...(target.tls ? { tls: {} } : {}),
      },
    });
  }
  if (opts.onError) client.on('error', opts.onError);
  return client;
}

/**
 * A connection for BullMQ `Worker`s and `QueueEvents` (blocking commands): BullMQ requires
 * `maxRetriesPerRequest: null`, and commands wait in the offline queue across reconnects.
 * BullMQ does not close a connection it was given: `quit()` it after closing the workers.
 */
export function createWorkerConnection(url: string, opts: RedisConnectionOptions = {}): RedisClient {
  return build(url, opts, { maxRetriesPerRequest: null, enableOfflineQueue: true });
}

/**
 * A connection for producers (`Queue.add`, `FlowProducer`) on a request path: with Redis down,
 * commands fail fast instead of queueing, so an HTTP call answers 503 rather than hanging.
 */
export function createProducerConnection(url: string, opts: RedisConnectionOptions = {}): RedisClient {
  return build(url, opts, { maxRetriesPerRequest: 1, enableOfflineQueue: false });
}

/**
 * A general-purpose client for tools and tests (`new Redis(url)` that also takes a cluster URL):
 * default ioredis retries, offline queue on.
 */
export function createRedisClient(url: string, opts: RedisConnectionOptions = {}): RedisClient {
  return build(url, opts, {});
}

/**
 * A new connection like `client` (same server or cluster), e.g. for a blocking XREAD that must
 * not stall a shared connection. `overrides` are per-connection options (lazyConnect,
 * maxRetriesPerRequest, connectionName, …); on a cluster they apply to its node connections.
 */
export function duplicateConnection(
  client: RedisClient,
  overrides: Pick<RedisOptions, 'lazyConnect' | 'enableOfflineQueue' | 'maxRetriesPerRequest' | 'connectionName'>,
): RedisClient {
  if (client instanceof Cluster) {
    const { lazyConnect, enableOfflineQueue, ...nodeOverrides } = overrides;
    return client.duplicate(undefined, {
      ...(lazyConnect === undefined ? {} : { lazyConnect }),
      ...(enableOfflineQueue === undefined ? {} : { enableOfflineQueue }),
      redisOptions: { ...client.options.redisOptions, ...nodeOverrides },
    });
  }
  return client.duplicate(overrides);
}
