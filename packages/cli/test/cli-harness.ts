import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ApiService, startApiService } from '@stowage/api';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { loadNodeAgentConfig, type NodeAgentService, startNodeAgentService } from '@stowage/node-agent';
import { createLogger, loadConfig } from '@stowage/platform';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { startWorkerService, type WorkerService } from '@stowage/worker';

/** The CLI from its TypeScript sources through tsx (what `pnpm stowage` runs in a checkout). */
export const STOWAGE_BIN = fileURLToPath(new URL('../bin/stowage.js', import.meta.url));
/** The bundle build.mjs writes: what `npm i -g @stowage/cli` installs. */
export const STOWAGE_BUNDLE = fileURLToPath(new URL('../dist/stowage.mjs', import.meta.url));
const BUILD_SCRIPT = fileURLToPath(new URL('../build.mjs', import.meta.url));
export const TOKEN = 'cli-test-token-0123456789abcdef';
export const REPO_KEY = 'cli-test-repository-key';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

let bundle: Promise<string> | undefined;
/** Builds the bundle once per test file (build.mjs renames it into place, so files building at once are safe). */
export function builtCli(): Promise<string> {
  bundle ??= new Promise((resolve, reject) =>
    execFile(process.execPath, [BUILD_SCRIPT], (err, _stdout, stderr) =>
      err ? reject(new Error(`building the CLI bundle failed: ${stderr}`, { cause: err })) : resolve(STOWAGE_BUNDLE),
    ),
  );
  return bundle;
}

/**
 * Runs `stowage …` as a child process with only the given env added: the bundle users install
 * (one file, no compile step: it starts in a fraction of the time tsx needs, which keeps tests
 * that run several CLIs at once within bounds on a loaded machine), or, for `repo` commands,
 * the sources through bin/stowage.js (the bundle does not carry the repository's native module).
 */
export async function runStowage(args: string[], env: Record<string, string | undefined>, timeoutMs = 60_000): Promise<CliResult> {
  const entry = args[0] === 'repo' ? STOWAGE_BIN : await builtCli();
  return new Promise((resolve, reject) => {
    const childEnv: Record<string, string | undefined> = { ...process.env };
    for (const k of Object.keys(childEnv)) if (k.startsWith('STOWAGE_')) delete childEnv[k];
    // TZ pinned: tests read the local times the CLI prints.
    const child = spawn(process.execPath, [entry, ...args], {
      env: { ...childEnv, TZ: 'UTC', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`stowage ${args.join(' ')} did not finish within ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface Stack {
  apiUrl: string;
  sim: Simulator;
  storageDir: string;
  /** The private redis-server and the queue prefix (tests that drop a run's state in Redis). */
  redisUrl: string;
  queuePrefix: string;
  env: { STOWAGE_API_URL: string; STOWAGE_API_TOKEN: string };
  close(): Promise<void>;
}

/**
 * The whole backend in this process on a private redis-server and the simulator with the demo
 * cluster: the API (hosting plan/finalize), one worker service and a node agent per demo node.
 */
export async function startStack(): Promise<Stack> {
  const redis = await useTestRedis();
  const sim = await startSimulator();
  const storageDir = await mkdtemp(join(tmpdir(), 'stowage-cli-storage-'));
  const env = {
    REDIS_URL: redis.url,
    KUBECONFIG: sim.kubeconfigPath,
    STOWAGE_STORAGE: storageDir,
    STOWAGE_API_TOKENS: TOKEN,
    STOWAGE_QUEUE_PREFIX: uniquePrefix(),
    STOWAGE_REPO_KEY: REPO_KEY,
    STOWAGE_SHUTDOWN_TIMEOUT_MS: '8000',
    LOG_LEVEL: 'error',
  };
  const loaded = loadConfig(env);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  const config = loaded.config;
  const logger = createLogger({ level: 'error', name: 'cli-test' });
  const api: ApiService = await startApiService({ config, logger, port: 0, host: '127.0.0.1', app: { heartbeatMs: 1_000 } });
  api.markReady();
  const worker: WorkerService = await startWorkerService({ config, logger, port: 0 });
  worker.markReady();
  const agents: NodeAgentService[] = [];
  for (const node of ['node-a', 'node-b', 'node-c']) {
    const agentConfig = loadNodeAgentConfig({ ...env, STOWAGE_NODE_NAME: node, STOWAGE_KUBELET_ROOT: join(sim.dataRoot, node), PORT: '0' });
    if (!agentConfig.ok) throw new Error(agentConfig.problems.join('; '));
    agents.push(await startNodeAgentService(agentConfig.config, logger));
  }
  return {
    apiUrl: api.url,
    sim,
    storageDir,
    redisUrl: redis.url,
    queuePrefix: env.STOWAGE_QUEUE_PREFIX,
    env: { STOWAGE_API_URL: api.url, STOWAGE_API_TOKEN: TOKEN },
    async close() {
      await api.stopHttp();
      await api.stopWorkers();
      await worker.stopWorkers();
      for (const a of agents) {
        await a.stopAgent();
        await a.stopHttp();
        await a.stopRedis();
      }
      await worker.stopHttp();
      await worker.stopRedis();
      await api.stopQueues();
      await api.stopRedis();
      await sim.close();
      await redis.stop();
      await rm(storageDir, { recursive: true, force: true });
    },
  };
}
