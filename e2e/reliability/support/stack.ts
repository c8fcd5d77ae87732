/*
 * The real parts a reliability test kills and restarts: a private redis-server, the simulator
 * (with the PVB CRD), and the api, worker and node-agent services as separate OS processes.
 * Each service runs as ONE node process (`node --conditions=@stowage/source --import tsx main.ts`,
 * no tsx wrapper in between) in its own process group, so a SIGKILL hits the process that holds
 * the jobs, like a pod being OOM-killed. The root e2e folder has no dependencies of its own, so
 * workspace packages are imported through their sources.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKubeClients, createPvbClient, type KubeClients, type PvbClient } from '../../../packages/kube/src/index.js';
import { type Fixture, type Simulator, startSimulator } from '../../../packages/kube-sim/src/index.js';
import {
  type BackupRecord,
  BackupState,
  type LoadedBackupArchive,
  loadBackupArchive,
  NodeAgentRegistry,
  statePrefixFor,
} from '../../../packages/pipeline/src/index.js';
import { createWorkerConnection } from '../../../packages/queue/src/index.js';
import { FileSystemStorage, type ObjectStore, openObjectStore } from '../../../packages/storage/src/index.js';
import {
  type DeployedIdentities,
  deployIdentities,
  listeningPort,
  REPO_ROOT,
  type RedisCluster,
  type RedisServer,
  type S3FaultPlan,
  type S3FaultProxy,
  type S3Server,
  spawnService as spawnEntryPoint,
  startRedisCluster,
  startRedisServer,
  startS3FaultProxy,
  startS3Server,
  uniquePrefix,
} from '../../../packages/testing/src/index.js';
import { type NodeAgent, type NodeAgentOptions, startNodeAgent } from '../../../services/node-agent/src/index.js';

export { REPO_ROOT };
export const CRD_PATH = join(REPO_ROOT, 'k8s/base/crd-podvolumebackups.yaml');
export const PVR_CRD_PATH = join(REPO_ROOT, 'k8s/base/crd-podvolumerestores.yaml');
export const DATA_UPLOAD_CRD_PATH = join(REPO_ROOT, 'k8s/base/crd-datauploads.yaml');
export const DATA_DOWNLOAD_CRD_PATH = join(REPO_ROOT, 'k8s/base/crd-datadownloads.yaml');

const MAINS = {
  api: 'services/api/src/main.ts',
  worker: 'services/worker/src/main.ts',
  'restore-worker': 'services/worker/src/main.ts',
  'node-agent': 'services/node-agent/src/main.ts',
} as const;
export type ServiceKind = keyof typeof MAINS;

export type RedisClient = ReturnType<typeof createWorkerConnection>;

/** Fast takeover of a killed process's jobs: locks expire after 4 s, stalled checks every 1.5 s. */
export const TEST_LOCK_ENV = { STOWAGE_LOCK_DURATION_MS: '4000', STOWAGE_STALLED_INTERVAL_MS: '1500' };

export interface ServiceProcess {
  kind: ServiceKind;
  name: string;
  pid: number;
  port: number;
  child: ChildProcess;
  /** Everything it wrote (stdout and stderr), for failure messages. */
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL to the whole process group: no shutdown hook runs. */
  killHard(): Promise<void>;
  /** SIGTERM, bounded wait, then SIGKILL; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** Open file descriptors right now (/proc/<pid>/fd). */
  fdCount(): Promise<number>;
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 30_000,
  everyMs = 100,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Starts a service process and waits until its /readyz answers 200 (tsx starts can take 20 s here).
 * It runs with PORT=0 and its port is the one it then listens on (read from /proc): the kernel picks
 * it at the bind. A port probed free first and handed to the child was free only until another
 * process bound it, and on a shared machine one did in the seconds a start takes — the child then
 * exited with EADDRINUSE, or the readiness probe got its 200 from the other process's server and the
 * test talked to a stranger.
 */
export async function spawnService(
  kind: ServiceKind,
  name: string,
  env: Record<string, string>,
  readyTimeoutMs = 90_000,
): Promise<ServiceProcess> {
  const output: string[] = [];
  const child = spawnEntryPoint(MAINS[kind], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', LOG_LEVEL: 'warn', ...env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const keep = (d: Buffer) => {
    output.push(d.toString());
    if (output.length > 2_000) output.splice(0, output.length - 2_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${name}: spawn failed`);
  const killGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-pid, signal);
    } catch {
      // already gone
    }
  };
  // Its own process group outlives this one: never leave it running when the test process ends.
  const killOnExit = () => killGroup('SIGKILL');
  process.once('exit', killOnExit);
  void exited.then(() => process.off('exit', killOnExit));
  let port: number | undefined;
  try {
    await waitFor(
      `${name} to be ready`,
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(`${name} exited with ${child.exitCode ?? child.signalCode} before it was ready:\n${output.join('')}`);
        }
        port ??= await listeningPort(pid);
        if (port === undefined) return undefined;
        const ok = await fetch(`http://127.0.0.1:${port}/readyz`)
          .then((r) => r.status === 200)
          .catch(() => false);
        return ok ? true : undefined;
      },
      readyTimeoutMs,
      250,
    );
  } catch (err) {
    // Once it has exited its pid may be another process's (pid numbers wrap): signal only a live child.
    if (child.exitCode === null && child.signalCode === null) killGroup('SIGKILL');
    throw new Error(`${(err as Error).message}\n${output.join('').slice(-4_000)}`, { cause: err });
  }
  return {
    kind,
    name,
    pid,
    port: port as number,
    child,
    output,
    exited,
    async killHard() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      killGroup('SIGKILL');
      await exited;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      killGroup('SIGTERM');
      const timer = setTimeout(() => killGroup('SIGKILL'), 20_000);
      const { code } = await exited;
      clearTimeout(timer);
      return code;
    },
    fdCount: async () => (await readdir(`/proc/${pid}/fd`)).length,
  };
}

export interface StackOptions {
  /** The objects, or the path of a fixture file (e.g. the demo cluster). */
  fixture: Fixture | string;
  /**
   * A real Redis Cluster (3 masters + 3 replicas, cluster-node-timeout 1 s) instead of one
   * redis-server; also chosen by STOWAGE_TEST_REDIS=cluster. `redisServer` is then not available.
   */
  redisCluster?: boolean;
  /** Redis with `appendonly yes` (restart tests). */
  appendOnly?: boolean;
  /** Its fsync policy (default `always`); k8s/ and docker-compose ship `everysec`. */
  appendFsync?: 'always' | 'everysec';
  materializeVolumes?: 'all' | 'with-files' | 'none';
  /** Load the PVB CRD before the fixture (default true; generated clusters bring their own). */
  withCrd?: boolean;
  /**
   * Backup storage: a directory (default) or a bucket on a private S3 server (STOWAGE_STORAGE=s3://…),
   * where the node agent processes keep the volume repository too (`repository/` beside `backups/`).
   */
  storage?: 'directory' | 's3';
  /** With `storage: 's3'`: the services reach the S3 server through a fault proxy with this plan. */
  s3Faults?: S3FaultPlan;
  /** More manifests loaded before the fixture (e.g. the CSI snapshot and data mover CRDs). */
  extraManifests?: string[];
}

export interface Stack {
  /** The single redis-server (throws on a cluster stack: use `redisCluster`). */
  redisServer: RedisServer;
  /** The Redis Cluster, when the stack runs on one. */
  redisCluster?: RedisCluster;
  redis: RedisClient;
  sim: Simulator;
  kube: KubeClients;
  pvbs: PvbClient;
  state: BackupState;
  agents: NodeAgentRegistry;
  /** The local directory: backup storage when `storage` is 'directory', and the volume repository's parent. */
  storageDir: string;
  /** The backup storage the services use, for the test's own reads. */
  backupStorage: ObjectStore;
  /** The S3 server when `storage` is 's3'. */
  s3?: S3Server;
  /** The fault proxy between the services and the S3 server, when `s3Faults` was given. */
  s3FaultProxy?: S3FaultProxy;
  queuePrefix: string;
  token: string;
  repoKey: string;
  /** The dev overlay's ServiceAccounts, roles and bindings, applied to the simulator, and a kubeconfig per account. */
  identities: DeployedIdentities;
  /** The kubeconfig a service of `kind` runs with: its own ServiceAccount's, as the overlay deploys it. */
  kubeconfigOf(kind: ServiceKind): string;
  /** Env every service shares (Redis, storage, prefix, tokens, fast lock takeover); KUBECONFIG is per kind. */
  env: Record<string, string>;
  /** Env of a node agent process for `node`. */
  agentEnv(node: string, extra?: Record<string, string>): Record<string, string>;
  /**
   * Processes started through `spawn` are killed on close. Each runs as its identity (`kubeconfigOf`):
   * `worker` is a backup worker (stowage-worker), `restore-worker` a restore worker (stowage-restorer),
   * each on the queues the overlay's Deployment gives it.
   */
  spawn(kind: ServiceKind, name: string, extra?: Record<string, string>): Promise<ServiceProcess>;
  /**
   * What a test that backs up and restores needs: a backup worker (stowage-worker) and a restore
   * worker (stowage-restorer), each on the queues its Deployment hosts (STOWAGE_WORKER_QUEUES).
   */
  spawnWorkers(name: string, extra?: Record<string, string>): Promise<{ backup: ServiceProcess; restore: ServiceProcess }>;
  processes: ServiceProcess[];
  close(): Promise<void>;
}

export async function startStack(opts: StackOptions): Promise<Stack> {
  const onCluster = opts.redisCluster ?? process.env.STOWAGE_TEST_REDIS === 'cluster';
  const redisCluster = onCluster ? await startRedisCluster({ nodeTimeoutMs: 1_000 }) : undefined;
  const single = onCluster
    ? undefined
    : await startRedisServer({
        appendOnly: opts.appendOnly ?? false,
        ...(opts.appendFsync ? { appendFsync: opts.appendFsync } : {}),
      });
  const redisUrl = redisCluster?.url ?? (single as RedisServer).url;
  const sim = await startSimulator({
    fixture: opts.fixture,
    port: 0,
    extraManifests: [...(opts.withCrd === false ? [] : [CRD_PATH, PVR_CRD_PATH]), ...(opts.extraManifests ?? [])],
    ...(opts.materializeVolumes ? { materializeVolumes: opts.materializeVolumes } : {}),
  });
  const storageDir = await mkdtemp(join(tmpdir(), 'stowage-reliability-'));
  const s3 = opts.storage === 's3' ? await startS3Server() : undefined;
  const s3FaultProxy = s3 && opts.s3Faults ? await startS3FaultProxy(s3.endpoint, opts.s3Faults) : undefined;
  const backupStorage: ObjectStore = s3
    ? openObjectStore({ kind: 's3', bucket: s3.bucket, prefix: s3.prefix, endpoint: s3.endpoint, region: s3.region, forcePathStyle: true })
    : new FileSystemStorage(storageDir);
  const storageEnv: Record<string, string> = s3
    ? {
        ...s3.env,
        ...(s3FaultProxy ? { STOWAGE_S3_ENDPOINT: s3FaultProxy.endpoint } : {}),
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      }
    : { STOWAGE_STORAGE: storageDir };
  if (s3) {
    // This process's reads of the bucket go through the AWS chain too.
    process.env.AWS_ACCESS_KEY_ID = s3.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = s3.secretAccessKey;
  }
  const queuePrefix = uniquePrefix();
  const statePrefix = statePrefixFor(queuePrefix);
  const identities = await deployIdentities(sim);
  const kubeconfigs: Record<ServiceKind, string> = {
    api: identities.api,
    worker: identities.worker,
    'restore-worker': identities.restorer,
    'node-agent': identities.nodeAgent,
  };
  // The queues each worker Deployment of the overlay hosts (STOWAGE_WORKER_QUEUES), by kind.
  const queuesOf = (kind: ServiceKind): Record<string, string> => {
    const account = kind === 'worker' ? 'stowage-worker' : kind === 'restore-worker' ? 'stowage-restorer' : undefined;
    const queues = account ? identities.workerQueues.get(account) : undefined;
    return queues ? { STOWAGE_WORKER_QUEUES: queues } : {};
  };
  const redis = createWorkerConnection(redisUrl, { onError: () => undefined });
  // The test's own client is the admin: it looks at the world, it is not one of the services.
  const kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
  const token = randomBytes(24).toString('base64url');
  const repoKey = randomBytes(32).toString('base64');
  const env = {
    REDIS_URL: redisUrl,
    ...storageEnv,
    STOWAGE_QUEUE_PREFIX: queuePrefix,
    STOWAGE_NAMESPACE: 'stowage',
    STOWAGE_API_TOKENS: token,
    STOWAGE_SHUTDOWN_TIMEOUT_MS: '8000',
    ...TEST_LOCK_ENV,
  };
  const processes: ServiceProcess[] = [];
  const stack: Stack = {
    get redisServer(): RedisServer {
      if (!single) throw new Error('this stack runs on a Redis Cluster: use stack.redisCluster');
      return single;
    },
    ...(redisCluster ? { redisCluster } : {}),
    redis,
    sim,
    kube,
    pvbs: createPvbClient(kube, { namespace: 'stowage' }),
    state: new BackupState({ redis, prefix: statePrefix }),
    agents: new NodeAgentRegistry({ redis, prefix: statePrefix }),
    storageDir,
    backupStorage,
    ...(s3 ? { s3 } : {}),
    ...(s3FaultProxy ? { s3FaultProxy } : {}),
    queuePrefix,
    token,
    repoKey,
    identities,
    kubeconfigOf: (kind) => kubeconfigs[kind],
    env,
    processes,
    agentEnv: (node, extra = {}) => ({
      ...env,
      STOWAGE_NODE_NAME: node,
      STOWAGE_REPO_KEY: repoKey,
      STOWAGE_KUBELET_ROOT: join(sim.dataRoot, node),
      STOWAGE_LOAD_CONCURRENCY: '{"globalConfig": 2}',
      ...extra,
    }),
    async spawn(kind, name, extra = {}) {
      const proc = await spawnService(kind, name, { ...env, KUBECONFIG: kubeconfigs[kind], ...queuesOf(kind), ...extra });
      processes.push(proc);
      return proc;
    },
    async spawnWorkers(name, extra = {}) {
      const [backup, restore] = await Promise.all([
        stack.spawn('worker', `${name}-backup`, extra),
        stack.spawn('restore-worker', `${name}-restore`, extra),
      ]);
      return { backup, restore };
    },
    async close() {
      await Promise.allSettled(processes.map((p) => p.killHard()));
      redis.disconnect();
      await sim.close().catch(() => undefined);
      await single?.stop().catch(() => undefined);
      await redisCluster?.stop().catch(() => undefined);
      await s3FaultProxy?.close().catch(() => undefined);
      await s3?.stop().catch(() => undefined);
      await rm(storageDir, { recursive: true, force: true });
    },
  };
  return stack;
}

/** REST client of the api process. */
export function apiClient(stack: Stack, api: () => ServiceProcess) {
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${api().port}${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  };
  return {
    call,
    async submit(name: string, spec: Record<string, unknown>) {
      const res = await call('POST', '/v1/backups', { name, spec });
      if (res.status !== 201) throw new Error(`POST /v1/backups ${name}: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    },
    async get(name: string) {
      const res = await call('GET', `/v1/backups/${name}`);
      if (res.status !== 200) throw new Error(`GET /v1/backups/${name}: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    },
  };
}

const ENDED = new Set(['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled']);

/** Waits (on Redis state) until the backup reaches a final phase and finalize has written it to storage. */
export function waitForBackupEnd(state: BackupState, name: string, timeoutMs = 90_000): Promise<BackupRecord> {
  return waitFor(
    `backup ${name} to end`,
    async () => {
      const rec = await state.getBackup(name).catch(() => undefined);
      return rec && ENDED.has(rec.phase) && rec.archivedAt !== undefined ? rec : undefined;
    },
    timeoutMs,
    200,
  );
}

/**
 * Starts one in-process node agent per node against the stack's simulator and repository, and
 * registers each with the planner, as a DaemonSet would. `kube` defaults to a client of the node
 * agent's ServiceAccount.
 */
export async function startAgents(
  stack: Stack,
  nodes: readonly string[],
  opts: Pick<NodeAgentOptions, 'loadConcurrency' | 'bandwidthBytesPerSec' | 'progressIntervalMs' | 'logger'> & { kube?: KubeClients },
): Promise<NodeAgent[]> {
  const agents: NodeAgent[] = [];
  const kube = opts.kube ?? createKubeClients({ kubeconfigPath: stack.kubeconfigOf('node-agent') });
  for (const nodeName of nodes) {
    agents.push(
      await startNodeAgent({
        nodeName,
        kube,
        namespace: 'stowage',
        repoDir: join(stack.storageDir, 'repository'),
        repoKey: stack.repoKey,
        kubeletRoot: join(stack.sim.dataRoot, nodeName),
        loadConcurrency: opts.loadConcurrency,
        logger: opts.logger,
        ...(opts.bandwidthBytesPerSec ? { bandwidthBytesPerSec: opts.bandwidthBytesPerSec } : {}),
        ...(opts.progressIntervalMs ? { progressIntervalMs: opts.progressIntervalMs } : {}),
      }),
    );
    await stack.agents.registerNodeAgent(nodeName, 30 * 60_000);
  }
  return agents;
}

/** A finished backup's blocks, hook runs, events and logs, read back from storage (Redis keeps only its record and counters). */
export async function finishedBackup(stack: Pick<Stack, 'storageDir'>, name: string): Promise<LoadedBackupArchive> {
  return await loadBackupArchive(new FileSystemStorage(stack.storageDir), name);
}
