import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { PlatformError, PlatformErrorCode } from './errors.js';
import { getFreePort } from './free-port.js';

export const REDIS_INSTALL_HINT =
  'redis-server was not found on PATH: install it (Debian: apt-get install redis-server; macOS: brew install redis)';

export interface EmbeddedRedisOptions {
  /** Told where the server runs (the demo says so). */
  logger?: Logger;
  /** Persist with AOF (restart tests). Default false: nothing is written to disk. */
  appendOnly?: boolean;
  /** AOF fsync policy when `appendOnly`; default `always`. k8s/ and docker-compose ship `everysec`. */
  appendFsync?: 'always' | 'everysec';
  /** Binary to run; default `redis-server` from PATH. */
  binary?: string;
  /** How long to wait for PING after spawning; default 10 s. */
  startTimeoutMs?: number;
}

export interface EmbeddedRedis {
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
 * Starts a private `redis-server` from PATH on a free loopback port with its own temp dir
 * (AOF off unless asked, `maxmemory-policy noeviction` as BullMQ requires). The single launcher
 * behind the demo's embedded Redis and the test fixture in @stowage/testing.
 */
export async function startEmbeddedRedis(opts: EmbeddedRedisOptions = {}): Promise<EmbeddedRedis> {
  const dir = await mkdtemp(join(tmpdir(), 'stowage-redis-'));
  const binary = opts.binary ?? 'redis-server';
  const startTimeoutMs = opts.startTimeoutMs ?? 10_000;
  let child: ChildProcess | undefined;
  let port = 0;
  let stopped = false;

  // If this process exits without stop(), do not leave an orphaned redis-server behind.
  const killOnExit = () => child?.kill('SIGKILL');
  process.on('exit', killOnExit);

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
    opts.appendFsync ?? 'always',
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
    const ready = waitForPing(p, startTimeoutMs, proc.pid);
    let first: Error | undefined;
    try {
      first = await Promise.race([ready.then(() => undefined), exited]);
    } catch (err) {
      first = err as Error; // no PING answer in time
    }
    if (first instanceof Error) {
      if ((first as NodeJS.ErrnoException).code === 'ENOENT') throw new PlatformError(PlatformErrorCode.redisNotFound, REDIS_INSTALL_HINT);
      proc.kill('SIGKILL');
      throw new PlatformError(PlatformErrorCode.redisStartFailed, first.message, { cause: first });
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
      if (err instanceof PlatformError && err.code === PlatformErrorCode.redisNotFound) break;
    }
  }
  if (lastError) {
    process.off('exit', killOnExit);
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

  const url = `redis://127.0.0.1:${port}`;
  opts.logger?.info({ url, dir, appendOnly: opts.appendOnly ?? false }, 'started a private redis-server (no REDIS_URL given)');

  return {
    url,
    port,
    dir,
    kill: (hard = false) => killChild(hard ? 'SIGKILL' : 'SIGTERM'),
    start: () => launch(port),
    async stop() {
      if (stopped) return;
      stopped = true;
      await killChild('SIGKILL');
      process.off('exit', killOnExit);
      await rm(dir, { recursive: true, force: true });
      opts.logger?.info({ url }, 'stopped the private redis-server');
    },
  };
}

/**
 * Resolves once the redis-server `pid` answers PING on `port`. Another process's server on that
 * port (it bound the port between the probe and our bind; ours then exits) is not ours: its PONG
 * does not count, so the caller sees our exit and tries another port.
 */
async function waitForPing(port: number, timeoutMs: number, pid: number | undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => {});
    try {
      await client.connect();
      if ((await client.ping()) === 'PONG' && (pid === undefined || serverPid(await client.info('server')) === pid)) return;
    } catch {
      // not up yet
    } finally {
      client.disconnect();
    }
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** `process_id` of an `INFO server` reply. */
function serverPid(info: string): number | undefined {
  const match = /^process_id:(\d+)/m.exec(info);
  return match ? Number(match[1]) : undefined;
}
