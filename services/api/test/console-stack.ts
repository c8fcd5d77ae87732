/*
 * Everything the console's end-to-end test runs, in one process: a private redis-server, the
 * simulator with the demo cluster, the API (hosting `backups` and `restores`), the worker queues
 * (item-blocks, pvb-watch, hooks, restore-items) and a real node agent per node; plus Debian's Chromium through playwright-core.
 * Each part talks to the simulator as the dev overlay's ServiceAccount of its process (`deployIdentities`).
 * Used by e2e/console.e2e.test.ts (the root e2e folder has no dependencies of its own).
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sparticuzChromium from '@sparticuz/chromium';
import { createAccessReviewer, createKubeClients, createPvbClient, createPvrClient } from '@stowage/kube';
import { demoFixturePath, type Simulator, startSimulator } from '@stowage/kube-sim';
import { type NodeAgent, startNodeAgent } from '@stowage/node-agent';
import {
  BackupState,
  DEFAULT_PIPELINE_CONFIG,
  NodeAgentRegistry,
  RestoreState,
  type RunningWorkers,
  startWorkers,
  statePrefixFor,
} from '@stowage/pipeline';
import { createLogger, loadConfig } from '@stowage/platform';
import type { RedisClient } from '@stowage/queue';
import { createWorkerConnection, QueueName } from '@stowage/queue';
import { FileSystemStorage } from '@stowage/storage';
import { deployIdentities, uniquePrefix, useTestRedis } from '@stowage/testing';
import { type BrowserContext, chromium } from 'playwright-core';
import { type ApiService, startApiService } from '../src/api-service.js';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface ConsoleStack {
  apiUrl: string;
  token: string;
  sim: Simulator;
  nodes: readonly string[];
  close(): Promise<void>;
}

export interface ConsoleStackOptions {
  /** Volume read rate of each node agent, so a backup lasts long enough to be watched. */
  bandwidthBytesPerSec?: number;
  /** Users' Kubernetes tokens on the API (`STOWAGE_KUBE_AUTH=enabled`, as the shipped deployment runs). */
  kubeAuth?: boolean;
}

/** Starts the whole stack; `close()` stops it in reverse order (each step even if one fails). */
export async function startConsoleStack(opts: ConsoleStackOptions = {}): Promise<ConsoleStack> {
  const stops: Array<[string, () => Promise<unknown>]> = [];
  const close = async () => {
    const failures: string[] = [];
    for (const [what, stop] of stops.reverse()) {
      try {
        await stop();
      } catch (err) {
        failures.push(`${what}: ${(err as Error).message}`);
      }
    }
    stops.length = 0;
    if (failures.length > 0) throw new Error(`console stack did not stop cleanly: ${failures.join('; ')}`);
  };
  try {
    const redis = await useTestRedis();
    stops.push(['redis', () => redis.stop()]);
    const sim = await startSimulator({ fixture: demoFixturePath, port: 0 });
    stops.push(['simulator', () => sim.close()]);
    const identities = await deployIdentities(sim);
    const storageDir = await mkdtemp(join(tmpdir(), 'stowage-console-e2e-'));
    stops.push(['storage dir', () => rm(storageDir, { recursive: true, force: true })]);
    const token = randomBytes(24).toString('base64url');
    const prefix = uniquePrefix();
    const loaded = loadConfig({
      REDIS_URL: redis.url,
      KUBECONFIG: identities.api,
      STOWAGE_STORAGE: storageDir,
      STOWAGE_API_TOKENS: token,
      STOWAGE_QUEUE_PREFIX: prefix,
      ...(opts.kubeAuth ? { STOWAGE_KUBE_AUTH: 'enabled' } : {}),
      LOG_LEVEL: 'warn',
    });
    if (!loaded.ok) throw new Error(`config: ${JSON.stringify(loaded.problems)}`);
    const logger = createLogger({ level: process.env.TEST_LOG_LEVEL === 'debug' ? 'debug' : 'warn', name: 'console-e2e' });

    const api: ApiService = await startApiService({
      config: loaded.config,
      logger,
      port: 0,
      host: '127.0.0.1',
      app: { heartbeatMs: 2_000 },
    });
    stops.push(['api', () => api.stopRedis()]);
    stops.push(['api queues', () => api.stopQueues()]);
    stops.push(['api workers', () => api.stopWorkers()]);
    stops.push(['api http', () => api.stopHttp()]);
    api.markReady();

    const statePrefix = statePrefixFor(prefix);
    const workerConnection: RedisClient = createWorkerConnection(redis.url);
    stops.push(['worker connection', () => workerConnection.quit()]);
    const agents = new NodeAgentRegistry({ redis: workerConnection, prefix: statePrefix });
    const workersAs = (kubeconfigPath: string, queues: QueueName[]): RunningWorkers => {
      const kube = createKubeClients({ kubeconfigPath });
      return startWorkers({
        deps: {
          connection: workerConnection,
          queuePrefix: prefix,
          state: new BackupState({ redis: workerConnection, prefix: statePrefix }),
          agents,
          kube,
          // A Kubernetes user's spec hooks are checked as that user at each exec (docs/tenancy.md).
          access: createAccessReviewer(kube),
          pvbs: createPvbClient(kube, { namespace: 'stowage' }),
          storage: new FileSystemStorage(storageDir),
          logger: logger.child({ component: 'pipeline' }),
          clock: { now: Date.now },
          config: { ...DEFAULT_PIPELINE_CONFIG, pvbPollBaseMs: 200, pvbPollMaxMs: 1_000 },
          restores: new RestoreState({ redis: workerConnection, prefix: statePrefix }),
          pvrs: createPvrClient(kube, { namespace: 'stowage' }),
        },
        queues,
      });
    };
    // Backup workers as stowage-worker; the restore items (the writes) as stowage-restorer, as the
    // overlay's two worker Deployments split the queues.
    const backupWorkers = workersAs(identities.worker, [QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks, QueueName.repository]);
    stops.push(['backup workers', () => backupWorkers.close()]);
    const restoreWorkers = workersAs(identities.restorer, [QueueName.restoreItems]);
    stops.push(['restore workers', () => restoreWorkers.close()]);
    const agentKube = createKubeClients({ kubeconfigPath: identities.nodeAgent });

    const nodes = ['node-a', 'node-b', 'node-c'];
    const repoKey = randomBytes(32).toString('base64');
    const running: NodeAgent[] = [];
    stops.push(['node agents', () => Promise.all(running.map((a) => a.stop()))]);
    for (const node of nodes) {
      running.push(
        await startNodeAgent({
          nodeName: node,
          kube: agentKube,
          namespace: 'stowage',
          repoDir: join(storageDir, 'repository'),
          repoKey,
          kubeletRoot: join(sim.dataRoot, node),
          loadConcurrency: { globalConfig: 1 },
          bandwidthBytesPerSec: opts.bandwidthBytesPerSec,
          progressIntervalMs: 200,
          logger: logger.child({ component: `agent-${node}` }),
        }),
      );
      // What the node agent service's heartbeat does: tells the planner this node has an agent.
      await agents.registerNodeAgent(node, 10 * 60_000);
    }
    return { apiUrl: api.url, token, sim, nodes, close };
  } catch (err) {
    await close().catch(() => undefined);
    throw err;
  }
}

/**
 * Debian's Chromium through playwright-core, with a fresh profile directory (removed on close).
 * Fails with a hint when the binary is missing rather than skipping: the console test must run.
 */
/**
 * The browser the console tests drive: `STOWAGE_CHROMIUM_PATH` when set (a Chromium of your own),
 * otherwise the headless Chromium that the `@sparticuz/chromium` npm package ships (unpacked into
 * the temp dir on first use), so `pnpm install` brings everything and no system browser is needed.
 */
export async function chromiumExecutable(): Promise<string> {
  const own = process.env.STOWAGE_CHROMIUM_PATH;
  if (own) {
    if (!existsSync(own)) throw new Error(`STOWAGE_CHROMIUM_PATH=${own} does not exist`);
    return own;
  }
  return sparticuzChromium.executablePath();
}

export async function launchChromium(): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  const executablePath = await chromiumExecutable();
  const userDataDir = await mkdtemp(join(tmpdir(), 'stowage-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1360, height: 900 },
    timeout: 60_000,
  });
  return {
    context,
    close: async () => {
      await context.close().catch(() => undefined);
      await rm(userDataDir, { recursive: true, force: true });
    },
  };
}
