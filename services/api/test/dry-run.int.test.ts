/*
 * POST /v1/backups?dryRun=true against the demo cluster, through the real API process (src/main.ts)
 * with its own redis-server, the simulator and filesystem backup storage. Proves from the outside
 * that a dry run writes and executes nothing (simulator request counts and exec log, every Redis
 * key, every storage file), that bad specs get the same 400, and that the plan it shows is the plan
 * a real backup of the same spec stores, read with the same list calls.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DryRunPlan } from '@stowage/core';
import { demoFixturePath, type Simulator, startSimulator } from '@stowage/kube-sim';
import { NodeAgentRegistry, statePrefixFor } from '@stowage/pipeline';
import { type ServiceProcess, uniquePrefix, useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnApi } from './api-process.js';
import { startHooksQueueWorkers } from './hooks-queue-workers.js';

const TOKEN = 'dry-run-token-0123456789abcdef';
const WRITE_VERBS = ['create', 'update', 'patch', 'delete', 'deletecollection'];

/** Both namespaces, every volume by default, a spec hook on the media pods (postgres keeps its annotation hooks). */
const SPEC = {
  includedNamespaces: ['shop', 'media'],
  defaultVolumesToFsBackup: true,
  hooks: {
    resources: [
      {
        name: 'quiesce',
        includedNamespaces: ['media'],
        pre: [{ exec: { command: ['/bin/sync'] } }],
        post: [{ exec: { command: ['/bin/echo', 'resumed'] } }],
      },
    ],
    // Backup-level hooks: one that finds its pod, one that would find none.
    backup: {
      pre: [{ name: 'pause-cache', namespace: 'shop', labelSelector: { matchLabels: { app: 'cache' } }, command: ['/bin/echo', 'paused'] }],
      post: [{ name: 'resume-nothing', namespace: 'shop', labelSelector: { matchLabels: { app: 'no-such-app' } }, command: ['/bin/true'] }],
    },
  },
};

let redis: { url: string; stop: () => Promise<void> };
let sim: Simulator;
let storageDir: string;
let api: ServiceProcess | undefined;
let hookWorkers: { close: () => Promise<void> } | undefined;
let base: string;
let probe: Redis;

const call = (path: string, init: RequestInit = {}) =>
  fetch(`${base}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...(init.headers ?? {}) },
  });

const apiOutput = () => api?.output.join('') ?? '';

async function waitFor<T>(what: string, probeFn: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probeFn();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}; api output:\n${apiOutput().slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Every key in the test's Redis. BullMQ's `stalled-check` key is left out: the API's hosted workers
 * set it with a TTL on their own schedule, whether or not any request arrives.
 */
async function redisKeys(): Promise<string[]> {
  return (await probe.keys('*')).filter((k) => !k.endsWith(':stalled-check')).sort();
}

async function storageFiles(): Promise<string[]> {
  const entries = await readdir(storageDir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
    .sort();
}

/** List calls by resource between two request-count snapshots. */
function listDelta(before: ReturnType<Simulator['requests']>, after: ReturnType<Simulator['requests']>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [resource, verbs] of Object.entries(after.byResource)) {
    const n = (verbs.list ?? 0) - (before.byResource[resource]?.list ?? 0);
    if (n > 0) out[resource] = n;
  }
  return out;
}

function writesDelta(before: ReturnType<Simulator['requests']>, after: ReturnType<Simulator['requests']>): number {
  return WRITE_VERBS.reduce((n, verb) => n + (after.byVerb[verb] ?? 0) - (before.byVerb[verb] ?? 0), 0);
}

beforeAll(async () => {
  redis = await useTestRedis();
  sim = await startSimulator({ fixture: demoFixturePath, port: 0 });
  storageDir = await mkdtemp(join(tmpdir(), 'stowage-dry-run-'));
  const prefix = uniquePrefix();
  probe = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  // What each node agent's heartbeat does: the planner gives PVBs only to pods on nodes with an agent.
  const agents = new NodeAgentRegistry({ redis: probe, prefix: statePrefixFor(prefix) });
  for (const node of ['node-a', 'node-b', 'node-c']) await agents.registerNodeAgent(node, 10 * 60_000);

  // The backup-level hooks of the real backup below run in a backup worker's job, as deployed.
  hookWorkers = startHooksQueueWorkers({ redisUrl: redis.url, prefix, kubeconfigPath: sim.kubeconfigPath, storageDir });

  api = await spawnApi({
    redisUrl: redis.url,
    kubeconfigPath: sim.kubeconfigPath,
    storageDir,
    token: TOKEN,
    queuePrefix: prefix,
  });
  base = `http://127.0.0.1:${api.port}`;
}, 150_000);

afterAll(async () => {
  await api?.stop();
  await hookWorkers?.close();
  await probe?.quit().catch(() => undefined);
  await sim?.close();
  await redis?.stop();
  if (storageDir) await rm(storageDir, { recursive: true, force: true });
}, 60_000);

describe('POST /v1/backups?dryRun=true on the demo cluster', () => {
  let plan: DryRunPlan;
  let dryRunLists: Record<string, number>;

  it('returns the plan and creates, stores and executes nothing', async () => {
    const keysBefore = await redisKeys();
    const filesBefore = await storageFiles();
    const execsBefore = sim.execLog().length;
    const before = sim.requests();

    const res = await call('/v1/backups?dryRun=true', { method: 'POST', body: JSON.stringify({ name: 'plan-only', spec: SPEC }) });
    expect(res.status).toBe(200);
    expect(res.headers.get('location')).toBeNull();
    plan = (await res.json()) as DryRunPlan;
    const after = sim.requests();
    dryRunLists = listDelta(before, after);

    // Nothing was written to the cluster, nothing ran in a pod, no PVB was touched.
    expect(writesDelta(before, after)).toBe(0);
    expect(sim.execLog().length).toBe(execsBefore);
    expect(Object.keys(after.byResource).filter((r) => r.startsWith('podvolumebackups') && !before.byResource[r])).toEqual([]);
    expect(after.byResource['pods/exec']).toEqual(before.byResource['pods/exec']);
    // ...but the cluster was read, with lists.
    expect(dryRunLists.pods).toBeGreaterThan(0);
    expect(dryRunLists.persistentvolumeclaims).toBeGreaterThan(0);
    // No Redis key and no storage object appeared; the backup does not exist.
    expect(await redisKeys()).toEqual(keysBefore);
    expect(await storageFiles()).toEqual(filesBefore);
    expect((await call('/v1/backups/plan-only')).status).toBe(404);

    // The plan: ItemBlocks with their items.
    expect(plan).toMatchObject({ name: 'plan-only', dryRun: true });
    const blockOf = (pod: string) => {
      const block = plan.blocks.find((b) => b.pods.some((p) => `${p.namespace}/${p.name}` === pod));
      if (!block) throw new Error(`no block holds pod ${pod}`);
      return block;
    };
    const postgres = blockOf('shop/postgres-0');
    expect(postgres.items.map((i) => i.key)).toEqual(
      expect.arrayContaining(['pods/shop/postgres-0', 'persistentvolumeclaims/shop/data-postgres-0']),
    );
    // Pods sharing a PVC share a block.
    expect(blockOf('media/uploader').id).toBe(blockOf('media/thumbnailer').id);

    // Hooks per pod and phase with their source: annotation hooks on postgres, the spec hook on media.
    const postgresPod = postgres.pods.find((p) => p.name === 'postgres-0');
    expect(postgresPod?.hooks.pre).toEqual([
      expect.objectContaining({
        source: 'annotation',
        container: 'postgres',
        onError: 'Fail',
        command: ['/bin/sh', '-c', 'psql -c CHECKPOINT && fsfreeze -f /var/lib/postgresql/data'],
      }),
    ]);
    expect(postgresPod?.hooks.post).toEqual([expect.objectContaining({ source: 'annotation', container: 'postgres' })]);
    const uploader = blockOf('media/uploader').pods.find((p) => p.name === 'uploader');
    expect(uploader?.hooks.pre).toEqual([expect.objectContaining({ source: 'spec', hookName: 'quiesce', command: ['/bin/sync'] })]);
    expect(uploader?.hooks.post).toEqual([
      expect.objectContaining({ source: 'spec', hookName: 'quiesce', command: ['/bin/echo', 'resumed'] }),
    ]);
    expect(blockOf('shop/cache').pods[0]?.hooks).toEqual({ pre: [], post: [] });
    // Backup-level hooks with the pods they would run in, and the one that would run nowhere as an error.
    expect(plan.backupHooks.pre).toEqual([
      expect.objectContaining({ name: 'pause-cache', targets: [{ pod: 'cache', container: 'redis' }] }),
    ]);
    expect(plan.backupHooks.post).toEqual([
      expect.objectContaining({
        name: 'resume-nothing',
        targets: [],
        failure: expect.stringContaining('no Running pod in namespace shop'),
      }),
    ]);
    expect(plan.errors).toContain(`backup post hook resume-nothing: ${plan.backupHooks.post[0]?.failure}; it would be recorded as failed`);

    // Every volume's decision with its reason.
    const volume = (pod: string, name: string) => plan.blocks.flatMap((b) => b.volumes).find((v) => v.pod === pod && v.volume === name);
    expect(volume('shop/postgres-0', 'data')).toMatchObject({
      decision: 'fs-backup',
      claimName: 'data-postgres-0',
      estimatedBytes: 10 * 2 ** 30,
      estimateBasis: 'pvc-request',
    });
    expect(volume('shop/reporter', 'scratch')).toMatchObject({ decision: 'skip' });
    expect(volume('shop/reporter', 'scratch')?.reason).toMatch(/exclude/i);
    expect(volume('shop/cache', 'redis-data')).toMatchObject({ decision: 'fs-backup', estimatedBytes: null, estimateBasis: 'unknown' });
    const shared = [volume('media/uploader', 'library'), volume('media/thumbnailer', 'library')];
    expect(shared.map((v) => v?.decision).sort()).toEqual(['fs-backup', 'skip']); // one PVB per PVC

    // Estimated bytes per node, labelled an estimate with its basis.
    expect(plan.estimate.isEstimate).toBe(true);
    expect(plan.estimate.basis).toContain('requested storage');
    const nodeA = plan.estimate.perNode.find((n) => n.node === 'node-a');
    expect(nodeA?.estimatedBytes).toBeGreaterThanOrEqual(10 * 2 ** 30);
    expect(plan.estimate.totalBytes).toBe(plan.estimate.perNode.reduce((n, e) => n + e.estimatedBytes, 0));
    expect(plan.summary.fsBackupVolumes).toBe(plan.blocks.flatMap((b) => b.volumes).filter((v) => v.decision === 'fs-backup').length);
  }, 60_000);

  it('answers a bad spec with the same 400 naming the field, with or without dryRun, and writes nothing', async () => {
    const keysBefore = await redisKeys();
    const body = JSON.stringify({ name: 'bad-one', spec: { includedNamespaces: 'shop', fsBackupTimeout: 'soon' } });
    const dry = await call('/v1/backups?dryRun=true', { method: 'POST', body });
    const real = await call('/v1/backups', { method: 'POST', body });
    expect(dry.status).toBe(400);
    expect(real.status).toBe(400);
    const dryError = ((await dry.json()) as { error: { code: string; message: string; problems: Array<{ path: string }> } }).error;
    const realError = ((await real.json()) as { error: { code: string; message: string; problems: Array<{ path: string }> } }).error;
    expect(dryError.code).toBe('API_VALIDATION');
    expect(dryError.problems).toEqual(realError.problems);
    expect(dryError.message).toBe(realError.message);
    expect(dryError.problems.map((p) => p.path)).toContain('spec.includedNamespaces');
    expect(await redisKeys()).toEqual(keysBefore);

    const badFlag = await call('/v1/backups?dryRun=maybe', { method: 'POST', body: JSON.stringify({ spec: SPEC }) });
    expect(badFlag.status).toBe(400);
    expect(JSON.stringify(await badFlag.json())).toContain('dryRun');
  }, 30_000);

  it('a resource policy decides volumes as in a real run; a missing policy ConfigMap is the FailedValidation a run would end in', async () => {
    const skipEmptyDirs = {
      includedNamespaces: ['shop'],
      defaultVolumesToFsBackup: true,
      resourcePolicy: { volumePolicies: [{ conditions: { volumeTypes: ['emptyDir'] }, action: { type: 'skip' } }] },
    };
    const res = await call('/v1/backups?dryRun=true', {
      method: 'POST',
      body: JSON.stringify({ name: 'policy-plan', spec: skipEmptyDirs }),
    });
    expect(res.status).toBe(200);
    const withPolicy = (await res.json()) as DryRunPlan;
    const volumes = withPolicy.blocks.flatMap((b) => b.volumes);
    expect(volumes.find((v) => v.pod === 'shop/cache' && v.volume === 'redis-data')).toMatchObject({ decision: 'skip' });
    expect(volumes.find((v) => v.pod === 'shop/postgres-0' && v.volume === 'data')).toMatchObject({ decision: 'fs-backup' });

    const keysBefore = await redisKeys();
    const missing = await call('/v1/backups?dryRun=true', {
      method: 'POST',
      body: JSON.stringify({ name: 'no-policy', spec: { resourcePolicy: { kind: 'ConfigMap', name: 'no-such-policy' } } }),
    });
    expect(missing.status).toBe(200);
    const failed = (await missing.json()) as DryRunPlan & { failedValidation?: string };
    expect(failed.failedValidation).toContain('resource policy ConfigMap stowage/no-such-policy cannot be read');
    expect(failed.blocks).toEqual([]);
    expect(await redisKeys()).toEqual(keysBefore);
  }, 30_000);

  it('shows the plan a real backup of the same spec stores, read with the same list calls', async () => {
    expect(plan).toBeDefined();
    const before = sim.requests();
    const res = await call('/v1/backups', { method: 'POST', body: JSON.stringify({ name: 'for-real', spec: SPEC }) });
    expect(res.status).toBe(201);
    // No item-block workers run here: the blocks stay planned, which is what is compared.
    const blocks = await waitFor(
      'the real plan to complete',
      async () => {
        const page = (await (await call('/v1/backups/for-real/blocks?limit=1000')).json()) as {
          total: number;
          items: Array<{
            id: string;
            pods: string[];
            itemCount: number;
            volumes?: Array<{ pod: string; volume: string; outcome: string; reason?: string }>;
          }>;
        };
        return page.total === plan.blocks.length ? page.items : undefined;
      },
      30_000,
    );
    // The plan reads the Namespace objects last (its two named namespaces by name, as the dry run did).
    const namespaceGets = (counts: ReturnType<Simulator['requests']>) => counts.byResource.namespaces?.get ?? 0;
    await waitFor(
      'the plan step to read its namespaces',
      async () => (namespaceGets(sim.requests()) - namespaceGets(before) >= SPEC.includedNamespaces.length ? true : undefined),
      10_000,
    );
    expect(listDelta(before, sim.requests())).toEqual(dryRunLists);

    const normal = (v: { pod: string; volume: string; reason?: string }, decision: string) => ({
      pod: v.pod,
      volume: v.volume,
      decision,
      reason: v.reason ?? '',
    });
    const decisionOf: Record<string, string> = { planned: 'fs-backup', skipped: 'skip', error: 'error' };
    // The same blocks (by their pods and item counts) and the same decision for every volume.
    expect(blocks.map((b) => ({ pods: [...b.pods].sort(), items: b.itemCount })).sort(byJson)).toEqual(
      plan.blocks.map((b) => ({ pods: b.pods.map((p) => `${p.namespace}/${p.name}`).sort(), items: b.items.length })).sort(byJson),
    );
    expect(blocks.flatMap((b) => (b.volumes ?? []).map((v) => normal(v, decisionOf[v.outcome] ?? v.outcome))).sort(byJson)).toEqual(
      plan.blocks.flatMap((b) => b.volumes.map((v) => normal(v, v.decision))).sort(byJson),
    );

    // A dry run under a name that is taken says a submit would be refused (and still changes nothing).
    const again = await call('/v1/backups?dryRun=true', { method: 'POST', body: JSON.stringify({ name: 'for-real', spec: SPEC }) });
    expect(again.status).toBe(200);
    expect(((await again.json()) as DryRunPlan).warnings[0]).toBe(
      'a backup named "for-real" already exists: submitting this request would be answered 409',
    );
  }, 60_000);
});

function byJson(a: unknown, b: unknown): number {
  return JSON.stringify(a).localeCompare(JSON.stringify(b));
}
