import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runKey } from '@stowage/core';
import { createAccessReviewer, createKubeClients, createPvbClient } from '@stowage/kube';
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
import { createWorkerConnection, QueueName, type RedisClient } from '@stowage/queue';
import { FileSystemStorage } from '@stowage/storage';
import { type DeployedIdentities, deployIdentities, uniquePrefix, useTestRedis } from '@stowage/testing';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiService, startApiService } from '../src/api-service.js';
import { backupPhaseReader } from '../src/restores.routes.js';
import { apiCaller } from './api-call.js';

/*
 * Two teams on one cluster (RoleBindings to Kubernetes' `admin` in `a` and `b`), each calling the
 * REST API with its own Kubernetes token: what each may do is what RBAC on stowage.dev says, asked
 * of the (simulated) API server; a spec hook or a mapped restore is checked as the requester.
 */

const STATIC_TOKEN = 'tenants-static-token-0123456789';

const pod = (namespace: string, name: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace, labels: { app: name } },
  spec: { nodeName: 'node-a', containers: [{ name: 'main', image: 'busybox' }] },
  status: { phase: 'Running' },
});

const adminIn = (user: string, namespace: string) => ({
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'RoleBinding',
  metadata: { name: `${user}-admin`, namespace },
  roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
  subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
});

const objects = [
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'a' } },
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'b' } },
  { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } },
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'a' }, data: { team: 'a' } },
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'b' }, data: { team: 'b' } },
  pod('a', 'app-0'),
  pod('b', 'app-0'),
  pod('kube-system', 'etcd-0'),
  adminIn('alice', 'a'),
  adminIn('bob', 'b'),
  // carol may back up the whole cluster, but may exec nowhere.
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'cluster-backupper' },
    rules: [{ apiGroups: ['stowage.dev'], resources: ['clusterbackups'], verbs: ['create', 'get', 'list', 'watch'] }],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'carol-cluster-backupper' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-backupper' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'carol' }],
  },
];

const TERMINAL = new Set(['Completed', 'PartiallyFailed', 'Failed', 'Canceled']);

describe('tenants: one RBAC model for REST, acting for the requester', () => {
  let redis: { url: string; stop: () => Promise<void> };
  let sim: Simulator;
  let ids: DeployedIdentities;
  let api: ApiService;
  let workerConnection: RedisClient;
  let workers: RunningWorkers;
  let storageDir: string;
  let alice: ReturnType<typeof apiCaller>;
  let bob: ReturnType<typeof apiCaller>;
  let carol: ReturnType<typeof apiCaller>;
  const admin = apiCaller(() => api.url, STATIC_TOKEN);

  /** Asks the simulated API server (as its admin) whether `user` may do it: the world, not our belief. */
  const canI = async (user: string, attrs: Record<string, string>) => {
    const res = await fetch(`${sim.url}/apis/authorization.k8s.io/v1/subjectaccessreviews`, {
      method: 'POST',
      headers: { authorization: `Bearer ${sim.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: { user, groups: ['system:authenticated'], resourceAttributes: attrs },
      }),
    });
    return ((await res.json()) as { status: { allowed: boolean } }).status.allowed;
  };

  const waitForEnd = async (name: string) => {
    const until = Date.now() + 60_000;
    for (;;) {
      const res = await admin('GET', `/v1/backups/${name}`);
      if (res.status === 200 && TERMINAL.has(res.json().phase)) return res.json();
      if (Date.now() > until) throw new Error(`backup ${name} did not end: ${res.text}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  beforeAll(async () => {
    redis = await useTestRedis();
    sim = await startSimulator({ fixture: { objects }, port: 0, materializeVolumes: 'none' });
    ids = await deployIdentities(sim);
    storageDir = await mkdtemp(join(tmpdir(), 'stowage-tenants-'));
    const prefix = uniquePrefix();
    const loaded = loadConfig({
      REDIS_URL: redis.url,
      KUBECONFIG: ids.api,
      STOWAGE_STORAGE: storageDir,
      STOWAGE_API_TOKENS: STATIC_TOKEN,
      STOWAGE_KUBE_AUTH: 'enabled',
      STOWAGE_QUEUE_PREFIX: prefix,
      LOG_LEVEL: 'warn',
    });
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    api = await startApiService({ config: loaded.config, logger: pino({ level: 'warn' }), port: 0, host: '127.0.0.1' });
    api.markReady();

    // The worker side in this process, under the worker's deployed identity.
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
        access: createAccessReviewer(kube),
        pvbs: createPvbClient(kube, { namespace: 'stowage' }),
        storage: new FileSystemStorage(storageDir),
        logger: pino({ level: 'warn' }),
        clock: { now: Date.now },
        config: DEFAULT_PIPELINE_CONFIG,
      },
      queues: [QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks],
    });
    alice = apiCaller(() => api.url, sim.addUser('alice'));
    bob = apiCaller(() => api.url, sim.addUser('bob'));
    carol = apiCaller(() => api.url, sim.addUser('carol'));
  }, 120_000);

  afterAll(async () => {
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

  it("aggregates Stowage's namespaced kinds into admin/edit/view, and no cluster-wide kind", async () => {
    expect(await canI('alice', { verb: 'create', group: 'stowage.dev', resource: 'backups', namespace: 'a' })).toBe(true);
    expect(await canI('alice', { verb: 'list', group: 'stowage.dev', resource: 'restores', namespace: 'a' })).toBe(true);
    expect(await canI('alice', { verb: 'create', group: 'stowage.dev', resource: 'backups', namespace: 'b' })).toBe(false);
    expect(await canI('alice', { verb: 'create', group: 'stowage.dev', resource: 'clusterbackups' })).toBe(false);
  });

  it("team A's backup of its namespace completes; A lists only a's backups and gets 403 for b's", async () => {
    // The kinds the deployed identities may read today (#43 widens them): a team's ConfigMaps and Pods.
    const spec = { includedResources: ['configmaps', 'pods'] };
    const made = await alice('POST', '/v1/backups', { namespace: 'a', name: 'nightly', spec });
    expect(made.status, made.text).toBe(201);
    const aName = runKey('a', 'nightly');
    expect(made.json()).toMatchObject({ name: aName, namespace: 'a' });
    expect(made.json().spec.includedNamespaces).toEqual(['a']);
    const madeB = await bob('POST', '/v1/backups', { namespace: 'b', name: 'nightly', spec });
    expect(madeB.status, madeB.text).toBe(201);
    const bName = madeB.json().name as string;
    expect(bName).not.toBe(aName);

    const done = await waitForEnd(aName);
    const logs = (await admin('GET', `/v1/backups/${aName}/logs`)).text;
    expect(done.phase, logs).toBe('Completed');
    expect(done.progress.itemsBackedUp).toBeGreaterThan(0);
    const resources = (await alice('GET', `/v1/backups/${aName}/resources`)).json().resources as Record<string, string[]>;
    const items = Object.values(resources).flat();
    expect(items).toContain('a/settings');
    expect(items.some((i) => i.startsWith('b/'))).toBe(false);

    const listed = (await alice('GET', '/v1/backups')).json().items.map((i: { name: string }) => i.name);
    expect(listed).toEqual([aName]);
    const all = (await admin('GET', '/v1/backups')).json().items.map((i: { name: string }) => i.name);
    expect(all).toEqual(expect.arrayContaining([aName, bName]));

    const theirs = await alice('GET', `/v1/backups/${bName}`);
    expect(theirs.status).toBe(403);
    expect(theirs.json().error).toMatchObject({ code: 'API_FORBIDDEN' });
    expect(theirs.json().error.message).toBe('User "alice" cannot get resource "backups" in API group "stowage.dev" in the namespace "b"');
    expect((await alice('DELETE', `/v1/backups/${bName}`)).status).toBe(403);
    expect((await alice('POST', `/v1/backups/${bName}/cancel`)).status).toBe(403);
    expect((await alice('GET', `/v1/backups/${bName}/events`)).status).toBe(403);
  });

  it("a caller without `get` in b learns nothing of b's names: the same 403 whether one exists or not", async () => {
    const exists = runKey('b', 'nightly');
    const never = runKey('b', 'never-made');
    expect((await admin('GET', `/v1/backups/${exists}`)).status).toBe(200);
    expect((await admin('GET', `/v1/backups/${never}`)).status).toBe(404);
    const refusal = 'User "alice" cannot get resource "backups" in API group "stowage.dev" in the namespace "b"';
    for (const suffix of ['', '/blocks', '/logs', '/resources', '/download']) {
      for (const name of [exists, never]) {
        const res = await alice('GET', `/v1/backups/${name}${suffix}`);
        expect([res.status, res.json().error.message], `GET ${name}${suffix}`).toEqual([403, refusal]);
      }
    }
    for (const name of [exists, never]) {
      const watch = await alice('GET', `/v1/backups/${name}/events`);
      expect([watch.status, watch.json().error.message]).toEqual([403, refusal.replace('cannot get', 'cannot watch')]);
      const cancel = await alice('POST', `/v1/backups/${name}/cancel`);
      expect([cancel.status, cancel.json().error.message]).toEqual([403, refusal.replace('cannot get', 'cannot update')]);
      const del = await alice('DELETE', `/v1/backups/${name}`);
      expect([del.status, del.json().error.message]).toEqual([403, refusal.replace('cannot get', 'cannot delete')]);
      const restore = await alice('POST', '/v1/restores', { namespace: 'a', spec: { backupName: name } });
      expect([restore.status, restore.json().error.message]).toEqual([403, refusal]);
    }
    const restoreRefusal = 'User "alice" cannot get resource "restores" in API group "stowage.dev" in the namespace "b"';
    const theirRestore = await alice('GET', `/v1/restores/${runKey('b', 'any')}`);
    expect([theirRestore.status, theirRestore.json().error.message]).toEqual([403, restoreRefusal]);
    // Who may look in b is told what is missing there.
    expect((await bob('GET', `/v1/backups/${never}`)).status).toBe(404);
    expect((await bob('GET', `/v1/backups/${exists}`)).status).toBe(200);
    // carol may read cluster-wide backups, not b's: b's backup is as missing to her as one never made.
    const hers = [await carol('GET', `/v1/backups/${exists}`), await carol('GET', `/v1/backups/${never}`)];
    expect(hers.map((r) => [r.status, r.json().error?.code])).toEqual([
      [404, 'API_NOT_FOUND'],
      [404, 'API_NOT_FOUND'],
    ]);
    expect(hers[0]?.json().error.message).toBe(`backup "${exists}" does not exist`);
    // Nothing was changed by the refused calls.
    expect((await admin('GET', `/v1/backups/${exists}`)).json().cancelRequestedAt).toBeUndefined();
  });

  it('says who a token is; a Kubernetes user gets no session cookie (it opens pages with Stowage’s rights)', async () => {
    const who = await alice('GET', '/v1/identity');
    expect(who.status).toBe(200);
    expect(who.json()).toMatchObject({ kind: 'user', username: 'alice', description: 'User "alice"' });
    expect(who.json().groups).toContain('system:authenticated');
    expect((await admin('GET', '/v1/identity')).json()).toEqual({
      kind: 'stowage',
      description: 'a static API token (cluster-admin equivalent)',
    });
    const session = await fetch(`${api.url}/v1/session`, { method: 'POST', headers: { authorization: `Bearer ${sim.addUser('alice')}` } });
    expect(session.status).toBe(200);
    expect(session.headers.get('set-cookie')).toBeNull();
    expect(((await session.json()) as { cookie: boolean }).cookie).toBe(false);
  });

  it('refuses what RBAC does not grant: another namespace, the cluster, a wider selection', async () => {
    const inB = await alice('POST', '/v1/backups', { namespace: 'b', spec: {} });
    expect(inB.status).toBe(403);
    expect(inB.json().error.message).toContain('cannot create resource "backups" in API group "stowage.dev" in the namespace "b"');
    const cluster = await alice('POST', '/v1/backups', { spec: { includedNamespaces: ['a'] } });
    expect(cluster.status).toBe(403);
    expect(cluster.json().error.message).toContain(
      'cannot create resource "clusterbackups" in API group "stowage.dev" at the cluster scope',
    );
    const wider = await alice('POST', '/v1/backups', {
      namespace: 'a',
      spec: { includedNamespaces: ['b'], includeClusterResources: true },
    });
    expect(wider.status).toBe(400);
    expect(wider.json().error.problems.map((p: { path: string }) => p.path)).toEqual([
      'spec.includedNamespaces[0]',
      'spec.includeClusterResources',
    ]);
    expect((await alice('POST', '/v1/restores', { spec: { backupName: 'x' } })).status).toBe(403);
    expect((await alice('GET', '/v1/schedules')).status).toBe(403);
    expect((await alice('GET', '/admin/queues')).status).toBe(403);
    const stranger = await apiCaller(() => api.url, 'not-a-token-anyone-knows')('GET', '/v1/backups');
    expect(stranger.status).toBe(401);
  });

  it("team A's spec hook aimed at kube-system is refused before the backup exists (403 naming pods/exec)", async () => {
    expect(await canI('alice', { verb: 'create', group: '', resource: 'pods', subresource: 'exec', namespace: 'kube-system' })).toBe(false);
    const before = (await admin('GET', '/v1/backups')).json().items.length;
    const res = await alice('POST', '/v1/backups', {
      namespace: 'a',
      name: 'sneaky',
      spec: { hooks: { backup: { pre: [{ name: 'peek', namespace: 'kube-system', command: ['/bin/cat', '/etc/secret'] }] } } },
    });
    expect(res.status).toBe(403);
    expect(res.json().error.message).toBe('User "alice" cannot create resource "pods/exec" in API group "" in the namespace "kube-system"');
    expect((await admin('GET', '/v1/backups')).json().items.length).toBe(before);
    expect(sim.execLog({ namespace: 'kube-system' })).toEqual([]);
  });

  it('a spec hook whose pods only the plan finds is checked as the requester at each exec: never run where it may not exec', async () => {
    const made = await carol('POST', '/v1/backups', {
      name: 'carol-all',
      spec: {
        includedResources: ['pods'],
        hooks: { resources: [{ name: 'everywhere', pre: [{ exec: { command: ['/bin/sync'], onError: 'Continue' } }] }] },
      },
    });
    expect(made.status, made.text).toBe(201);
    const done = await waitForEnd('carol-all');
    expect(done.phase, (await admin('GET', '/v1/backups/carol-all/logs')).text).toBe('PartiallyFailed');
    expect(sim.execLog({ namespace: 'kube-system' })).toEqual([]);
    expect(sim.execLog({ namespace: 'a' })).toEqual([]);
    const blocks = (await carol('GET', '/v1/backups/carol-all/blocks')).json().items as Array<{
      hookRuns: Array<{ pod: string; outcome: string; message?: string }>;
    }>;
    const runs = blocks.flatMap((b) => b.hookRuns);
    expect(runs.map((r) => r.pod).sort()).toEqual(['a/app-0', 'b/app-0', 'kube-system/etcd-0']);
    const etcd = runs.find((r) => r.pod === 'kube-system/etcd-0');
    expect(etcd).toMatchObject({ outcome: 'invalid' });
    expect(etcd?.message).toContain('User "carol" cannot create resource "pods/exec" in API group "" in the namespace "kube-system"');
    expect(runs.every((r) => r.outcome === 'invalid')).toBe(true);
  });

  it("team A's restore mapped into b is refused; A may not restore cluster-wide", async () => {
    const aName = runKey('a', 'nightly');
    await waitForEnd(aName);
    const mapped = await alice('POST', '/v1/restores', { namespace: 'a', spec: { backupName: aName, namespaceMapping: { a: 'b' } } });
    expect(mapped.status, mapped.text).toBe(403);
    expect(mapped.json().error.message).toMatch(
      /^User "alice" cannot create resource "[a-z]+" in API group "[a-z.]*" in the namespace "b"/,
    );
    const cluster = await alice('POST', '/v1/restores', { spec: { backupName: aName } });
    expect(cluster.status).toBe(403);
    expect(cluster.json().error.message).toContain('"clusterrestores"');
    const bName = runKey('b', 'nightly');
    const theirs = await alice('POST', '/v1/restores', { namespace: 'a', spec: { backupName: bName } });
    expect(theirs.status).toBe(403);
    expect(theirs.json().error.message).toContain('cannot get resource "backups" in API group "stowage.dev" in the namespace "b"');
  });
  it("a namespaced backup read back from storage (Redis lost, a fresh install) stays its namespace's", async () => {
    const aName = runKey('a', 'nightly');
    await waitForEnd(aName);
    // The archived metadata names the namespace; a backup known only from storage reads as a's.
    const metadata = JSON.parse(await readFile(join(storageDir, 'backups', aName, 'velero-backup.json'), 'utf8'));
    expect(metadata.metadata.labels).toEqual({ 'stowage.dev/namespace': 'a' });
    const storage = new FileSystemStorage(storageDir);
    expect(await backupPhaseReader({ getBackup: async () => undefined }, storage)(aName)).toEqual({ phase: 'Completed', namespace: 'a' });
    // A backup of a's whose state was lost while it ran: part of it in storage, no final marker.
    const cutOff = runKey('a', 'cut-off');
    await storage.putObject(`backups/${cutOff}/staged/part-0`, Buffer.from('{}'));

    // A second api on the same storage with nothing in Redis: backup sync rebuilds the catalogue.
    const loaded = loadConfig({
      REDIS_URL: redis.url,
      KUBECONFIG: ids.api,
      STOWAGE_STORAGE: storageDir,
      STOWAGE_API_TOKENS: STATIC_TOKEN,
      STOWAGE_KUBE_AUTH: 'enabled',
      STOWAGE_QUEUE_PREFIX: uniquePrefix(),
      LOG_LEVEL: 'warn',
    });
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const fresh = await startApiService({ config: loaded.config, logger: pino({ level: 'warn' }), port: 0, host: '127.0.0.1' });
    try {
      fresh.markReady();
      const aliceThere = apiCaller(() => fresh.url, sim.addUser('alice'));
      const bobThere = apiCaller(() => fresh.url, sim.addUser('bob'));
      const listed = (await aliceThere('GET', '/v1/backups')).json().items as Array<{ name: string; namespace?: string; phase: string }>;
      expect(listed.map((b) => [b.name, b.namespace, b.phase]).sort()).toEqual(
        [
          [aName, 'a', 'Completed'],
          [cutOff, 'a', 'Failed'],
        ].sort(),
      );
      const bobs = (await bobThere('GET', '/v1/backups')).json().items.map((b: { name: string }) => b.name);
      expect(bobs).not.toContain(aName);
      expect(bobs).not.toContain(cutOff);
      expect((await bobThere('GET', `/v1/backups/${aName}`)).status).toBe(403);
      // Team a still restores it into its own namespace, as before the loss.
      const restore = await aliceThere('POST', '/v1/restores', { namespace: 'a', name: 'after-loss', spec: { backupName: aName } });
      expect(restore.status, restore.text).toBe(201);
      expect(restore.json()).toMatchObject({ namespace: 'a', backupName: aName });
    } finally {
      await fresh.stopHttp();
      await fresh.stopWorkers();
      await fresh.stopQueues();
      await fresh.stopRedis();
    }
  });
});
