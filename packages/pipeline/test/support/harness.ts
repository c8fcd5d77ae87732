import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createKubeClients, createPvbClient, createPvrClient, type KubeClients, type PvbClient } from '@stowage/kube';
import { type Fixture, type Simulator, startSimulator } from '@stowage/kube-sim';
import {
  BackupState,
  DEFAULT_PIPELINE_CONFIG,
  type ItemResult,
  type RunLogLine as LogLine,
  NodeAgentRegistry,
  type PipelineConfig,
  type PipelineDeps,
  type PipelineLogger,
  type RestoreArchive,
  RestoreState,
  readRestoreArchive,
  readRestoreArchiveItems,
  readRestoreArchiveLogs,
  statePrefixFor,
} from '@stowage/pipeline';
import { createWorkerConnection, QueueName, type RedisClient } from '@stowage/queue';
import { type BackupStorage, FileSystemStorage } from '@stowage/storage';
import { uniquePrefix } from '@stowage/testing';

export const CRD_PATH = fileURLToPath(new URL('../../../../k8s/base/crd-podvolumebackups.yaml', import.meta.url));
export const PVR_CRD_PATH = fileURLToPath(new URL('../../../../k8s/base/crd-podvolumerestores.yaml', import.meta.url));

/** A logger that keeps error lines (a test can print them on failure) and drops the rest. */
export function quietLogger(sink: string[] = []): PipelineLogger {
  // Errors are logged as `{ err }` (pino's serializer keeps their stack); JSON alone would drop their message.
  const text = (obj: object) => JSON.stringify(obj, (_key, value) => (value instanceof Error ? `${value.name}: ${value.message}` : value));
  const make = (bindings: Record<string, unknown>): PipelineLogger => ({
    debug: () => undefined,
    info: () => undefined,
    warn: (obj, msg) => sink.push(`WARN ${msg} ${text({ ...bindings, ...obj })}`),
    error: (obj, msg) => sink.push(`ERROR ${msg} ${text({ ...bindings, ...obj })}`),
    child: (more) => make({ ...bindings, ...more }),
  });
  return make({});
}

/** Every queue a backup and then a restore of it go through (the restore tests start workers on all of them). */
export const BACKUP_AND_RESTORE_QUEUES = [
  QueueName.backups,
  QueueName.itemBlocks,
  QueueName.pvbWatch,
  QueueName.hooks,
  QueueName.restores,
  QueueName.restoreItems,
];

export interface Harness {
  sim: Simulator;
  kube: KubeClients;
  pvbs: PvbClient;
  redis: RedisClient;
  deps: PipelineDeps;
  storageDir: string;
  queuePrefix: string;
  logs: string[];
  close(): Promise<void>;
}

/**
 * One simulator (fixture + the PVB CRD), one Redis connection on the test's redis-server, a
 * filesystem storage dir, and PipelineDeps wired to them with a unique prefix.
 */
export async function startHarness(opts: {
  redisUrl: string;
  fixture: Fixture;
  agentNodes: string[];
  config?: Partial<PipelineConfig>;
  /** Volume directories of the fixture's pods (default none: most tests never read volume bytes). */
  materializeVolumes?: 'all' | 'with-files' | 'none';
  extraManifests?: string[];
}): Promise<Harness> {
  const sim = await startSimulator({
    fixture: opts.fixture,
    port: 0,
    extraManifests: [CRD_PATH, PVR_CRD_PATH, ...(opts.extraManifests ?? [])],
    materializeVolumes: opts.materializeVolumes ?? 'none',
  });
  const kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
  const pvbs = createPvbClient(kube, { namespace: 'stowage' });
  // The service's own factory: a redis:// URL or a Redis Cluster (STOWAGE_TEST_REDIS=cluster).
  const redis = createWorkerConnection(opts.redisUrl);
  const queuePrefix = uniquePrefix();
  const statePrefix = statePrefixFor(queuePrefix);
  const storageDir = await mkdtemp(join(tmpdir(), 'stowage-pipeline-'));
  const logs: string[] = [];
  const agents = new NodeAgentRegistry({ redis, prefix: statePrefix });
  for (const n of opts.agentNodes) await agents.registerNodeAgent(n, 600_000);
  const deps: PipelineDeps = {
    connection: redis,
    queuePrefix,
    state: new BackupState({ redis, prefix: statePrefix }),
    agents,
    kube,
    pvbs,
    storage: new FileSystemStorage(storageDir),
    logger: quietLogger(logs),
    clock: { now: Date.now },
    config: { ...DEFAULT_PIPELINE_CONFIG, ...opts.config },
    restores: new RestoreState({ redis, prefix: statePrefix }),
    pvrs: createPvrClient(kube, { namespace: 'stowage' }),
  };
  return {
    sim,
    kube,
    pvbs,
    redis,
    deps,
    storageDir,
    queuePrefix,
    logs,
    async close() {
      redis.disconnect();
      await sim.close();
      await rm(storageDir, { recursive: true, force: true });
    },
  };
}

/**
 * The harness' deps as the deployed ServiceAccount `name` (in `stowage`) sees the cluster: the
 * same Redis, state and storage, the Kubernetes clients with a token of that account (apply them
 * first: `deployIdentities(h.sim)` from @stowage/testing).
 */
export function depsAs(h: Harness, name: string): PipelineDeps {
  const kube = createKubeClients({ kubeconfigYaml: h.sim.kubeconfigFor({ serviceAccount: { namespace: 'stowage', name } }).yaml });
  return {
    ...h.deps,
    kube,
    pvbs: createPvbClient(kube, { namespace: 'stowage' }),
    pvrs: createPvrClient(kube, { namespace: 'stowage' }),
  };
}

/** Polls `check` until it returns a value (not undefined) or `timeoutMs` passes. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000, everyMs = 100): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

const ENDED = new Set(['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled']);

/** Waits until the backup reaches a final phase and finalize has written it to storage; returns the phase. */
export function waitForBackupEnd(state: BackupState, name: string, timeoutMs = 30_000): Promise<string> {
  return waitFor(
    `backup ${name} to end`,
    async () => {
      const rec = await state.getBackup(name);
      return rec && ENDED.has(rec.phase) && rec.archivedAt !== undefined ? rec.phase : undefined;
    },
    timeoutMs,
  );
}

/** A finished restore as storage holds it once restore-finalize archived it (Redis then keeps only its record and counters). */
export interface ArchivedRestore extends RestoreArchive {
  phase: string;
  items: Record<string, ItemResult>;
  logs: LogLine[];
}

/** Waits until the restore reaches a final phase and restore-finalize archived it; returns what storage holds of it. */
export async function waitForRestoreEnd(
  restores: RestoreState,
  storage: Pick<BackupStorage, 'getObject'>,
  name: string,
  timeoutMs = 60_000,
): Promise<ArchivedRestore> {
  const phase = await waitFor(
    `restore ${name} to end`,
    async () => {
      const rec = await restores.getRestore(name);
      return rec && ENDED.has(rec.phase) && rec.archivedAt !== undefined ? rec.phase : undefined;
    },
    timeoutMs,
  );
  const archive = await readRestoreArchive(storage, name);
  if (!archive) throw new Error(`restore ${name} is archived but storage has no restore.json`);
  const [items, logs] = await Promise.all([readRestoreArchiveItems(storage, name), readRestoreArchiveLogs(storage, name)]);
  return { ...archive, phase, items, logs };
}
