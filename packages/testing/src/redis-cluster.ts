import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { getFreePort } from '@stowage/platform';
import { Redis } from 'ioredis';

const run = promisify(execFile);

export interface RedisClusterOptions {
  /** Masters; default 3 (the minimum `redis-cli --cluster create` accepts). */
  masters?: number;
  /** Replicas per master; default 1. */
  replicasPerMaster?: number;
  /**
   * `cluster-node-timeout`: how long a master may be unreachable before its replica takes over.
   * Default 1000 ms (Redis' own default is 15 s, far too slow for a test).
   */
  nodeTimeoutMs?: number;
  /** How long to wait for `cluster_state:ok` after creation or a failover; default 30 s. */
  readyTimeoutMs?: number;
}

export interface RedisClusterNode {
  port: number;
  /** Alive (not killed by the test). */
  readonly alive: boolean;
}

/** A private Redis Cluster owned by a test: its URL, its nodes, a way to kill a master, stop. */
export interface RedisCluster {
  /** `redis+cluster://127.0.0.1:p1,…` — what REDIS_URL takes. */
  url: string;
  /** Every node, masters and replicas as created (roles change on failover). */
  nodes: readonly RedisClusterNode[];
  dir: string;
  /** The port of the master currently serving `key`'s slot. */
  masterPortFor(key: string): Promise<number>;
  /** SIGKILLs the node on `port` (no shutdown, no save) and resolves when it has exited. */
  killNode(port: number): Promise<void>;
  /** Resolves when a live node says `cluster_state:ok` and `key`'s slot is served by a live master. */
  waitUntilServing(key: string, timeoutMs?: number): Promise<number>;
  stop(): Promise<void>;
}

/**
 * Starts a real Redis Cluster on free loopback ports: `masters × (1 + replicasPerMaster)`
 * `redis-server --cluster-enabled yes` processes in a temp dir, joined by
 * `redis-cli --cluster create … --cluster-replicas N --cluster-yes`, and waited for until every
 * node says `cluster_state:ok`. No persistence (a killed master's data lives on in its replica,
 * which is what a failover test checks). `stop()` kills every node and removes the dir.
 */
export async function startRedisCluster(opts: RedisClusterOptions = {}): Promise<RedisCluster> {
  const masters = opts.masters ?? 3;
  const replicas = opts.replicasPerMaster ?? 1;
  const nodeTimeoutMs = opts.nodeTimeoutMs ?? 1_000;
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;
  const dir = await mkdtemp(join(tmpdir(), 'stowage-redis-cluster-'));
  const procs = new Map<number, ChildProcess>();
  const killAll = () => {
    for (const p of procs.values()) p.kill('SIGKILL');
  };
  process.on('exit', killAll);

  const launch = async (): Promise<number> => {
    let lastError: unknown;
    // A free port can be taken between the probe and the bind: retry with others.
    for (let attempt = 0; attempt < 5; attempt++) {
      const port = await getFreePort();
      // The cluster bus port is set explicitly: port + 10000 may not exist or be free.
      const busPort = await getFreePort();
      const nodeDir = join(dir, String(port));
      await mkdir(nodeDir, { recursive: true });
      const proc = spawn(
        'redis-server',
        [
          '--port', String(port),
          '--bind', '127.0.0.1',
          '--cluster-enabled', 'yes',
          '--cluster-port', String(busPort),
          '--cluster-config-file', join(nodeDir, 'nodes.conf'),
          '--cluster-node-timeout', String(nodeTimeoutMs),
          // A replica may always take over, however long it was cut off (a short test never lags far).
          '--cluster-replica-validity-factor', '0',
          '--dir', nodeDir,
          '--save', '',
          '--appendonly', 'no',
          '--maxmemory-policy', 'noeviction',
          '--logfile', join(nodeDir, 'redis.log'),
        ], // biome-ignore format: flag/value pairs
        { stdio: 'ignore' },
      );
      const exited = new Promise<Error>((resolve) => {
        proc.once('error', resolve);
        proc.once('exit', (code) => resolve(new Error(`redis-server on ${port} exited with code ${code} (see ${nodeDir}/redis.log)`)));
      });
      const outcome = await Promise.race([
        ping(port, 10_000, proc.pid).then(
          () => undefined,
          (err: Error) => err,
        ),
        exited,
      ]);
      if (outcome === undefined) {
        procs.set(port, proc);
        return port;
      }
      proc.kill('SIGKILL');
      lastError = outcome;
      if ((outcome as NodeJS.ErrnoException).code === 'ENOENT') break;
    }
    throw new Error(`could not start a cluster node: ${(lastError as Error).message}`, { cause: lastError });
  };

  try {
    const ports: number[] = [];
    for (let i = 0; i < masters * (1 + replicas); i++) ports.push(await launch());
    await run(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', String(replicas), '--cluster-yes'],
      { timeout: 60_000 },
    );
    await waitFor(readyTimeoutMs, async () => {
      for (const p of ports) {
        const info = await clusterInfo(p);
        if (info.cluster_state !== 'ok' || info.cluster_known_nodes !== String(ports.length)) return false;
      }
      // Every replica has finished its first sync, so a failover loses nothing written before it.
      return (await replicasInSync(ports)) === masters * replicas;
    });
    const nodes = ports.map((port) => ({
      port,
      get alive() {
        const p = procs.get(port);
        return p !== undefined && p.exitCode === null && p.signalCode === null;
      },
    }));
    const livePorts = () => nodes.filter((n) => n.alive).map((n) => n.port);

    const masterPortFor = async (key: string): Promise<number> => {
      for (const p of livePorts()) {
        const port = await withClient(p, async (c) => {
          const slot = (await c.call('CLUSTER', 'KEYSLOT', key)) as number;
          const ranges = (await c.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number, ...unknown[]], ...unknown[]]>;
          const range = ranges.find(([from, to]) => slot >= from && slot <= to);
          return range?.[2][1];
        }).catch(() => undefined);
        if (port !== undefined) return port;
      }
      throw new Error(`no live node knows the master of ${key}`);
    };

    return {
      url: `redis+cluster://${ports.map((p) => `127.0.0.1:${p}`).join(',')}`,
      nodes,
      dir,
      masterPortFor,
      async killNode(port) {
        const proc = procs.get(port);
        if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
        await new Promise<void>((resolve) => {
          proc.once('exit', () => resolve());
          proc.kill('SIGKILL');
        });
      },
      async waitUntilServing(key, timeoutMs = readyTimeoutMs) {
        let served = 0;
        await waitFor(timeoutMs, async () => {
          const live = livePorts();
          const port = await masterPortFor(key).catch(() => undefined);
          if (port === undefined || !live.includes(port)) return false;
          if ((await clusterInfo(port)).cluster_state !== 'ok') return false;
          served = port;
          return true;
        });
        return served;
      },
      async stop() {
        killAll();
        await Promise.all(
          [...procs.values()].map((p) =>
            p.exitCode !== null || p.signalCode !== null ? undefined : new Promise((resolve) => p.once('exit', resolve)),
          ),
        );
        process.off('exit', killAll);
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    killAll();
    process.off('exit', killAll);
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

async function withClient<T>(port: number, fn: (c: Redis) => Promise<T>): Promise<T> {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    await client.connect();
    return await fn(client);
  } finally {
    client.disconnect();
  }
}

/**
 * Waits until the redis-server `pid` answers on `port`: another process's server that bound the
 * port between the probe and our bind (ours then exits) does not count.
 */
async function ping(port: number, timeoutMs: number, pid: number | undefined): Promise<void> {
  await waitFor(timeoutMs, () =>
    withClient(
      port,
      async (c) => (await c.ping()) === 'PONG' && /^process_id:(\d+)/m.exec(await c.info('server'))?.[1] === String(pid),
    ).catch(() => false),
  );
}

async function clusterInfo(port: number): Promise<Record<string, string>> {
  const text = await withClient(port, (c) => c.call('CLUSTER', 'INFO') as Promise<string>).catch(() => '');
  return Object.fromEntries(
    text
      .split(/\r?\n/)
      .filter((l) => l.includes(':'))
      .map((l) => l.split(':', 2) as [string, string]),
  );
}

/** How many of `ports` are replicas whose link to their master is up after a full sync. */
async function replicasInSync(ports: readonly number[]): Promise<number> {
  let n = 0;
  for (const p of ports) {
    const info = await withClient(p, (c) => c.info('replication')).catch(() => '');
    if (/role:slave/.test(info) && /master_link_status:up/.test(info) && /master_sync_in_progress:0/.test(info)) n++;
  }
  return n;
}

async function waitFor(timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`redis cluster: not ready within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
