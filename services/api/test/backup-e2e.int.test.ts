import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createKubeClients, createPvbClient, type PvbClient, pvbLabels } from '@stowage/kube';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import {
  BackupState,
  DEFAULT_PIPELINE_CONFIG,
  NodeAgentRegistry,
  type RunningWorkers,
  startWorkers,
  statePrefixFor,
} from '@stowage/pipeline';
import { loadConfig } from '@stowage/platform';
import type { RedisClient } from '@stowage/queue';
import { createWorkerConnection, QueueName } from '@stowage/queue';
import { FileSystemStorage } from '@stowage/storage';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiService, startApiService } from '../src/api-service.js';
import { apiCaller } from './api-call.js';
import { openSse } from './sse-client.js';

const CRD_PATH = fileURLToPath(new URL('../../../k8s/base/crd-podvolumebackups.yaml', import.meta.url));
const TOKEN = 'e2e-token-0123456789abcdef';
const PRE = ['/bin/freeze'];
const POST = ['/bin/thaw'];

const pod = (name: string, annotations: Record<string, string>, volumes: unknown[]) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'shop', uid: randomUUID(), annotations, labels: { app: name } },
  spec: {
    nodeName: 'node-a',
    containers: [
      {
        name: 'main',
        image: 'busybox',
        volumeMounts: (volumes as Array<{ name: string }>).map((v) => ({ name: v.name, mountPath: `/d/${v.name}` })),
      },
    ],
    volumes,
  },
  status: { phase: 'Running' },
});

const objects = [
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop' } },
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'stowage' } },
  { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } },
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'shop' }, data: { k: 'v' } },
  pod(
    'db-0',
    {
      'pre.hook.backup.velero.io/command': JSON.stringify(PRE),
      'post.hook.backup.velero.io/command': JSON.stringify(POST),
      'backup.velero.io/backup-volumes': 'data',
    },
    [{ name: 'data', emptyDir: {} }],
  ),
  pod('web-0', {}, []),
];

/** Stands in for the node agent: moves PVBs New → InProgress → Completed, or → Canceled on spec.cancel. */
function startPvbCompleter(pvbs: PvbClient, opts: { hold: () => boolean }): () => Promise<void> {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      for (const p of await pvbs.listPvbs().catch(() => [])) {
        const phase = p.status?.phase;
        if (phase === 'Completed' || phase === 'Failed' || phase === 'Canceled') continue;
        const now = new Date().toISOString();
        if (p.spec.cancel) {
          await pvbs
            .patchPvbStatus(p.metadata.name, { phase: 'Canceled', completionTimestamp: now, message: 'canceled' })
            .catch(() => undefined);
        } else if (!phase || phase === 'New') {
          await pvbs.patchPvbStatus(p.metadata.name, {
            phase: 'InProgress',
            startTimestamp: now,
            progress: { totalBytes: 2048, bytesDone: 0 },
          });
        } else if (!opts.hold()) {
          await pvbs.patchPvbStatus(p.metadata.name, {
            phase: 'Completed',
            completionTimestamp: now,
            snapshotID: `snap-${p.metadata.name}`,
            progress: { totalBytes: 2048, bytesDone: 2048 },
          });
        }
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}

async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('a backup through the API against the simulator (api hosts backups; item-blocks, pvb-watch, hooks hosted here)', () => {
  let redis: { url: string; stop: () => Promise<void> };
  let sim: Simulator;
  let api: ApiService;
  let workerConnection: RedisClient;
  let workers: RunningWorkers;
  let storageDir: string;
  let pvbs: PvbClient;
  let hold = false;
  let stopCompleter: () => Promise<void>;

  beforeAll(async () => {
    redis = await useTestRedis();
    sim = await startSimulator({ fixture: { objects }, port: 0, extraManifests: [CRD_PATH], materializeVolumes: 'none' });
    storageDir = await mkdtemp(join(tmpdir(), 'stowage-api-e2e-'));
    const prefix = uniquePrefix();
    const loaded = loadConfig({
      REDIS_URL: redis.url,
      KUBECONFIG: sim.kubeconfigPath,
      STOWAGE_STORAGE: storageDir,
      STOWAGE_API_TOKENS: TOKEN,
      STOWAGE_QUEUE_PREFIX: prefix,
      LOG_LEVEL: 'warn',
    });
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const config = loaded.config;
    api = await startApiService({ config, logger: pino({ level: 'warn' }), port: 0, host: '127.0.0.1', app: { heartbeatMs: 500 } });
    api.markReady();

    // The worker side, in this process: the queues the worker service hosts.
    workerConnection = createWorkerConnection(redis.url);
    const kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
    pvbs = createPvbClient(kube, { namespace: 'stowage' });
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
        pvbs,
        storage: new FileSystemStorage(storageDir),
        logger: pino({ level: 'warn' }),
        clock: { now: Date.now },
        config: { ...DEFAULT_PIPELINE_CONFIG, pvbPollBaseMs: 100, pvbPollMaxMs: 500 },
      },
      queues: [QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks, QueueName.repository],
    });
    stopCompleter = startPvbCompleter(pvbs, { hold: () => hold });
  }, 60_000);

  afterAll(async () => {
    await stopCompleter?.();
    await workers?.close();
    await api?.stopHttp();
    await api?.stopWorkers();
    await api?.stopQueues();
    await api?.stopRedis();
    await workerConnection?.quit();
    await sim?.close();
    await redis?.stop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  const call = apiCaller(() => api.url, TOKEN);

  it('runs to Completed; status, blocks, events and logs agree with the simulator', async () => {
    const sseBefore = openSse(`${api.url}/v1/backups/e2e-1/events`, { authorization: `Bearer ${TOKEN}` });
    expect(await sseBefore.status).toBe(404); // not submitted yet
    const created = await call(
      'POST',
      '/v1/backups',
      { name: 'e2e-1', spec: { includedNamespaces: ['shop'] } },
      { 'x-request-id': 'e2e-req-1' },
    );
    expect(created.status).toBe(201);
    expect(created.json()).toMatchObject({ name: 'e2e-1', phase: 'New', requestId: 'e2e-req-1' });

    const sse = openSse(`${api.url}/v1/backups/e2e-1/events`, { authorization: `Bearer ${TOKEN}` });
    expect(await sse.status).toBe(200);
    await Promise.race([
      sse.ended,
      new Promise((_, reject) => setTimeout(() => reject(new Error(`stream did not end: ${JSON.stringify(sse.messages)}`)), 45_000)),
    ]);
    const last = sse.messages.at(-1)!;
    expect(last.event).toBe('backup.phase');
    expect(JSON.parse(last.data!).data.to).toBe('Completed');
    const phases = sse.messages.filter((m) => m.event === 'backup.phase').map((m) => JSON.parse(m.data!).data.to);
    expect(phases).toEqual(expect.arrayContaining(['InProgress', 'Completed']));

    const backup = (await call('GET', '/v1/backups/e2e-1')).json();
    expect(backup).toMatchObject({
      phase: 'Completed',
      hookStatus: { hooksAttempted: 2, hooksFailed: 0 },
      podVolumeBackups: { total: 1, Completed: 1 },
      errors: 0,
    });
    expect(backup.progress.totalItems).toBeGreaterThan(0);
    expect(backup.progress.itemsBackedUp).toBe(backup.progress.totalItems);
    expect(Date.parse(backup.completedAt)).toBeGreaterThanOrEqual(Date.parse(backup.startedAt));

    // Blocks match the PVBs in the cluster and the simulator's exec log.
    const blocks = (await call('GET', '/v1/backups/e2e-1/blocks')).json();
    const dbBlock = blocks.items.find((b: { pods: string[] }) => b.pods.includes('shop/db-0'));
    expect(dbBlock).toBeDefined();
    const clusterPvbs = await pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=e2e-1` });
    expect(clusterPvbs).toHaveLength(1);
    const [pvb] = clusterPvbs;
    expect(dbBlock.podVolumeBackups).toEqual([
      expect.objectContaining({ name: pvb!.metadata.name, node: pvb!.spec.node, volume: 'data', phase: 'Completed', pod: 'shop/db-0' }),
    ]);
    const execs = sim.execLog({ namespace: 'shop', pod: 'db-0' });
    expect(execs.map((e) => e.command)).toEqual([PRE, POST]);
    expect(
      dbBlock.hookRuns.map((r: { phase: string; container: string; exitCode: number; command: string[] }) => [
        r.phase,
        r.container,
        r.exitCode,
        r.command,
      ]),
    ).toEqual([
      ['pre', execs[0]!.container, execs[0]!.exitCode, PRE],
      ['post', execs[1]!.container, execs[1]!.exitCode, POST],
    ]);
    for (const run of dbBlock.hookRuns) expect(Date.parse(run.endedAt)).toBeGreaterThanOrEqual(Date.parse(run.startedAt));
    // The post hook ran after the PVB was done.
    expect(Date.parse(execs[1]!.startedAt)).toBeGreaterThanOrEqual(Date.parse(pvb!.status!.completionTimestamp!));

    const logs = await call('GET', '/v1/backups/e2e-1/logs');
    expect(logs.status).toBe(200);
    expect(logs.text.trim().split('\n').length).toBeGreaterThan(0);

    expect(await stat(join(storageDir, 'backups', 'e2e-1', 'velero-backup.json'))).toBeDefined();

    // DELETE removes the record and the stored data.
    const deleted = await call('DELETE', '/v1/backups/e2e-1');
    expect(deleted.status).toBe(200);
    await expect(stat(join(storageDir, 'backups', 'e2e-1'))).rejects.toThrow();
    expect((await call('GET', '/v1/backups/e2e-1')).status).toBe(404);
  }, 60_000);

  it('cancel mid-backup: 202, PVBs canceled, post hooks still run, the backup ends Canceled', async () => {
    hold = true; // PVBs stay InProgress until canceled
    try {
      expect((await call('POST', '/v1/backups', { name: 'e2e-cancel', spec: { includedNamespaces: ['shop'] } })).status).toBe(201);
      await waitFor('a PVB in progress', async () => {
        const list = await pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=e2e-cancel` });
        return list.some((p) => p.status?.phase === 'InProgress') ? true : undefined;
      });
      const res = await call('POST', '/v1/backups/e2e-cancel/cancel');
      expect(res.status).toBe(202);
      expect(res.json()).toMatchObject({ name: 'e2e-cancel', cancelRequested: true });
      const phase = await waitFor('the backup to end', async () => {
        const b = (await call('GET', '/v1/backups/e2e-cancel')).json();
        return ['Completed', 'PartiallyFailed', 'Failed', 'Canceled'].includes(b.phase) ? b.phase : undefined;
      });
      expect(phase).toBe('Canceled');
      const list = await pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=e2e-cancel` });
      expect(list.map((p) => p.status?.phase)).toEqual(['Canceled']);
      const posts = sim.execLog({ namespace: 'shop', pod: 'db-0' }).filter((e) => e.command.join(' ') === POST.join(' '));
      expect(posts.length).toBe(2); // one from the first backup, one from this one
      expect((await call('POST', '/v1/backups/e2e-cancel/cancel')).status).toBe(409);
    } finally {
      hold = false;
    }
  }, 60_000);

  it('backup-level hooks and hook retries: validated field by field, every run and try shown in the backup and its blocks', async () => {
    const bad = await call('POST', '/v1/backups', {
      name: 'e2e-hooks-bad',
      spec: {
        hooks: {
          backup: { pre: [{ command: ['/bin/pause'], mode: 'some' }] },
          resources: [{ name: 'x', post: [{ exec: { command: ['x'], onError: 'FailBlock' } }] }],
        },
      },
    });
    expect(bad.status).toBe(400);
    expect(bad.json().error.problems.map((d: { path: string }) => d.path)).toEqual([
      'spec.hooks.backup.pre[0].mode',
      'spec.hooks.backup.pre[0].namespace',
      'spec.hooks.resources[0].post[0].exec.onError',
    ]);

    const web = { namespace: 'shop', labelSelector: { matchLabels: { app: 'web-0' } } };
    const spec = {
      includedNamespaces: ['shop'],
      hooks: {
        backup: { pre: [{ ...web, name: 'pause', command: ['/bin/pause'] }], post: [{ ...web, name: 'resume', command: ['/bin/resume'] }] },
        resources: [
          {
            name: 'web',
            labelSelector: { matchLabels: { app: 'web-0' } },
            pre: [{ exec: { command: ['/bin/warm'], retries: { max: 1, backoff: '10ms' } } }],
          },
        ],
      },
    };
    expect((await call('POST', '/v1/backups', { name: 'e2e-hooks', spec })).status).toBe(201);
    const backup = await waitFor('the backup to end', async () => {
      const b = (await call('GET', '/v1/backups/e2e-hooks')).json();
      return ['Completed', 'PartiallyFailed', 'Failed', 'Canceled'].includes(b.phase) ? b : undefined;
    });
    expect(backup.phase).toBe('Completed');
    expect(backup.spec.hooks.backup.pre[0]).toMatchObject({ name: 'pause', mode: 'all', timeout: '30s' });
    expect(backup.backupHooks.pre).toMatchObject({ hooksRun: 1, hooksFailed: 0 });
    expect(backup.backupHooks.pre.runs).toEqual([
      expect.objectContaining({ pod: 'shop/web-0', container: 'main', phase: 'pre', source: 'backup', hookName: 'pause', exitCode: 0 }),
    ]);
    expect(backup.backupHooks.post.runs).toEqual([
      expect.objectContaining({ pod: 'shop/web-0', phase: 'post', hookName: 'resume', exitCode: 0 }),
    ]);
    // The pod's spec hook ran once (it passed on its first try) and says it could have taken two.
    const blocks = (await call('GET', '/v1/backups/e2e-hooks/blocks')).json();
    const webBlock = blocks.items.find((b: { pods: string[] }) => b.pods.includes('shop/web-0'));
    expect(webBlock.hookRuns).toEqual([
      expect.objectContaining({ command: ['/bin/warm'], hookName: 'web', try: 1, tries: 2, exitCode: 0 }),
    ]);
    const execs = sim.execLog({ namespace: 'shop', pod: 'web-0' }).map((e) => e.command.join(' '));
    expect(execs).toEqual(['/bin/pause', '/bin/warm', '/bin/resume']);
  }, 60_000);
});
