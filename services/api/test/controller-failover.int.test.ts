import { type ChildProcess, execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createKubeClients, createPvbClient } from '@stowage/kube';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import {
  BackupState,
  DEFAULT_PIPELINE_CONFIG,
  NodeAgentRegistry,
  type RunningWorkers,
  startWorkers,
  statePrefixFor,
} from '@stowage/pipeline';
import { createWorkerConnection, QueueName, type RedisClient } from '@stowage/queue';
import { FileSystemStorage } from '@stowage/storage';
import { deployIdentities, listeningPort, spawnService, uniquePrefix, useTestRedis } from '@stowage/testing';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROLLER_LEASE } from '../src/resources/controller.js';

/*
 * Two api processes with the controller on, as two replicas run: one holds the Lease and submits
 * a ClusterBackup; it is SIGKILLed mid-backup (a pre hook held in the simulator); the other takes
 * the Lease once it lapses and carries the resource's status to the end, and the resource has one
 * run only (the run's name comes from its uid: the new leader finds it, never submits again).
 */

const API_DIR = fileURLToPath(new URL('..', import.meta.url));
const TOKEN = 'failover-token-0123456789abcdef';

const objects = [
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'a' } },
  { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } },
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'a' }, data: { team: 'a' } },
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'app-0', namespace: 'a', labels: { app: 'app' } },
    spec: { nodeName: 'node-a', containers: [{ name: 'main', image: 'busybox' }] },
    status: { phase: 'Running' },
  },
];

interface Replica {
  child: ChildProcess;
  url: string;
  out: () => string;
  exited: Promise<unknown>;
}

function kubectl(kubeconfig: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('kubectl', ['--kubeconfig', kubeconfig, ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('the controller fails over: a SIGKILLed leader, another replica, one run per resource', () => {
  let redis: { url: string; stop: () => Promise<void> };
  let sim: Simulator;
  let storageDir: string;
  let dir: string;
  let workerConnection: RedisClient;
  let workers: RunningWorkers;
  const replicas: Replica[] = [];

  const startReplica = async (env: Record<string, string>): Promise<Replica> => {
    // PORT=0: it binds a port of the kernel's choosing, read back from /proc (a port probed free
    // before the spawn may be another process's by the time the replica binds it).
    const child = spawnService('src/main.ts', {
      cwd: API_DIR,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        LOG_LEVEL: 'warn',
        ...env,
        PORT: '0',
        HOST: '127.0.0.1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout?.on('data', (d) => {
      out += String(d);
    });
    child.stderr?.on('data', (d) => {
      out += String(d);
    });
    const replica = { child, url: '', out: () => out, exited: new Promise((r) => child.once('exit', r)) };
    replicas.push(replica);
    await waitFor('an api replica to be ready', async () => {
      if (child.exitCode !== null) throw new Error(`api exited: ${out}`);
      const port = await listeningPort(child.pid as number);
      if (port === undefined) return undefined;
      replica.url = `http://127.0.0.1:${port}`;
      return (await fetch(`${replica.url}/readyz`)).ok ? true : undefined;
    }).catch((err: Error) => {
      throw new Error(`${err.message}\n${out}`);
    });
    return replica;
  };

  beforeAll(async () => {
    redis = await useTestRedis();
    sim = await startSimulator({ fixture: { objects }, port: 0, materializeVolumes: 'none' });
    const ids = await deployIdentities(sim);
    storageDir = await mkdtemp(join(tmpdir(), 'stowage-failover-'));
    dir = await mkdtemp(join(tmpdir(), 'stowage-failover-yaml-'));
    const prefix = uniquePrefix();
    const env = {
      REDIS_URL: redis.url,
      KUBECONFIG: ids.api,
      STOWAGE_STORAGE: storageDir,
      STOWAGE_API_TOKENS: TOKEN,
      STOWAGE_CONTROLLER: 'enabled',
      STOWAGE_QUEUE_PREFIX: prefix,
      // A killed replica's plan or finalize job is taken over soon.
      STOWAGE_LOCK_DURATION_MS: '5000',
      STOWAGE_STALLED_INTERVAL_MS: '2000',
    };
    await Promise.all([startReplica(env), startReplica(env)]);

    workerConnection = createWorkerConnection(redis.url);
    const kube = createKubeClients({ kubeconfigPath: ids.worker });
    const statePrefix = statePrefixFor(prefix);
    const agents = new NodeAgentRegistry({ redis: workerConnection, prefix: statePrefix });
    await agents.registerNodeAgent('node-a', 600_000);
    workers = startWorkers({
      deps: {
        connection: workerConnection,
        queuePrefix: prefix,
        state: new BackupState({ redis: workerConnection, prefix: statePrefix }),
        agents,
        kube,
        pvbs: createPvbClient(kube, { namespace: 'stowage' }),
        storage: new FileSystemStorage(storageDir),
        logger: pino({ level: 'warn' }),
        clock: { now: Date.now },
        config: DEFAULT_PIPELINE_CONFIG,
      },
      queues: [QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks],
    });
  }, 180_000);

  afterAll(async () => {
    await workers?.close();
    for (const r of replicas) {
      if (r.child.exitCode === null && r.child.signalCode === null) {
        r.child.kill('SIGTERM');
        await r.exited;
      }
    }
    await workerConnection?.quit();
    await sim?.close();
    await redis?.stop();
    for (const d of [storageDir, dir]) if (d) await rm(d, { recursive: true, force: true });
  });

  it('the survivor takes the Lease and the status reaches Completed; one run for the resource', async () => {
    sim.setExecBehaviour('a', 'app-0', { '*': { rules: [{ command: ['/bin/freeze'], hold: true }] } });
    const file = join(dir, 'all.yaml');
    await writeFile(
      file,
      [
        'apiVersion: stowage.dev/v1',
        'kind: ClusterBackup',
        'metadata:',
        '  name: all',
        'spec:',
        '  includedNamespaces: [a]',
        '  hooks:',
        '    resources:',
        '      - name: freeze',
        '        pre:',
        '          - exec: {command: [/bin/freeze]}',
        '',
      ].join('\n'),
    );
    const applied = await kubectl(sim.kubeconfigPath, ['apply', '-f', file]);
    expect(applied.code, applied.stderr).toBe(0);
    const status = async () => {
      const res = await kubectl(sim.kubeconfigPath, ['get', 'clusterbackup', 'all', '-o', 'json']);
      return (JSON.parse(res.stdout) as { status?: { phase?: string; runName?: string } }).status ?? {};
    };
    const holder = async () => {
      const res = await kubectl(sim.kubeconfigPath, ['get', 'lease', CONTROLLER_LEASE, '-n', 'stowage', '-o', 'json']);
      return (JSON.parse(res.stdout) as { spec: { holderIdentity: string } }).spec.holderIdentity;
    };
    // The held pre hook keeps the backup InProgress while the leader is killed.
    await waitFor('the hook to be held', async () => (sim.execLog({ namespace: 'a', pod: 'app-0' }).length > 0 ? true : undefined));
    const running = await waitFor('status InProgress', async () => ((await status()).phase === 'InProgress' ? status() : undefined));
    const first = await holder();
    const leader = replicas.find((r) => first.includes(`-${r.child.pid}-`));
    const survivor = replicas.find((r) => r !== leader);
    expect(leader, `lease holder ${first}`).toBeDefined();
    leader?.child.kill('SIGKILL');
    await leader?.exited;

    const second = await waitFor('the survivor to take the Lease', async () => {
      const h = await holder();
      return h !== first ? h : undefined;
    });
    expect(second).toContain(`-${survivor?.child.pid}-`);
    sim.releaseExecs('a', 'app-0');
    const ended = await waitFor('the ClusterBackup to end', async () => {
      const s = await status();
      return s.phase === 'Completed' || s.phase === 'Failed' || s.phase === 'PartiallyFailed' ? s : undefined;
    });
    expect(ended.phase).toBe('Completed');
    expect(ended.runName).toBe(running.runName);

    const list = await fetch(`${survivor?.url}/v1/backups`, { headers: { authorization: `Bearer ${TOKEN}` } });
    const names = ((await list.json()) as { items: Array<{ name: string }> }).items.map((i) => i.name);
    expect(names).toEqual([running.runName]);
  }, 240_000);
});
