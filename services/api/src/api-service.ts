import { DEFAULT_SPEC_LIMITS } from '@stowage/core';
import {
  type AccessReviewer,
  createAccessReviewer,
  createKindResolver,
  createKubeClients,
  createPvbClient,
  createPvrClient,
} from '@stowage/kube';
import {
  BackupState,
  cancelRestore,
  DEFAULT_PIPELINE_CONFIG,
  NodeAgentRegistry,
  type PipelineConfig,
  PruneStatusStore,
  planDryRun,
  RestoreState,
  type RunningWorkers,
  ScheduleArchive,
  ScheduleControl,
  ScheduleStore,
  startWorkers,
  statePrefixFor,
  submitRestore,
} from '@stowage/pipeline';
import { createProcessMetrics, type StowageConfig } from '@stowage/platform';
import type { RedisClient } from '@stowage/queue';
import { createFlowProducer, createProducerConnection, createQueue, createWorkerConnection, QUEUE_NAMES, QueueName } from '@stowage/queue';
import { type ObjectStore, openObjectStore, storageCostByWork } from '@stowage/storage';
import type { FlowProducer, Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { ApiDeps, RestoreControl } from './api-deps.js';
import { buildApp } from './app.js';
import type { AuthMode } from './auth.js';
import { type BackupSyncLoop, startBackupSyncLoop, syncBackupCatalogue } from './backup-sync.js';
import { BackupReads } from './backup-view.js';
import type { DryRunPlanner } from './dry-run.js';
import { createPipelineControl } from './pipeline-control.js';
import { type ResourceController, type ResourceControllerOptions, startResourceController } from './resources/controller.js';
import { RestoreReads } from './restore-view.js';
import { backupPhaseReader } from './restores.routes.js';
import { warmRequestValidation } from './validation-warmup.js';

export interface ApiServiceOptions {
  config: StowageConfig;
  logger: Logger;
  /** Port to listen on (0 = a free one); default config.api.port. */
  port?: number;
  host?: string;
  /** Pipeline tuning beyond the env config (tests shorten waits). */
  pipeline?: Partial<PipelineConfig>;
  /** Host the backups and restores queues (plan, tiers, finalize) in this process; default true. */
  hostBackupsQueue?: boolean;
  /** Backup storage, already checked by main.ts (openCheckedObjectStore); default opened from config.storage. */
  storage?: ObjectStore;
  /** Controller tuning (tests: a short pass interval and Lease, a fixed identity). */
  controller?: Pick<ResourceControllerOptions, 'intervalMs' | 'leaseDurationMs' | 'identity'>;
  /** Extra ApiDeps (tests: heartbeat). */
  app?: Partial<Pick<ApiDeps, 'heartbeatMs' | 'dashboardReadOnly'>>;
}

export interface ApiService {
  app: FastifyInstance;
  /** `http://host:port` the API listens on. */
  url: string;
  port: number;
  producer: RedisClient;
  workers: RunningWorkers | undefined;
  /** The resource controller, when STOWAGE_CONTROLLER=enabled. */
  controller: ResourceController | undefined;
  markReady(): void;
  /** Shutdown steps, in order: HTTP intake → workers → queues → Redis. Each is safe to call twice. */
  stopHttp(): Promise<void>;
  stopWorkers(): Promise<void>;
  stopQueues(): Promise<void>;
  stopRedis(): Promise<void>;
}

/** The API's auth from config; `reviewer` (TokenReview/SubjectAccessReview) when Kubernetes tokens are accepted. */
export function authModeOf(config: StowageConfig, reviewer?: AccessReviewer): AuthMode {
  if (config.api.auth === 'disabled') return { mode: 'disabled' };
  return { mode: 'tokens', tokens: config.api.tokens, ...(config.api.kubeTokens && reviewer ? { kube: reviewer } : {}) };
}

/** Waits for the first `ready`; a producer that cannot connect at start is a startup failure, not a retry loop. */
async function connected(redis: RedisClient, what: string, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`${what}: RedisClient not reachable within ${timeoutMs} ms`)), timeoutMs);
    const onReady = () => done();
    const onError = (err: Error) => lastError.push(err.message);
    const lastError: string[] = [];
    function done(err?: Error) {
      clearTimeout(timer);
      redis.off('ready', onReady);
      redis.off('error', onError);
      if (err) reject(new Error(`${err.message}${lastError.length ? ` (last error: ${lastError.at(-1)})` : ''}`, { cause: err }));
      else resolve();
    }
    redis.on('ready', onReady);
    redis.on('error', onError);
  });
}

/**
 * Wires the API service: a producer connection (fail fast) for the API, the queues and the state;
 * a worker connection hosting the `backups` queue (plan, finalize) through pipeline's startWorkers;
 * then the fastify app, listening. Built apart from main.ts so a test can start one in-process.
 */
export async function startApiService(opts: ApiServiceOptions): Promise<ApiService> {
  const { config, logger } = opts;
  if (!config.redis.url) throw new Error('REDIS_URL is required for the api service');
  const prefix = config.redis.queuePrefix;
  const statePrefix = statePrefixFor(prefix);
  const onError = (role: string) => (err: Error) => logger.warn({ err, role }, 'redis connection error');

  const producer = createProducerConnection(config.redis.url, { connectionName: 'stowage-api', onError: onError('producer') });
  await connected(producer, 'api producer connection');
  const state = new BackupState({ redis: producer, prefix: statePrefix });
  const restores = new RestoreState({ redis: producer, prefix: statePrefix });
  const queues: Queue[] = QUEUE_NAMES.map((name) => createQueue(name, { connection: producer, prefix }));
  const flowProducer: FlowProducer = createFlowProducer({ connection: producer, prefix });
  for (const q of queues) q.on('error', (err) => logger.warn({ err, queue: q.name }, 'queue error'));
  flowProducer.on('error', (err) => logger.warn({ err }, 'flow producer error'));
  const storage = opts.storage ?? openObjectStore(config.storage);

  // One registry per process: the pipeline's counters move in it where events happen; /metrics serves it.
  const processMetrics = createProcessMetrics('api', { storageCost: storageCostByWork });
  let workerConnection: RedisClient | undefined;
  let workers: RunningWorkers | undefined;
  if (opts.hostBackupsQueue ?? true) {
    workerConnection = createWorkerConnection(config.redis.url, { connectionName: 'stowage-api-worker', onError: onError('worker') });
    const kube = createKubeClients(config.kube.kubeconfig ? { kubeconfigPath: config.kube.kubeconfig } : {});
    workers = startWorkers({
      deps: {
        connection: workerConnection,
        queuePrefix: prefix,
        state: new BackupState({ redis: workerConnection, prefix: statePrefix }),
        agents: new NodeAgentRegistry({ redis: workerConnection, prefix: statePrefix }),
        kube,
        access: createAccessReviewer(kube),
        pvbs: createPvbClient(kube, { namespace: config.kube.namespace }),
        restores: new RestoreState({ redis: workerConnection, prefix: statePrefix }),
        pvrs: createPvrClient(kube, { namespace: config.kube.namespace }),
        storage,
        metrics: processMetrics.pipeline,
        logger: logger.child({ component: 'pipeline' }),
        clock: { now: Date.now },
        config: {
          ...DEFAULT_PIPELINE_CONFIG,
          namespace: config.kube.namespace,
          blocksInFlightPerBackup: config.pipeline.blocksInFlightPerBackup,
          namespaceListsMax: config.pipeline.namespaceListsMax,
          maxHookTimeoutMs: config.specLimits.maxHookTimeoutMs,
          restoreMaxInFlight: config.restore.maxInFlight,
          restoreWaitImage: config.restore.waitImage,
          restorePlanHeapMb: config.restore.planHeapMb,
          ...opts.pipeline,
        },
      },
      queues: [QueueName.backups, QueueName.restores],
      closeTimeoutMs: Math.max(1_000, config.shutdown.timeoutMs - 5_000),
      lock: opts.config.jobLocks,
    });
  }

  // Schedules tick on BullMQ job schedulers of the backups queue; every replica reconciles them (idempotent).
  const backupsQueue = queues.find((q) => q.name === QueueName.backups) as Queue;
  const hooksQueue = queues.find((q) => q.name === QueueName.hooks);
  const scheduleStore = new ScheduleStore(producer, statePrefix);
  const scheduleArchive = new ScheduleArchive(storage);
  const schedules = {
    store: scheduleStore,
    archive: scheduleArchive,
    control: new ScheduleControl({ store: scheduleStore, archive: scheduleArchive, backupsQueue, state }),
  };
  await schedules.control.reconcile();

  // Backup sync: the catalogue follows storage — at start (before the first request is answered)
  // and every STOWAGE_BACKUP_SYNC_INTERVAL_MS. Schedules storage holds and Redis does not come
  // back paused, first. A failed first pass is logged, not fatal: the
  // backups Redis knows are served meanwhile and the next pass tries again. Finished restores in
  // storage are catalogued in the same passes.
  const syncOptions = { state, restores, schedules, storage, logger: logger.child({ component: 'backup-sync' }) };
  try {
    const synced = await syncBackupCatalogue(syncOptions);
    logger.info(
      {
        added: synced.added.length,
        lost: synced.lost.length,
        removed: synced.removed.length,
        skipped: synced.skipped.length,
        restoresAdded: synced.restores?.added.length,
        restoresRemoved: synced.restores?.removed.length,
        schedulesAdded: synced.schedules?.added.length,
      },
      'backup sync at start',
    );
  } catch (err) {
    logger.warn({ err }, 'backup sync at start failed; retrying at the next interval');
  }
  const syncLoop: BackupSyncLoop = startBackupSyncLoop({ ...syncOptions, intervalMs: config.backupSync.intervalMs });

  // Dry runs read the cluster with a client of their own, made at the first one (an API process
  // that never plans needs no kubeconfig); the node-agent registry is only read.
  let dryRunKube: ReturnType<typeof createKubeClients> | undefined;
  const dryRunAgents = new NodeAgentRegistry({ redis: producer, prefix: statePrefix });
  const dryRun: DryRunPlanner = (request) => {
    dryRunKube ??= createKubeClients(config.kube.kubeconfig ? { kubeconfigPath: config.kube.kubeconfig } : {});
    return planDryRun(
      {
        kube: dryRunKube,
        nodesWithAgent: () => dryRunAgents.nodesWithAgent(),
        namespace: config.kube.namespace,
        listPageSize: opts.pipeline?.listPageSize ?? DEFAULT_PIPELINE_CONFIG.listPageSize,
        namespaceListsMax: opts.pipeline?.namespaceListsMax ?? config.pipeline.namespaceListsMax,
        maxHookTimeoutMs: opts.pipeline?.maxHookTimeoutMs ?? config.specLimits.maxHookTimeoutMs,
      },
      request,
    );
  };

  // Users' Kubernetes tokens: reviewed (TokenReview, SubjectAccessReview) with the api's own identity.
  const reviewKube =
    (config.api.kubeTokens && config.api.auth !== 'disabled') || config.api.controller
      ? createKubeClients(config.kube.kubeconfig ? { kubeconfigPath: config.kube.kubeconfig } : {})
      : undefined;
  const reviewer = reviewKube ? createAccessReviewer(reviewKube) : undefined;

  const control = createPipelineControl({ state, flowProducer, queuePrefix: prefix, hooksQueue });
  const restoreControl: RestoreControl = {
    submit: (input) =>
      submitRestore({ restores, flowProducer, connection: producer, queuePrefix: prefix, maxInFlight: config.restore.maxInFlight }, input),
    cancel: (name) => cancelRestore({ restores, hooksQueue }, name),
  };
  const backupPhase = backupPhaseReader(state, storage);
  const resourceOfKind = reviewKube ? createKindResolver(reviewKube) : undefined;
  // Backup, Restore and Schedule resources (namespaced and cluster): the same submit and delete as REST, one replica at a time.
  const controller =
    config.api.controller && reviewKube
      ? startResourceController({
          kube: reviewKube,
          control,
          reads: new BackupReads(state, storage),
          access: createAccessReviewer(reviewKube),
          restores: {
            requests: {
              control: restoreControl,
              backupPhase,
              storage,
              specLimits: { ...DEFAULT_SPEC_LIMITS, ...config.specLimits },
              ...(resourceOfKind ? { resourceOfKind } : {}),
            },
            reads: new RestoreReads(restores, storage),
            restores,
            control: restoreControl,
            queues,
            storage,
          },
          schedules: {
            schedules,
            requests: { specLimits: { ...DEFAULT_SPEC_LIMITS, ...config.specLimits }, pruneGraceMs: config.repository.pruneGraceMs },
          },
          logger: logger.child({ component: 'controller' }),
          namespace: config.kube.namespace,
          ...opts.controller,
        })
      : undefined;

  let ready = false;
  const app = await buildApp({
    logger,
    redis: producer,
    state,
    queues,
    control,
    dryRun,
    schedules,
    pruneGraceMs: config.repository.pruneGraceMs,
    specLimits: { ...DEFAULT_SPEC_LIMITS, ...config.specLimits },
    streamCaps: config.streams,
    writeRateLimit: config.writeRateLimit,
    restores: {
      restores,
      control: restoreControl,
      backupPhase,
      ...(resourceOfKind ? { resourceOfKind } : {}),
    },
    storage,
    // The backup workers prune (they hold the repository key); their last run's outcome is in Redis.
    prune: new PruneStatusStore(producer, statePrefix),
    auth: authModeOf(config, reviewer),
    metricsRegistry: processMetrics.registry,
    isReady: () => ready && (workerConnection === undefined || workerConnection.status === 'ready'),
    ...opts.app,
  });
  logger.debug({ ms: Math.round(warmRequestValidation()) }, 'request validators warmed up');
  const url = await app.listen({ port: opts.port ?? config.api.port, host: opts.host ?? config.api.host });
  const port = (app.server.address() as { port: number }).port;
  logger.info({ port, prefix, hostsBackupsQueue: workers !== undefined, auth: config.api.auth }, 'api started');

  const once = <T>(fn: () => Promise<T>) => {
    let p: Promise<T> | undefined;
    return () => (p ??= fn());
  };
  return {
    app,
    url: url.replace('0.0.0.0', '127.0.0.1'),
    port,
    producer,
    workers,
    controller,
    markReady: () => {
      ready = true;
    },
    stopHttp: once(async () => {
      ready = false;
      await controller?.stop();
      await syncLoop.stop();
      await app.close();
    }),
    stopWorkers: once(async () => {
      await workers?.close();
    }),
    stopQueues: once(async () => {
      await Promise.allSettled([flowProducer.close(), ...queues.map((q) => q.close())]);
    }),
    stopRedis: once(async () => {
      await Promise.allSettled([
        producer.quit().catch(() => producer.disconnect()),
        workerConnection?.quit().catch(() => workerConnection?.disconnect()),
      ]);
    }),
  };
}
