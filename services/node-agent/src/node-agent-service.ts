import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createKubeClients } from '@stowage/kube';
import { type Logger, registerStorageMetrics } from '@stowage/platform';
import type { RedisClient } from '@stowage/queue';
import { openObjectStore, storageCostByWork } from '@stowage/storage';
import { Registry } from 'prom-client';
import { type NodeAgent, type NodeAgentOptions, startNodeAgent } from './agent.js';
import type { NodeAgentConfig } from './agent-config.js';
import { renderMetrics } from './metrics.js';

export interface NodeAgentService {
  agent: NodeAgent;
  server: Server;
  port: number;
  redis: RedisClient | undefined;
  /** Shutdown steps, in the order main.ts runs them. */
  stopAgent(): Promise<void>;
  stopHttp(): Promise<void>;
  stopRedis(): Promise<void>;
}

/**
 * Wires the node agent: Kubernetes clients, the agent, the Redis heartbeat that tells planners
 * this node has an agent (when REDIS_URL is set), and /livez /readyz /metrics. Apart from main.ts
 * so a test can host it in-process.
 */
export async function startNodeAgentService(
  config: NodeAgentConfig,
  logger: Logger,
  extra: Partial<Pick<NodeAgentOptions, 'takeoverGraceMs' | 'progressIntervalMs' | 'volumeDirTimeoutMs' | 'repoStore'>> = {},
): Promise<NodeAgentService> {
  for (const warning of config.loadConcurrencyWarnings) logger.warn(warning);
  // repoStore is used only when the repository lives in the storage (repoInStorage).
  const { repoStore, ...tuning } = extra;
  const kube = createKubeClients(config.shared.kube.kubeconfig ? { kubeconfigPath: config.shared.kube.kubeconfig } : {});
  const agent = await startNodeAgent({
    nodeName: config.nodeName,
    kube,
    namespace: config.shared.kube.namespace,
    repoDir: config.repoDir,
    // The repository beside the backups in the bucket (s3:// storage without STOWAGE_REPOSITORY_DIR).
    ...(config.repoInStorage ? { repoStore: repoStore ?? openObjectStore(config.shared.storage) } : {}),
    repoKey: config.repoKey,
    kubeletRoot: config.kubeletRoot,
    loadConcurrency: config.loadConcurrency,
    bandwidthBytesPerSec: config.bandwidthBytesPerSec,
    volumeDirTimeoutMs: config.volumeDirTimeoutMs,
    logger,
    stopTimeoutMs: Math.max(1000, config.shared.shutdown.timeoutMs - 5000),
    ...tuning,
  });

  let redis: RedisClient | undefined;
  let heartbeat: NodeJS.Timeout | undefined;
  if (config.shared.redis.url) {
    // Loaded only when needed: @stowage/queue pulls in BullMQ, which an agent without Redis never uses.
    const { createProducerConnection, DEFAULT_AGENT_TTL_MS, NodeAgentRegistry, statePrefixFor } = await import('@stowage/queue');
    redis = createProducerConnection(config.shared.redis.url, {
      connectionName: 'stowage-node-agent',
      onError: (err) => logger.warn({ err }, 'redis connection error'),
    });
    const registry = new NodeAgentRegistry({ redis, prefix: statePrefixFor(config.shared.redis.queuePrefix) });
    const beat = () =>
      registry
        .registerNodeAgent(config.nodeName, DEFAULT_AGENT_TTL_MS)
        .catch((err: unknown) => logger.warn({ err }, 'node agent heartbeat not written'));
    redis.once('ready', () => void beat());
    heartbeat = setInterval(beat, DEFAULT_AGENT_TTL_MS / 3);
    heartbeat.unref();
  }

  // What this agent asked of object storage (stowage_storage_*), beside the agent's own metrics.
  const storageMetrics = new Registry();
  registerStorageMetrics(storageMetrics, storageCostByWork);
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/livez') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    } else if (path === '/readyz') {
      const ok = agent.isReady() && (!redis || redis.status === 'ready');
      res
        .writeHead(ok ? 200 : 503, { 'content-type': 'application/json' })
        .end(JSON.stringify({ status: ok ? 'ready' : 'not-ready', watching: agent.isReady(), redis: redis?.status ?? 'not-configured' }));
    } else if (path === '/metrics') {
      storageMetrics.metrics().then(
        (storage) => res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(renderMetrics(agent.metrics()) + storage),
        (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${err.message}`),
      );
    } else {
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end('{"error":{"code":"NODE_AGENT_NOT_FOUND","message":"only /livez, /readyz and /metrics"}}');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.shared.api.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  logger.info({ port, node: config.nodeName, loadConcurrency: agent.loadConcurrency }, 'node agent listening');

  return {
    agent,
    server,
    port,
    redis,
    stopAgent: () => agent.stop(),
    stopHttp: () => new Promise<void>((resolve) => server.close(() => resolve())),
    stopRedis: async () => {
      // The heartbeat is left to expire (30 s) rather than removed: a restarting agent picks up
      // PVBs created meanwhile, and a drained node drops out of the registry by itself.
      if (heartbeat) clearInterval(heartbeat);
      await redis?.quit().catch(() => redis?.disconnect());
    },
  };
}
