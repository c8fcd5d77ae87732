import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createKubeClients, createPvbClient, type KubeClients, type PvbClient } from '@stowage/kube';
import type { ExecRecord, Fixture, MaterializeMode, RequestCounts } from '@stowage/kube-sim';
import {
  BackupState,
  DEFAULT_PIPELINE_CONFIG,
  type LoadedBackupArchive,
  loadBackupArchive,
  NodeAgentRegistry,
  type PipelineConfig,
  type PipelineLogger,
  type RunningWorkers,
  startWorkers,
  statePrefixFor,
  submitBackup,
} from '@stowage/pipeline';
import { type EmbeddedRedis, startEmbeddedRedis } from '@stowage/platform';
import { QueueName } from '@stowage/queue';
import { FileSystemStorage } from '@stowage/storage';
import { listeningPort } from '@stowage/testing';
import { Redis } from 'ioredis';
import { BenchChild } from './child-process.js';
import type { ProcessParts } from './run-queue.js';
import { commandStatsDelta, type MonitoredCommand, parseCommandStats } from './stats.js';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const WORKER_MAIN = join(REPO_ROOT, 'services/worker/src/main.ts');
/** The inline mode's workers: the worker service with the inline comparison wired in. */
const INLINE_WORKER_MAIN = fileURLToPath(new URL('./inline-worker.main.ts', import.meta.url));
const AGENT_HOST_MAIN = fileURLToPath(new URL('./agent-host.main.ts', import.meta.url));
const SIM_HOST_MAIN = fileURLToPath(new URL('./sim-host.main.ts', import.meta.url));
const QUEUE_PREFIX = '{bench}';
const ENDED = new Set(['Completed', 'PartiallyFailed', 'Failed', 'Canceled', 'FailedValidation']);

/**
 * The objects of a second generated cluster that can join a first one: all but its Nodes and its
 * default StorageClass, which the first has already (the simulator refuses a fixture that names
 * an object twice).
 */
export function objectsToMerge(objects: readonly unknown[]): unknown[] {
  return objects.filter((o) => {
    const kind = (o as { kind?: string }).kind;
    return kind !== 'Node' && kind !== 'StorageClass';
  });
}

/** A log call's fields as one line; an error (logged as `{ err }`) as its message, which JSON drops. */
const fieldsText = (obj: object) =>
  JSON.stringify(obj, (_key, value) => (value instanceof Error ? `${value.name}: ${value.message}` : value));

/** Warnings and errors only; the driver hosts plan/finalize and must stay quiet. */
export function driverLogger(problems: string[]): PipelineLogger {
  const logger: PipelineLogger = {
    debug: () => {},
    info: () => {},
    warn: (obj, msg) => void problems.push(`warn ${msg ?? ''} ${fieldsText(obj)}`),
    error: (obj, msg) => void problems.push(`error ${msg ?? ''} ${fieldsText(obj)}`),
    child: () => logger,
  };
  return logger;
}

export interface WaitResult {
  phase: string;
  submittedAt: number;
  completedAt: number;
  /** HGETALL calls the driver made while waiting (subtracted from the Redis command counts). */
  pollCommands: number;
}

/**
 * One isolated run: its own redis-server, its own simulator with the generated cluster, its own
 * storage dir and repository key. The driver process hosts the `backups` queue (plan, finalize)
 * as the API service would; workers and node agents are separate processes.
 */
export class BenchEnv {
  readonly children: BenchChild[] = [];
  readonly problems: string[] = [];
  readonly queuePrefix = QUEUE_PREFIX;
  private driverWorkers: RunningWorkers | undefined;
  private constructor(
    readonly redisServer: EmbeddedRedis,
    readonly sim: SimProcess,
    readonly redis: Redis,
    readonly state: BackupState,
    /** The admin's client: what the driver reads to measure, never what a service does. */
    readonly kube: KubeClients,
    /** The api's ServiceAccount (stowage-api): what the driver uses where it hosts the api's queues. */
    readonly apiKube: KubeClients,
    readonly pvbs: PvbClient,
    readonly workDir: string,
    readonly logDir: string,
    readonly repoKey: string,
  ) {}

  /** `simReadyTimeoutMs`: how long the simulator may take to start (it writes every volume's files first); default 120 s. */
  static async start(
    fixture: Fixture,
    materializeVolumes: MaterializeMode,
    logDir: string,
    opts: { simReadyTimeoutMs?: number } = {},
  ): Promise<BenchEnv> {
    const workDir = await mkdtemp(join(tmpdir(), 'stowage-bench-'));
    await mkdir(logDir, { recursive: true });
    const redisServer = await startEmbeddedRedis();
    const sim = await SimProcess.start(fixture, materializeVolumes, workDir, logDir, opts.simReadyTimeoutMs).catch(async (err: unknown) => {
      await redisServer.stop();
      throw err;
    });
    const redis = new Redis(redisServer.url, { maxRetriesPerRequest: null });
    const state = new BackupState({ redis, prefix: statePrefixFor(QUEUE_PREFIX) });
    const kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
    const apiKube = createKubeClients({ kubeconfigPath: sim.identities.api });
    const pvbs = createPvbClient(kube, { namespace: 'stowage' });
    return new BenchEnv(redisServer, sim, redis, state, kube, apiKube, pvbs, workDir, logDir, randomBytes(32).toString('base64'));
  }

  get storageDir(): string {
    return join(this.workDir, 'storage');
  }

  private baseEnv(): Record<string, string | undefined> {
    const env: Record<string, string | undefined> = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('STOWAGE_') && k !== 'PORT' && k !== 'REDIS_URL') env[k] = v;
    return {
      ...env,
      REDIS_URL: this.redisServer.url,
      STOWAGE_STORAGE: this.storageDir,
      STOWAGE_QUEUE_PREFIX: QUEUE_PREFIX,
      STOWAGE_NAMESPACE: 'stowage',
      LOG_LEVEL: 'warn',
      STOWAGE_SHUTDOWN_TIMEOUT_MS: '8000',
    };
  }

  /**
   * W real worker processes (services/worker/src/main.ts; in the inline mode inline-worker.main.ts,
   * the same service holding each block's slot until its PVBs end); resolves when every /readyz says ready.
   */
  async startWorkers(opts: {
    count: number;
    blockConcurrency: number;
    hookConcurrency: number;
    waitMode: 'decoupled' | 'inline';
    /** More worker settings (e.g. the restore scenario's STOWAGE_RESTORE_*). */
    env?: Record<string, string>;
    /**
     * Who they are: backup workers (stowage-worker, default) or restore workers (stowage-restorer), each
     * on the queues the overlay gives its Deployment.
     */
    identity?: 'worker' | 'restorer';
  }): Promise<BenchChild[]> {
    const ids = this.sim.identities;
    const [account, kubeconfig, prefix] =
      opts.identity === 'restorer' ? ['stowage-restorer', ids.restorer, 'worker-r'] : ['stowage-worker', ids.worker, 'worker-'];
    const queues = ids.workerQueues[account];
    const started: BenchChild[] = [];
    for (let i = 1; i <= opts.count; i++) {
      const child = new BenchChild({
        name: `${prefix}${i}`,
        script: opts.waitMode === 'inline' ? INLINE_WORKER_MAIN : WORKER_MAIN,
        // Profiling hook: e.g. BENCH_WORKER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof".
        nodeArgs: (process.env.BENCH_WORKER_NODE_ARGS ?? '').split(' ').filter(Boolean),
        cwd: REPO_ROOT,
        logFile: join(this.logDir, `${prefix}${i}.log`),
        env: {
          ...this.baseEnv(),
          KUBECONFIG: kubeconfig,
          ...(queues ? { STOWAGE_WORKER_QUEUES: queues } : {}),
          // The kernel picks the port at the bind; it is read back (a port probed free first may be taken before the child binds it).
          PORT: '0',
          STOWAGE_BLOCK_CONCURRENCY: String(opts.blockConcurrency),
          STOWAGE_HOOK_CONCURRENCY: String(opts.hookConcurrency),
          ...opts.env,
        },
      });
      this.children.push(child);
      started.push(child);
    }
    await Promise.all(started.map((child) => waitReady(child, 120_000)));
    return started;
  }

  /** The node agents for `nodes`, `perProcess` to an agent-host process; resolves when every node has registered. */
  async startNodeAgents(opts: {
    nodes: string[];
    perProcess: number;
    loadConcurrency: number;
    /** Per node agent; undefined = no limit. */
    bandwidthBytesPerSec: number | undefined;
  }): Promise<BenchChild[]> {
    const hosts: BenchChild[] = [];
    const readiness: Promise<void>[] = [];
    for (let i = 0; i < opts.nodes.length; i += opts.perProcess) {
      const group = opts.nodes.slice(i, i + opts.perProcess);
      let markReady: () => void = () => {};
      readiness.push(new Promise<void>((r) => (markReady = r)));
      const child = new BenchChild({
        name: `agents-${hosts.length + 1}`,
        script: AGENT_HOST_MAIN,
        // Profiling hook, as for workers: BENCH_AGENT_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof".
        nodeArgs: (process.env.BENCH_AGENT_NODE_ARGS ?? '').split(' ').filter(Boolean),
        cwd: REPO_ROOT,
        logFile: join(this.logDir, `agents-${hosts.length + 1}.log`),
        env: {
          ...this.baseEnv(),
          KUBECONFIG: this.sim.identities.nodeAgent,
          STOWAGE_REPO_KEY: this.repoKey,
          STOWAGE_LOAD_CONCURRENCY: JSON.stringify({ globalConfig: opts.loadConcurrency }),
          ...(opts.bandwidthBytesPerSec !== undefined ? { STOWAGE_BANDWIDTH_LIMIT: String(opts.bandwidthBytesPerSec) } : {}),
          BENCH_AGENT_NODES: group.join(','),
          BENCH_DATA_ROOT: this.sim.dataRoot,
        },
        onLine: (line) => {
          if (line.startsWith('agents-ready')) markReady();
        },
      });
      this.children.push(child);
      hosts.push(child);
    }
    const deadline = Date.now() + 180_000;
    const all = Promise.all(readiness);
    for (;;) {
      const dead = hosts.find((h) => h.hasExited);
      if (dead) throw new Error(`${dead.name} stopped while starting; last lines:\n${dead.lastLines().join('\n')}`);
      const done = await Promise.race([all.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 200))]);
      if (done) break;
      if (Date.now() > deadline) throw new Error('node agents were not ready within 180 s');
    }
    // The planner skips volumes on nodes without a registered agent: wait for every heartbeat.
    const registry = new NodeAgentRegistry({ redis: this.redis, prefix: statePrefixFor(QUEUE_PREFIX) });
    for (;;) {
      const have = await registry.nodesWithAgent();
      if (opts.nodes.every((n) => have.has(n))) break;
      if (Date.now() > deadline) throw new Error(`node agents not registered within 180 s (have ${have.size}/${opts.nodes.length})`);
      await new Promise((r) => setTimeout(r, 200));
    }
    return hosts;
  }

  /** plan and finalize, hosted here as the API service hosts them. */
  hostBackupsQueue(config: Partial<PipelineConfig> = {}): void {
    const deps = {
      connection: this.redis,
      queuePrefix: QUEUE_PREFIX,
      state: this.state,
      agents: new NodeAgentRegistry({ redis: this.redis, prefix: statePrefixFor(QUEUE_PREFIX) }),
      kube: this.apiKube,
      pvbs: createPvbClient(this.apiKube, { namespace: 'stowage' }),
      storage: new FileSystemStorage(this.storageDir),
      logger: driverLogger(this.problems),
      clock: { now: Date.now },
      config: { ...DEFAULT_PIPELINE_CONFIG, ...config },
    };
    this.driverWorkers = startWorkers({ deps, queues: [QueueName.backups], concurrency: { backups: 2 } });
  }

  /** Stops hosting plan and finalize (to host them again with another config). */
  async stopBackupsQueue(): Promise<void> {
    await this.driverWorkers?.close();
    this.driverWorkers = undefined;
  }

  async commandStats(): Promise<Record<string, number>> {
    return parseCommandStats(await this.redis.info('commandstats'));
  }

  /**
   * Records every command redis-server runs (MONITOR: scripts' own commands included, as `lua`)
   * until `stop`, which returns them with the names of the scripts this driver's connection
   * defined (BullMQ's and ours; the workers run the same ones) by SHA1. Costs Redis and driver CPU:
   * for attributing commands to code, not for timings.
   */
  async startMonitor(): Promise<{ stop(): Promise<{ lines: MonitoredCommand[]; scriptNames: Map<string, string> }> }> {
    const monitor = await this.redis.monitor();
    const lines: MonitoredCommand[] = [];
    // Only the command and its first argument are kept (a script's SHA1): payloads can be large.
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      lines.push({ args: args.slice(0, 2), source });
    });
    return {
      stop: async () => {
        monitor.disconnect();
        const scripts = (this.redis as unknown as { scriptsSet?: Record<string, { sha: string }> }).scriptsSet ?? {};
        return { lines, scriptNames: new Map(Object.entries(scripts).map(([name, script]) => [script.sha, name])) };
      },
    };
  }

  /** redis-server's pid (INFO server), for /proc readings. */
  async redisPid(): Promise<number> {
    const info = await this.redis.info('server');
    return Number(/^process_id:(\d+)/m.exec(info)?.[1]);
  }

  /**
   * The bench's processes by part, for run-queue readings: workers, node-agent hosts, the
   * simulator, redis-server and this driver.
   */
  async processParts(): Promise<ProcessParts> {
    const of = (prefix: string) => this.children.filter((c) => c.name.startsWith(prefix) && !c.hasExited).map((c) => c.pid);
    return {
      workers: of('worker-'),
      nodeAgents: of('agents-'),
      simulator: [this.sim.child.pid],
      redis: [await this.redisPid()],
      driver: [process.pid],
    };
  }

  /** redis-server's own CPU seconds (INFO cpu, user + sys). */
  async redisCpuSeconds(): Promise<number> {
    const info = await this.redis.info('cpu');
    const get = (k: string) => Number(new RegExp(`^${k}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
    return get('used_cpu_user') + get('used_cpu_sys');
  }

  async commandStatsSince(before: Record<string, number>): Promise<Record<string, number>> {
    return commandStatsDelta(before, await this.commandStats());
  }

  /** Submits the backup and waits (bounded) until it has ended and finalize has written it to storage. */
  async runBackup(name: string, namespaces: string[], timeoutMs: number, specOverrides: Record<string, unknown> = {}): Promise<WaitResult> {
    const submittedAt = await this.submit(name, namespaces, specOverrides);
    return await this.waitForEnd(name, submittedAt, timeoutMs);
  }

  /** Submits a backup of the namespaces (bench defaults, with overrides); returns when it was submitted. */
  async submit(name: string, namespaces: string[], specOverrides: Record<string, unknown> = {}): Promise<number> {
    const spec = {
      includedNamespaces: namespaces,
      excludedNamespaces: [],
      includedResources: [],
      excludedResources: [],
      includeClusterResources: null,
      labelSelector: null,
      orLabelSelectors: [],
      defaultVolumesToFsBackup: true,
      hooks: { resources: [] },
      resourcePolicy: null,
      fsBackupTimeoutMs: 4 * 3_600_000,
      ttlMs: 720 * 3_600_000,
      storageLocation: 'default',
      ...specOverrides,
    };
    const submittedAt = Date.now();
    await submitBackup({ state: this.state, connection: this.redis, queuePrefix: QUEUE_PREFIX }, { name, spec });
    return submittedAt;
  }

  /** Waits (bounded) until the backup has ended and finalize has written it to storage. */
  async waitForEnd(name: string, submittedAt: number, timeoutMs: number): Promise<WaitResult> {
    let polls = 0;
    const deadline = submittedAt + timeoutMs;
    for (;;) {
      polls++;
      const rec = await this.state.getBackup(name);
      // Ended, and written to storage by finalize (the figures are read from there).
      if (rec && ENDED.has(rec.phase) && rec.archivedAt !== undefined) {
        return { phase: rec.phase, submittedAt, completedAt: rec.completedAt ?? Date.now(), pollCommands: polls };
      }
      const dead = this.children.find((c) => c.hasExited);
      if (dead) throw new Error(`${dead.name} exited during the run; last lines:\n${dead.lastLines().join('\n')}`);
      if (Date.now() > deadline) throw new Error(`backup ${name} did not end within ${timeoutMs / 1000} s (phase ${rec?.phase})`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** A finished backup's events, blocks, PVBs and logs, from storage (Redis keeps only its record and counters). */
  async finishedBackup(name: string): Promise<LoadedBackupArchive> {
    return await loadBackupArchive(new FileSystemStorage(this.storageDir), name);
  }

  /** Stops everything it started, each step on its own. */
  async close(keepLogs: boolean): Promise<void> {
    const steps: Array<() => Promise<unknown>> = [
      () => Promise.all(this.children.map((c) => c.stop())),
      () => this.sim.close(),
      async () => this.driverWorkers?.close(),
      async () => this.redis.quit().catch(() => this.redis.disconnect()),
      () => this.redisServer.stop(),
      () => rm(this.workDir, { recursive: true, force: true }),
      async () => (keepLogs ? undefined : rm(this.logDir, { recursive: true, force: true })),
    ];
    for (const step of steps) await step().catch((err: unknown) => this.problems.push(`clean-up: ${(err as Error).message}`));
  }

  /** Synchronous last resort on process exit. */
  killChildren(): void {
    for (const c of this.children) c.killNow();
    this.sim.child.killNow();
  }
}

/** Waits for a child started with PORT=0: the port it listens on (read from /proc), then its /readyz; returns the port. */
export async function waitReady(child: BenchChild, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let port: number | undefined;
  for (;;) {
    if (child.hasExited) throw new Error(`${child.name} stopped while starting; last lines:\n${child.lastLines().join('\n')}`);
    port ??= await listeningPort(child.pid);
    const ok = await (port === undefined
      ? Promise.resolve(false)
      : fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2_000) })
          .then(async (r) => {
            await r.body?.cancel();
            return r.status === 200;
          })
          .catch(() => false));
    if (ok) return port as number;
    if (Date.now() > deadline) throw new Error(`${child.name} not ready within ${timeoutMs / 1000} s; see ${child.logFile}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * The simulator in its own process (`sim-host.main.ts`), as a cluster's API server is not part of
 * Stowage's API service; what the report reads from it comes over its `/_sim/` control API.
 */
/** The kubeconfig file of each ServiceAccount the services run as (the dev overlay's, applied by sim-host). */
export interface SimIdentities {
  api: string;
  worker: string;
  nodeAgent: string;
  restorer: string;
  /** STOWAGE_WORKER_QUEUES of each account's workload, as the overlay sets it. */
  workerQueues: Record<string, string>;
}

export class SimProcess {
  private constructor(
    readonly child: BenchChild,
    readonly url: string,
    /** The admin's: the driver's own look at the cluster, never a service's. */
    readonly kubeconfigPath: string,
    readonly dataRoot: string,
    readonly identities: SimIdentities,
    /** How the simulator cuts a snapshot: `reflink` (clones: metadata only) or `copy` (every byte). */
    readonly cutMode: 'reflink' | 'copy',
  ) {}

  static async start(
    fixture: Fixture,
    materialize: MaterializeMode,
    workDir: string,
    logDir: string,
    readyTimeoutMs = 120_000,
  ): Promise<SimProcess> {
    const fixturePath = join(workDir, 'fixture.json');
    await writeFile(fixturePath, JSON.stringify(fixture));
    type ReadyInfo = { url: string; kubeconfigPath: string; dataRoot: string; identities: SimIdentities; cutMode: 'reflink' | 'copy' };
    let ready: (info: ReadyInfo) => void = () => {};
    const readyInfo = new Promise<ReadyInfo>((r) => (ready = r));
    const child = new BenchChild({
      name: 'simulator',
      script: SIM_HOST_MAIN,
      nodeArgs: (process.env.BENCH_SIM_NODE_ARGS ?? '').split(' ').filter(Boolean),
      cwd: REPO_ROOT,
      logFile: join(logDir, 'simulator.log'),
      env: {
        ...process.env,
        BENCH_SIM_FIXTURE: fixturePath,
        BENCH_SIM_DATA_ROOT: join(workDir, 'sim-data'),
        BENCH_SIM_MATERIALIZE: materialize,
      },
      onLine: (line) => {
        if (line.startsWith('sim-ready ')) ready(JSON.parse(line.slice('sim-ready '.length)));
      },
    });
    const exited = child.exited.then(() => {
      throw new Error(`the simulator stopped while starting; last lines:\n${child.lastLines().join('\n')}`);
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the simulator was not ready within ${readyTimeoutMs / 1000} s`)), readyTimeoutMs);
    });
    try {
      const info = await Promise.race([readyInfo, exited, timeout]);
      return new SimProcess(child, info.url, info.kubeconfigPath, info.dataRoot, info.identities, info.cutMode);
    } catch (err) {
      child.killNow();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  private async control<T>(method: 'GET' | 'POST', path: string): Promise<T> {
    const res = await fetch(`${this.url}/_sim/${path}`, { method, signal: AbortSignal.timeout(30_000) });
    const text = await res.text();
    if (!res.ok) throw new Error(`simulator ${method} /_sim/${path}: HTTP ${res.status}: ${text.slice(0, 200)}`);
    return JSON.parse(text) as T;
  }

  async execLog(): Promise<ExecRecord[]> {
    return (await this.control<{ items: ExecRecord[] }>('GET', 'exec-log')).items;
  }

  /** Injected faults (e.g. `{ latencyMs: 10 }` on every API request), over PUT /_sim/faults. */
  async setFaults(faults: Record<string, unknown>): Promise<void> {
    const res = await fetch(`${this.url}/_sim/faults`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(faults),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`simulator PUT /_sim/faults: HTTP ${res.status}: ${text.slice(0, 200)}`);
  }

  requests(): Promise<RequestCounts> {
    return this.control<RequestCounts>('GET', 'requests');
  }

  async resetRequests(): Promise<void> {
    await this.control('POST', 'requests/reset');
  }

  cpuSeconds(): Promise<number | undefined> {
    return this.child.cpuSeconds();
  }

  close(): Promise<void> {
    return this.child.stop();
  }
}
