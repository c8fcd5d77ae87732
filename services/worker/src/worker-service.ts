import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createKubeClients, createPvbClient, createPvrClient } from '@stowage/kube';
import {
  BackupState,
  DEFAULT_PIPELINE_CONFIG,
  NodeAgentRegistry,
  type PipelineConfig,
  type PipelineLogger,
  RestoreState,
  type RunningWorkers,
  startWorkers,
  statePrefixFor,
  type WorkerLockTiming,
} from '@stowage/pipeline';
import type { StowageConfig } from '@stowage/platform';
import { createWorkerConnection, QueueName, type RedisClient } from '@stowage/queue';
import { type ObjectStore, openObjectStore } from '@stowage/storage';

export interface WorkerServiceOptions {
  config: StowageConfig;
  logger: PipelineLogger;
  /** HTTP port for /livez and /readyz; 0 picks a free one. */
  port: number;
  /** Pipeline tuning beyond the env config (tests shorten waits). */
  pipeline?: Partial<PipelineConfig>;
  /** BullMQ lock/stalled-check timing (STOWAGE_LOCK_DURATION_MS, STOWAGE_STALLED_INTERVAL_MS). */
  lock?: WorkerLockTiming;
  /** Backup storage, already checked by main.ts (openCheckedObjectStore); default opened from config.storage. */
  storage?: ObjectStore;
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
    onError: (err) => logger.warn({ err: err.message }, 'redis connection error'),
  });
  const kube = createKubeClients(config.kube.kubeconfig ? { kubeconfigPath: config.kube.kubeconfig } : {});
  const pvbs = createPvbClient(kube, { namespace: config.kube.namespace });
  const statePrefix = statePrefixFor(config.redis.queuePrefix);
  const deps = {
    connection: redis,
    queuePrefix: config.redis.queuePrefix,
    state: new BackupState({ redis, prefix: statePrefix }),
    agents: new NodeAgentRegistry({ redis, prefix: statePrefix }),
    kube,
    pvbs,
    storage: opts.storage ?? openObjectStore(config.storage),
    logger,
    clock: { now: Date.now },
    config: {
      ...DEFAULT_PIPELINE_CONFIG,
      namespace: config.kube.namespace,
      waitMode: config.pipeline.waitMode,
      restoreMaxInFlight: config.restore.maxInFlight,
      ...opts.pipeline,
    },
    restores: new RestoreState({ redis, prefix: statePrefix }),
    pvrs: createPvrClient(kube, { namespace: config.kube.namespace }),
  };
  const workers = startWorkers({
    deps,
    queues: [QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks, QueueName.restoreItems],
    concurrency: {
      itemBlocks: config.concurrency.block,
      pvbWatch: config.concurrency.watch,
      hooks: config.concurrency.hook,
      restoreItems: config.restore.itemsConcurrency,
    },
    closeTimeoutMs: Math.max(1_000, config.shutdown.timeoutMs - 5_000),
    ...(opts.lock ? { lock: opts.lock } : {}),
  });

  let ready = false;
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/livez') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
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
      .end('{"error":{"code":"WORKER_NOT_FOUND","message":"only /livez and /readyz"}}');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.config.api.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  logger.info(
    {
      port,
      queues: ['item-blocks', 'pvb-watch', 'hooks', 'restore-items'],
      concurrency: config.concurrency,
      waitMode: deps.config.waitMode,
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
