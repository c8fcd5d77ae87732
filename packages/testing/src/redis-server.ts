import { type EmbeddedRedis, type EmbeddedRedisOptions, startEmbeddedRedis } from '@stowage/platform';
import { startRedisCluster } from './redis-cluster.js';

export interface RedisServerOptions {
  /** Persist with AOF (for restart tests). Default false: nothing is written to disk. */
  appendOnly?: boolean;
  /** AOF fsync policy when `appendOnly`; default `always` (k8s/ and docker-compose ship `everysec`). */
  appendFsync?: 'always' | 'everysec';
  /** Binary to run; default `redis-server` from PATH. */
  binary?: string;
}

/** A private redis-server owned by a test: url, port, dir, kill/start for restart tests, stop. */
export type RedisServer = EmbeddedRedis;

/**
 * Starts a private `redis-server` on a free loopback port in a temp dir, through the platform's
 * launcher (the one the demo uses). Tests own it entirely, so they may flush or restart it; they
 * never touch a Redis they did not start.
 */
export async function startRedisServer(opts: RedisServerOptions = {}): Promise<RedisServer> {
  const launchOptions: EmbeddedRedisOptions = {};
  if (opts.appendOnly !== undefined) launchOptions.appendOnly = opts.appendOnly;
  if (opts.appendFsync !== undefined) launchOptions.appendFsync = opts.appendFsync;
  if (opts.binary !== undefined) launchOptions.binary = opts.binary;
  return await startEmbeddedRedis(launchOptions);
}

/**
 * The Redis a test file should use: `TEST_REDIS_URL` when set (shared, so tests must
 * use their own key prefix); with `STOWAGE_TEST_REDIS=cluster` a private Redis Cluster (3 masters,
 * 3 replicas); otherwise a private server started for the file.
 */
export async function useTestRedis(): Promise<{ url: string; stop: () => Promise<void> }> {
  const external = process.env.TEST_REDIS_URL;
  if (external) return { url: external, stop: async () => {} };
  if (process.env.STOWAGE_TEST_REDIS === 'cluster') {
    // The switch to run a suite on a real 3+3 Redis Cluster (its url is redis+cluster://…).
    const cluster = await startRedisCluster();
    return { url: cluster.url, stop: () => cluster.stop() };
  }
  const server = await startRedisServer();
  return { url: server.url, stop: () => server.stop() };
}

/** A unique key prefix for one test; hash-tagged so BullMQ flows work on Redis Cluster. */
export function uniquePrefix(): string {
  return `{t-${crypto.randomUUID()}}`;
}
