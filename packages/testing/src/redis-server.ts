import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { getFreePort } from './free-port.js';

export interface RedisServerOptions {
  /** Persist with AOF (for restart tests). Default false: nothing is written to disk. */
  appendOnly?: boolean;
  /** Binary to run; default `redis-server` from PATH. */
  binary?: string;
}

export interface RedisServer {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** Kills the server (SIGKILL when `hard`), keeping its data dir and port. */
  kill(hard?: boolean): Promise<void>;
  /** Starts it again on the same port and dir (after `kill`). */
  start(): Promise<void>;
  /** Stops the server and removes its temp dir. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Starts a private `redis-server` on a free loopback port in a temp dir. Tests own it
 * entirely, so they may flush or restart it; they never touch a Redis they did not start.
 */
export async function startRedisServer(opts: RedisServerOptions = {}): Promise<RedisServer> {
  const dir = await mkdtemp(join(tmpdir(), 'stowage-redis-'));
  const binary = opts.binary ?? 'redis-server';
  let child: ChildProcess | undefined;
  let port = 0;
  let stopped = false;

  const args = (p: number) => [
    '--port',
    String(p),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    opts.appendOnly ? 'yes' : 'no',
    '--appendfsync',
    'always',
    '--maxmemory-policy',
    'noeviction',
    '--daemonize',
    'no',
    '--logfile',
    join(dir, 'redis.log'),
  ];

  const launch = async (p: number): Promise<void> => {
    const proc = spawn(binary, args(p), { stdio: 'ignore' });
    const exited = new Promise<Error>((resolve) => {
      proc.once('error', (err) => resolve(err));
      proc.once('exit', (code) => resolve(new Error(`redis-server exited with code ${code} (see ${dir}/redis.log)`)));
    });
    child = proc;
    const ready = waitForPing(p, 10_000);
    const first = await Promise.race([ready.then(() => undefined), exited]);
    if (first instanceof Error) {
      if ((first as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new Error('redis-server was not found on PATH: install it (Debian: apt-get install redis-server)');
      }
      throw first;
    }
  };

  // The free port can be taken between the probe and the bind: retry a few times.
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    port = await getFreePort();
    try {
      await launch(port);
      lastError = undefined;
      break;
    } catch (err) {
      lastError = err;
      if (String(err).includes('not found on PATH')) break;
    }
  }
  if (lastError) {
    await rm(dir, { recursive: true, force: true });
    throw lastError;
  }

  const killChild = async (signal: NodeJS.Signals): Promise<void> => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once('exit', () => resolve());
      proc.kill(signal);
    });
  };

  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    kill: (hard = false) => killChild(hard ? 'SIGKILL' : 'SIGTERM'),
    start: () => launch(port),
    async stop() {
      if (stopped) return;
      stopped = true;
      await killChild('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function waitForPing(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => {});
    try {
      await client.connect();
      if ((await client.ping()) === 'PONG') return;
    } catch {
      // not up yet
    } finally {
      client.disconnect();
    }
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * The Redis a test file should use: `TEST_REDIS_URL` when set (shared, so tests must
 * use their own key prefix), otherwise a private server started for the file.
 */
export async function useTestRedis(): Promise<{ url: string; stop: () => Promise<void> }> {
  const external = process.env.TEST_REDIS_URL;
  if (external) return { url: external, stop: async () => {} };
  const server = await startRedisServer();
  return { url: server.url, stop: () => server.stop() };
}

/** A unique key prefix for one test; hash-tagged so BullMQ flows work on Redis Cluster. */
export function uniquePrefix(): string {
  return `{t-${crypto.randomUUID()}}`;
}
