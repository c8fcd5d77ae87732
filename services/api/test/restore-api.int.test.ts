import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { type RestoreObject, restoreDiff, validateRestoreRequest } from '@stowage/core';
import { createKubeClients, type KubeClients } from '@stowage/kube';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { BackupState, RestoreState, restoreLayout, statePrefixFor } from '@stowage/pipeline';
import { loadConfig } from '@stowage/platform';
import { createQueue, QueueName, type RedisClient, restoreJobIds } from '@stowage/queue';
import { FileSystemStorage, readBackupTarball } from '@stowage/storage';
import { spawnWorker, uniquePrefix, useTestRedis, type WorkerProcess } from '@stowage/testing';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiService, startApiService } from '../src/api-service.js';
import { syncBackupCatalogue } from '../src/backup-sync.js';
import { restoreItemListSchema, restoreListSchema, restoreSchema } from '../src/restore.schema.js';
import { apiCaller } from './api-call.js';
import { openSse } from './sse-client.js';

const PVB_CRD = fileURLToPath(new URL('../../../k8s/base/crd-podvolumebackups.yaml', import.meta.url));
const PVR_CRD = fileURLToPath(new URL('../../../k8s/base/crd-podvolumerestores.yaml', import.meta.url));
const TOKEN = 'restore-token-0123456789abcdef';

const widgetCrd = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'widgets.example.com' },
  spec: {
    group: 'example.com',
    scope: 'Namespaced',
    names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
      },
    ],
  },
};

const objects = [
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'stowage' } },
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop', labels: { team: 'shop' } } },
  { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } },
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'shop' }, data: { mode: 'prod' } },
  {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web', namespace: 'shop' },
    spec: {
      type: 'NodePort',
      clusterIP: '10.96.0.42',
      clusterIPs: ['10.96.0.42'],
      selector: { app: 'web' },
      ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080, protocol: 'TCP' }],
    },
  },
  widgetCrd,
  { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'blue', namespace: 'shop' }, spec: { color: 'blue', size: 3 } },
  { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'red', namespace: 'shop' }, spec: { color: 'red', size: 5 } },
];

async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Every key matching `pattern` (SCAN, on the test's own Redis). */
async function scanKeys(redis: RedisClient, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  for (let cursor = '0'; ; ) {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
    if (cursor === '0') return keys;
  }
}

async function readBack(kube: KubeClients, path: string): Promise<RestoreObject | undefined> {
  return kube.requestJson<RestoreObject>({ path }).catch(() => undefined);
}

const PLURALS: Record<string, string> = {
  ConfigMap: 'configmaps',
  Service: 'services',
  Namespace: 'namespaces',
  Widget: 'widgets',
  CustomResourceDefinition: 'customresourcedefinitions',
};
function pathOf(o: RestoreObject): string {
  const apiVersion = o.apiVersion ?? 'v1';
  const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  const ns = o.metadata.namespace;
  const plural = PLURALS[o.kind ?? ''];
  return ns ? `${base}/namespaces/${ns}/${plural}/${o.metadata.name}` : `${base}/${plural}/${o.metadata.name}`;
}

describe('restores through the API: the api service hosts restores, a worker process creates the items', () => {
  let redis: { url: string; stop: () => Promise<void> };
  let sim: Simulator;
  let api: ApiService;
  let worker: WorkerProcess;
  let storageDir: string;
  let kube: KubeClients;
  let prefix: string;
  const call = apiCaller(() => api.url, TOKEN);
  const restoreEnded = (name: string) =>
    waitFor(`restore ${name} to end`, async () => {
      const res = await call('GET', `/v1/restores/${name}`);
      const phase = res.status === 200 ? (res.json().phase as string) : undefined;
      return phase && ['Completed', 'PartiallyFailed', 'Failed', 'Canceled'].includes(phase) ? phase : undefined;
    });

  beforeAll(async () => {
    redis = await useTestRedis();
    sim = await startSimulator({ fixture: { objects }, port: 0, extraManifests: [PVB_CRD, PVR_CRD], materializeVolumes: 'none' });
    storageDir = await mkdtemp(join(tmpdir(), 'stowage-restore-api-'));
    prefix = uniquePrefix();
    const env = {
      REDIS_URL: redis.url,
      KUBECONFIG: sim.kubeconfigPath,
      STOWAGE_STORAGE: storageDir,
      STOWAGE_API_TOKENS: TOKEN,
      STOWAGE_QUEUE_PREFIX: prefix,
    };
    const loaded = loadConfig({ ...env, LOG_LEVEL: 'warn' });
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    api = await startApiService({
      config: loaded.config,
      logger: pino({ level: 'warn' }),
      port: 0,
      host: '127.0.0.1',
      app: { heartbeatMs: 500 },
    });
    api.markReady();
    worker = await spawnWorker(env);
    kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
  }, 90_000);

  afterAll(async () => {
    await worker?.stop();
    await api?.stopHttp();
    await api?.stopWorkers();
    await api?.stopQueues();
    await api?.stopRedis();
    await sim?.close();
    await redis?.stop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  it('bad input: every problem at once with its field; a missing backup 404; a backup not finished 400 naming its phase', async () => {
    const bad = await call('POST', '/v1/restores', {
      name: 'Bad_Name',
      spec: { backupName: 5, existingResourcePolicy: 'sometimes', namespaceMapping: { shop: 'Not A Namespace' } },
    });
    expect(bad.status).toBe(400);
    const paths = (bad.json().error.problems as Array<{ path: string }>).map((p) => p.path);
    expect(paths).toEqual(expect.arrayContaining(['name', 'spec.backupName', 'spec.existingResourcePolicy']));
    expect(paths.some((p) => p.startsWith('spec.namespaceMapping'))).toBe(true);

    const missing = await call('POST', '/v1/restores', { spec: { backupName: 'no-such-backup' } });
    expect(missing.status).toBe(404);
    expect(missing.json().error.message).toContain('no-such-backup');

    // A backup recorded but not finished (phase New).
    const state = new BackupState({ redis: api.producer, prefix: statePrefixFor(prefix) });
    await state.createBackup({ name: 'not-done', uid: 'u-1', spec: {}, phase: 'New', createdAt: Date.now() });
    const early = await call('POST', '/v1/restores', { spec: { backupName: 'not-done' } });
    expect(early.status).toBe(400);
    expect(early.json().error.problems).toEqual([{ path: 'spec.backupName', message: expect.stringContaining('is New') }]);
  });

  it('round trip: back up, delete the namespace and the CRD, restore — a CRD and its CRs in one restore, Services with clusterIP and nodePort, events, items, logs, results in storage', async () => {
    const backup = await call('POST', '/v1/backups', {
      name: 'bk1',
      spec: { includedNamespaces: ['shop'], includeClusterResources: true },
    });
    expect(backup.status).toBe(201);
    await waitFor('backup bk1 Completed', async () => {
      const res = await call('GET', '/v1/backups/bk1');
      return res.json().phase === 'Completed' ? true : undefined;
    });
    const storage = new FileSystemStorage(storageDir);
    const originals: RestoreObject[] = [];
    for await (const item of readBackupTarball(storage, 'bk1')) {
      // Stowage's own CRDs are in the backup too; they are never deleted here, so they are not compared.
      const stowageCrd = item.groupResource === 'customresourcedefinitions.apiextensions.k8s.io' && item.name.endsWith('.stowage.dev');
      const kinds = ['ConfigMap', 'Service', 'Widget', 'CustomResourceDefinition'];
      if (!stowageCrd && (kinds.includes(String(item.object.kind)) || (item.object.kind === 'Namespace' && item.name === 'shop'))) {
        originals.push(item.object as RestoreObject);
      }
    }
    expect(originals.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ConfigMap/settings',
      'CustomResourceDefinition/widgets.example.com',
      'Namespace/shop',
      'Service/web',
      'Widget/blue',
      'Widget/red',
    ]);

    await kube.core.deleteNamespace({ name: 'shop' });
    await kube.requestJson({ method: 'DELETE', path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com' });
    await waitFor('shop gone', async () => ((await readBack(kube, '/api/v1/namespaces/shop')) ? undefined : true));

    const body = { name: 'rs1', spec: { backupName: 'bk1', includedNamespaces: ['shop'], includeClusterResources: true } };
    const created = await call('POST', '/v1/restores', body, { 'x-request-id': 'rs1-req' });
    expect(created.status).toBe(201);
    const events = openSse(`${api.url}/v1/restores/rs1/events`, { authorization: `Bearer ${TOKEN}` });
    expect((await call('POST', '/v1/restores', body)).status).toBe(409);
    expect((await call('POST', '/v1/restores', body, { 'x-request-id': 'rs1-req' })).status).toBe(200);

    expect(await restoreEnded('rs1')).toBe('Completed');
    await events.ended;
    const types = events.messages.map((m) => m.event);
    expect(types).toContain('plan.done');
    expect(types).toContain('tier.done');
    expect(types.at(-1)).toBe('restore.phase');
    expect(JSON.parse(events.messages.at(-1)?.data ?? '{}').data.to).toBe('Completed');

    const view = (await call('GET', '/v1/restores/rs1')).json();
    expect(view.progress.totalItems).toBe(view.progress.itemsRestored);
    expect(view.itemResults.failed).toBe(0);
    // The CRD's tier comes before the tier of its CRs.
    const tierOf = (gr: string) =>
      (view.tiers as Array<{ index: number; groupResources: string[] }>).find((t) => t.groupResources.includes(gr))?.index;
    expect(tierOf('customresourcedefinitions.apiextensions.k8s.io')).toBeLessThan(tierOf('widgets.example.com') ?? -1);

    const spec = validateRestoreRequest(body);
    if (!spec.ok) throw new Error('spec');
    const context = {
      backupName: 'bk1',
      restoreName: 'rs1',
      restoreUid: view.uid,
      spec: spec.value,
      volumes: { podVolumes: {}, reprovisionedClaims: [] },
      restoreWait: { image: 'x', command: ['x'] },
    };
    for (const original of originals) {
      const restored = await readBack(kube, pathOf(original));
      expect(restored, `${original.kind} ${original.metadata.name}`).toBeDefined();
      expect(restoreDiff(original, restored as RestoreObject, context), `${original.kind} ${original.metadata.name}`).toEqual([]);
    }
    const service = (await readBack(kube, '/api/v1/namespaces/shop/services/web')) as unknown as {
      spec: { clusterIP: string; ports: Array<{ nodePort: number }> };
    };
    expect(service.spec.clusterIP).not.toBe('10.96.0.42');
    expect(service.spec.ports[0]?.nodePort).not.toBe(30080);

    const items = (await call('GET', '/v1/restores/rs1/items')).json();
    expect(items.total).toBe(view.progress.totalItems);
    // Stowage's own CRDs were backed up too and still exist, unchanged: left alone without a warning. So
    // do the default ClusterRoles and bindings every cluster has (the simulator's too).
    const clusterDefaults = new Set(
      ['clusterroles', 'clusterrolebindings'].flatMap((plural) =>
        [...sim.state.store.list(`${plural}.rbac.authorization.k8s.io`, undefined)]
          .filter((o) => o.metadata.labels?.['kubernetes.io/bootstrapping'] === 'rbac-defaults')
          .map((o) => `${plural}.rbac.authorization.k8s.io/-cluster-/${o.metadata.name}`),
      ),
    );
    for (const item of items.items as Array<{ key: string; outcome: string }>) {
      expect(item.outcome, item.key).toBe(
        item.key.endsWith('.stowage.dev') || clusterDefaults.has(item.key) ? 'exists-skipped' : 'created',
      );
    }
    expect(view.warnings).toBe(0);
    const logs = await call('GET', '/v1/restores/rs1/logs');
    expect(logs.status).toBe(200);
    // The results file is part of the archive finalize writes right after the phase ends.
    await waitFor('rs1 archived', async () => ((await storage.exists(restoreLayout('rs1').record)) ? true : undefined));
    const results = JSON.parse(gunzipSync((await storage.getObject(restoreLayout('rs1').results)) as Buffer).toString('utf8'));
    expect(results.errors).toEqual({ velero: [], cluster: [], namespaces: {} });

    const metrics = await (await fetch(`${api.url}/metrics`)).text();
    expect(metrics).toMatch(/stowage_restores\{phase="Completed"\} 1/);
    // This api hosts the restores queue: its finalize ended rs1 and counted it, once.
    expect(metrics).toMatch(/^stowage_restore_success_total 1$/m);
    expect(metrics).toMatch(/^stowage_restore_attempt_total 1$/m);
    const list = (await call('GET', '/v1/restores')).json();
    expect(list.items.map((r: { name: string }) => r.name)).toContain('rs1');
    expect((await call('POST', '/v1/restores/rs1/cancel')).status).toBe(409);
    expect((await call('DELETE', '/v1/restores/rs1')).status).toBe(200);
    expect((await call('GET', '/v1/restores/rs1')).status).toBe(404);
    expect(await storage.exists(restoreLayout('rs1').results)).toBe(false);
  });

  it('a finished restore leaves Redis: its state stays until the archive is in storage, then only the catalogue entry remains, and get, items, logs, events and the list answer as before — also after Redis forgets it (then sync)', async () => {
    // bk1 is the round trip's backup.
    expect((await call('GET', '/v1/backups/bk1')).json().phase).toBe('Completed');
    const statePrefix = statePrefixFor(prefix);
    const restores = new RestoreState({ redis: api.producer, prefix: statePrefix });
    const stateKeys = async () => (await scanKeys(api.producer, `${statePrefix}:rs:{rs-arch}:*`)).sort();
    // Storage refuses restore.json for now (a directory holds its name): finalize ends the phase,
    // then fails to archive and retries — the API answers from Redis meanwhile.
    const blocker = join(storageDir, restoreLayout('rs-arch').record);
    await mkdir(blocker, { recursive: true });
    await writeFile(join(blocker, 'occupied'), '');
    expect(
      (await call('POST', '/v1/restores', { name: 'rs-arch', spec: { backupName: 'bk1', includedNamespaces: ['shop'] } })).status,
    ).toBe(201);
    const liveEvents = openSse(`${api.url}/v1/restores/rs-arch/events`, { authorization: `Bearer ${TOKEN}` });
    await restoreEnded('rs-arch');

    const snapshot = async () => {
      const get = await call('GET', '/v1/restores/rs-arch');
      const items = await call('GET', '/v1/restores/rs-arch/items?limit=2');
      const allItems = await call('GET', '/v1/restores/rs-arch/items?limit=1000');
      const logs = await call('GET', '/v1/restores/rs-arch/logs');
      const list = await call('GET', '/v1/restores');
      expect([get.status, items.status, allItems.status, logs.status, list.status]).toEqual([200, 200, 200, 200, 200]);
      // The answers match the schemas their routes declare.
      expect(restoreSchema.safeParse(get.json()).error).toBeUndefined();
      expect(restoreItemListSchema.safeParse(items.json()).error).toBeUndefined();
      expect(restoreListSchema.safeParse(list.json()).error).toBeUndefined();
      const sse = openSse(`${api.url}/v1/restores/rs-arch/events`, { authorization: `Bearer ${TOKEN}` });
      await sse.ended;
      const names = (list.json().items as Array<{ name: string }>).map((r) => r.name);
      return { view: get.json(), items: items.json(), allItems: allItems.json(), logs: logs.text, events: sse.messages, names };
    };
    // Ended but not archived: nothing is dropped, everything is read from Redis.
    const live = await snapshot();
    // Compared with this from here on: all but the storage figures, which grow with finalize's own
    // writes of the archive (each try); once archived, those are compared with the archive's.
    type Snapshot = Awaited<ReturnType<typeof snapshot>>;
    const sansStorage = (s: Snapshot) => ({ ...s, view: { ...s.view, storage: undefined } });
    const sansStorageView = (view: Snapshot['view']) => ({ ...view, storage: undefined });
    expect((await restores.getRestore('rs-arch'))?.archivedAt).toBeUndefined();
    expect(await stateKeys()).toEqual(
      expect.arrayContaining(['events', 'logs', 'results', 'tiers'].map((s) => restores.key('rs-arch', s))),
    );
    expect(live.view.progress.totalItems).toBeGreaterThan(0);
    expect(live.allItems.total).toBe(live.view.progress.totalItems);
    expect(live.items.items).toHaveLength(2);
    expect(live.logs.length).toBeGreaterThan(0);
    expect(live.events.map((m) => m.event)).toContain('plan.done');
    expect(live.events.at(-1)?.event).toBe('restore.phase');
    expect(live.names.filter((n) => n === 'rs-arch')).toHaveLength(1);
    // The stream replayed after the end is the one a client saw while the restore ran.
    await liveEvents.ended;
    expect(live.events).toEqual(liveEvents.messages);

    // Storage takes restore.json again: finalize's retry archives the restore and drops its state.
    await rm(blocker, { recursive: true });
    await waitFor('rs-arch archived and dropped', async () =>
      (await restores.getRestore('rs-arch'))?.archivedAt !== undefined && (await stateKeys()).length === 3 ? true : undefined,
    );
    // The documented remainder: the catalogue entry (record and counters), the dropped once-set
    // (a string refusing late counts) and its index entry; of the rest only BullMQ's finished jobs
    // (kept by KEEP_FINISHED_JOBS) still name the restore.
    const leftAfterDrop = ['cnt', 'once', 'rec'].map((suffix) => restores.key('rs-arch', suffix));
    expect(await stateKeys()).toEqual(leftAfterDrop);
    expect(await api.producer.zscore(`${statePrefix}:restores`, 'rs-arch')).not.toBeNull();
    const jobKeyPrefixes = [QueueName.restores, QueueName.restoreItems, QueueName.pvbWatch, QueueName.hooks].map((q) => `${prefix}:${q}:`);
    const others = (await scanKeys(api.producer, '*rs-arch*')).filter(
      (k) => !k.startsWith(`${statePrefix}:rs:{rs-arch}:`) && !jobKeyPrefixes.some((p) => k.startsWith(p)),
    );
    expect(others).toEqual([]);
    const catalogueBytes = (await api.producer.memory('USAGE', restores.key('rs-arch', 'rec'))) ?? 0;
    const counterBytes = (await api.producer.memory('USAGE', restores.key('rs-arch', 'cnt'))) ?? 0;
    const droppedOnceBytes = (await api.producer.memory('USAGE', restores.key('rs-arch', 'once'))) ?? 0;
    expect(droppedOnceBytes).toBeLessThan(200); // its key and a short string
    expect(catalogueBytes + counterBytes + droppedOnceBytes).toBeLessThan(4096);
    expect(sansStorage(await snapshot())).toEqual(sansStorage(live));
    // Archiving cost requests of its own: counted, never lost.
    const archivedStorage = (await call('GET', '/v1/restores/rs-arch')).json().storage;
    expect(archivedStorage.requests.put).toBeGreaterThan(live.view.storage.requests.put);

    // A re-run of finalize after the drop (BullMQ delivers at least once) changes nothing.
    const archiveBefore = await readFile(join(storageDir, restoreLayout('rs-arch').record), 'utf8');
    const queue = createQueue(QueueName.restores, { connection: api.producer, prefix });
    try {
      const finalizeJob = await queue.getJob(restoreJobIds.finalize('rs-arch'));
      expect(await finalizeJob?.getState()).toBe('completed');
      await finalizeJob?.retry('completed');
      await waitFor('finalize re-run', async () => {
        const job = await queue.getJob(restoreJobIds.finalize('rs-arch'));
        return (await job?.getState()) === 'completed' && job?.returnvalue?.skipped === 'ended' ? true : undefined;
      });
    } finally {
      await queue.close();
    }
    expect(await readFile(join(storageDir, restoreLayout('rs-arch').record), 'utf8')).toBe(archiveBefore);
    expect(await stateKeys()).toEqual(leftAfterDrop);
    expect(sansStorage(await snapshot())).toEqual(sansStorage(live));

    // A resumed SSE client gets only what follows its Last-Event-ID, from storage.
    const middle = live.events[Math.floor(live.events.length / 2)]?.id as string;
    const resumed = openSse(`${api.url}/v1/restores/rs-arch/events`, { authorization: `Bearer ${TOKEN}`, 'last-event-id': middle });
    await resumed.ended;
    expect(resumed.messages).toEqual(live.events.slice(live.events.findIndex((m) => m.id === middle) + 1));

    // Redis forgets it entirely (lost, or a fresh install on the same storage): not listed until sync,
    // but found by name; after sync listed once, and everything answers as before.
    await restores.deleteRestore('rs-arch');
    expect((await call('GET', '/v1/restores')).json().items.map((r: { name: string }) => r.name)).not.toContain('rs-arch');
    const fromArchive = (await call('GET', '/v1/restores/rs-arch')).json();
    expect(sansStorageView(fromArchive)).toEqual(sansStorageView(live.view));
    // The archive's storage figures are those Redis ended with: finalize's own writes included.
    expect(fromArchive.storage).toEqual(archivedStorage);
    const storage = new FileSystemStorage(storageDir);
    const state = new BackupState({ redis: api.producer, prefix: statePrefixFor(prefix) });
    const logger = pino({ level: 'silent' });
    const synced = await syncBackupCatalogue({ state, restores, storage, logger });
    expect(synced.restores?.added).toEqual(['rs-arch']);
    expect((await syncBackupCatalogue({ state, restores, storage, logger })).restores?.added).toEqual([]);
    expect(sansStorage(await snapshot())).toEqual(sansStorage(live));

    // Deleted: storage and catalogue entry both go, and sync does not bring it back.
    expect((await call('DELETE', '/v1/restores/rs-arch')).status).toBe(200);
    expect((await syncBackupCatalogue({ state, restores, storage, logger })).restores?.added).toEqual([]);
    expect((await call('GET', '/v1/restores/rs-arch')).status).toBe(404);
    expect((await call('GET', '/v1/restores')).json().items.map((r: { name: string }) => r.name)).not.toContain('rs-arch');
  }, 120_000);
});
