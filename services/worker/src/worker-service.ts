import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAccessReviewer, createKubeClients, createPvbClient, createPvrClient } from '@stowage/kube';
import {
  BackupState,
  type BlockWait,
  DEFAULT_PIPELINE_CONFIG,
  type HostedQueue,
  NodeAgentRegistry,
  type PipelineConfig,
  type PipelineLogger,
  type RepositoryGc,
  RestoreState,
  type RunningWorkers,
  startWorkers,
  statePrefixFor,
} from '@stowage/pipeline';
import { createProcessMetrics, type StowageConfig, type WorkerQueue } from '@stowage/platform';
import { createWorkerConnection, QueueName, type RedisClient } from '@stowage/queue';
import { type ObjectStore, openObjectStore, storageCostByWork } from '@stowage/storage';

export interface WorkerServiceOptions {
  config: StowageConfig;
  logger: PipelineLogger;
  /** HTTP port for /livez and /readyz; 0 picks a free one. */
  port: number;
  /** Pipeline tuning beyond the env config (tests shorten waits). */
  pipeline?: Partial<PipelineConfig>;
  /** Backup storage, already checked by main.ts (openCheckedObjectStore); default opened from config.storage. */
  storage?: ObjectStore;
  /** The volume repository (repositoryGcFromConfig): the `repository` queue's deletions forget snapshots and prune. */
  repository?: RepositoryGc | undefined;
  /** Not the product: the benchmark's inline comparison (`inlineBlockWait`) wired into this worker. */
  blockWait?: BlockWait;
}

export interface WorkerService {
  redis: RedisClient;
  workers: RunningWorkers;
  server: Server;
  /** The bound HTTP port. */
  port: number;
  isReady(): boolean;
  markReady(): void;
  /** Steps in shutdown order (HTTP intake is stopped by the lifecycle's readiness first). */
  stopWorkers(): Promise<void>;
  stopHttp(): Promise<void>;
  stopRedis(): Promise<void>;
}

const HOSTED: Record<WorkerQueue, HostedQueue> = {
  'item-blocks': QueueName.itemBlocks,
  'pvb-watch': QueueName.pvbWatch,
  hooks: QueueName.hooks,
  'restore-items': QueueName.restoreItems,
  repository: QueueName.repository,
};

/** The pipeline's queue of a configured name (the config's names are the queues' own). */
function hostedQueueOf(name: WorkerQueue): HostedQueue {
  return HOSTED[name];
}

/**
 * Wires the worker: RedisClient, Kubernetes clients, storage, backup state, and the item-blocks,
 * pvb-watch and hooks queues with their concurrency. Built apart from main.ts so a test can
 * start one in-process; main.ts adds config loading, the logger and signal handling.
 */
export async function startWorkerService(opts: WorkerServiceOptions): Promise<WorkerService> {
  const { config, logger } = opts;
  if (!config.redis.url) throw new Error('REDIS_URL is required for the worker');
  const redis = createWorkerConnection(config.redis.url, {
    connectionName: 'stowage-worker',
    onError: (err) => logger.warn({ err }, 'redis connection error'),
  });
  const kube = createKubeClients(config.kube.kubeconfig ? { kubeconfigPath: config.kube.kubeconfig } : {});
  const pvbs = createPvbClient(kube, { namespace: config.kube.namespace });
  const statePrefix = statePrefixFor(config.redis.queuePrefix);
  // The pipeline's counters of this process (PVB outcomes, hooks, …), served at /metrics as the node agent serves its own.
  const metrics = createProcessMetrics('worker', { storageCost: storageCostByWork });
  const deps = {
    metrics: metrics.pipeline,
    connection: redis,
    queuePrefix: config.redis.queuePrefix,
    state: new BackupState({ redis, prefix: statePrefix }),
    agents: new NodeAgentRegistry({ redis, prefix: statePrefix }),
    kube,
    // A spec hook's exec is first asked of the API server as the run's requester.
    access: createAccessReviewer(kube),
    pvbs,
    storage: opts.storage ?? openObjectStore(config.storage),
    logger,
    clock: { now: Date.now },
    config: {
      ...DEFAULT_PIPELINE_CONFIG,
      namespace: config.kube.namespace,
      restoreMaxInFlight: config.restore.maxInFlight,
      restoreWaitImage: config.restore.waitImage,
      ...opts.pipeline,
    },
    restores: new RestoreState({ redis, prefix: statePrefix }),
    pvrs: createPvrClient(kube, { namespace: config.kube.namespace }),
    blockWait: opts.blockWait,
    repository: opts.repository,
  };
  // STOWAGE_WORKER_QUEUES: the backup workers and the restore workers (their own identity) split them.
  const queues = config.worker.queues.map(hostedQueueOf);
  const workers = startWorkers({
    deps,
    queues,
    concurrency: {
      itemBlocks: config.concurrency.block,
      pvbWatch: config.concurrency.watch,
      hooks: config.concurrency.hook,
      restoreItems: config.restore.itemsConcurrency,
    },
    closeTimeoutMs: Math.max(1_000, config.shutdown.timeoutMs - 5_000),
    lock: opts.config.jobLocks,
  });

  let ready = false;
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/livez') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      return;
    }
    if (path === '/metrics') {
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${err.message}`),
      );
      return;
    }
    if (path === '/readyz') {
      const ok = ready && redis.status === 'ready';
      res
        .writeHead(ok ? 200 : 503, { 'content-type': 'application/json' })
        .end(JSON.stringify({ status: ok ? 'ready' : 'not-ready', redis: redis.status }));
      return;
    }
    res
      .writeHead(404, { 'content-type': 'application/json' })
      .end('{"error":{"code":"WORKER_NOT_FOUND","message":"only /livez, /readyz and /metrics"}}');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.config.api.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  logger.info(
    {
      port,
      queues,
      concurrency: config.concurrency,
      ...(opts.blockWait ? { blockWait: 'inline comparison (benchmark only)' } : {}),
    },
    'worker started',
  );

  return {
    redis,
    workers,
    server,
    port,
    isReady: () => ready,
    markReady: () => {
      ready = true;
    },
    stopWorkers: async () => {
      ready = false;
      await workers.close();
    },
    stopHttp: () => new Promise<void>((resolve) => server.close(() => resolve())),
    stopRedis: async () => {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
