/*
 * At every bound, a request is accepted and its run completes (issue #45: "at it, accepted and
 * completed"; over it, a 400 naming the field and the limit, is spec-limits.int.test.ts and core's
 * spec-limits.test.ts). One backup request holds every bound of a backup spec at its limit at once
 * — the namespace and resource lists, the or-selectors and a selector's terms and values, hook
 * sets, a list of hooks, hooks in all, a hook's argv bytes and the longest hook timeout, the
 * volume policies and their lists, the request's labels and annotations — and runs to Completed
 * through the api (real process code: startApiService) and workers against the simulator and a
 * real redis-server. Its 50 pre hooks, the 64 KiB argv among them, and its backup-level hooks
 * really run in the pod. The scoped resource filters share the `resources` bound but cannot be
 * given beside includedResources (Velero's rule), so they are held to it in core's tests only.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_SPEC_LIMITS } from '@stowage/core';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { NodeAgentRegistry, statePrefixFor } from '@stowage/pipeline';
import { loadConfig } from '@stowage/platform';
import { spawnWorker, uniquePrefix, useTestRedis, type WorkerProcess } from '@stowage/testing';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiService, startApiService } from '../src/api-service.js';
import { apiCaller } from './api-call.js';

const TOKEN = 'limits-token-0123456789abcdef';
const L = DEFAULT_SPEC_LIMITS;

const fill = (prefix: string, n: number, keep: readonly string[] = []) => [
  ...keep,
  ...Array.from({ length: n - keep.length }, (_, i) => `${prefix}-${i}`),
];
const entries = (prefix: string, n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, 'v']));
/** A hook's command of exactly `bytes` bytes (UTF-8, all elements). */
const argvOf = (bytes: number, tag: string) => ['/bin/true', `${tag}-`.padEnd(bytes - '/bin/true'.length, 'a')];

const objects = [
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop', labels: { bench: 'true' } } },
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'stowage' } },
  { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } },
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'shop', labels: { bench: 'true' } }, data: { k: 'v' } },
  {
    apiVersion: 'v1',
    kind: 'Pod',
    // The first hook set's selector has 64 terms: the pod carries them all.
    metadata: {
      name: 'web-0',
      namespace: 'shop',
      uid: 'uid-web-0',
      labels: { ...entries('t', L.labelSelectorTerms - 2), app: 'web', bench: 'true' },
    },
    spec: { nodeName: 'node-a', containers: [{ name: 'main', image: 'busybox' }] },
    status: { phase: 'Running' },
  },
];

/** A backup request with every bound of the spec at its limit (see the header). */
function backupAtEveryLimit(name: string): Record<string, unknown> {
  const hook = (tag: string, i: number) => ({ exec: { command: ['/bin/true', `${tag}-${i}`], onError: 'Fail', timeout: '30s' } });
  const hookSet = (i: number) => ({
    name: `set-${i}`,
    // Sets other than the first name no namespace of the cluster: their hooks count, they do not run.
    includedNamespaces: i === 0 ? fill('hook-ns', L.namespaces, ['shop']) : [`absent-${i}`],
    excludedNamespaces: i === 0 ? fill('hook-other-ns', L.namespaces) : [],
    includedResources: i === 0 ? fill('hook-things', L.resources, ['pods']).map((r) => (r === 'pods' ? r : `${r}.example.com`)) : ['pods'],
    excludedResources: i === 0 ? fill('hook-others', L.resources).map((r) => `${r}.example.com`) : [],
    labelSelector:
      i === 0
        ? {
            matchLabels: { ...entries('t', L.labelSelectorTerms - 2), app: 'web' },
            matchExpressions: [{ key: 'bench', operator: 'In', values: fill('value', L.labelSelectorTerms, ['true']) }],
          }
        : { matchLabels: { app: 'web' } },
    pre:
      i === 0
        ? Array.from({ length: L.hooksPerList }, (_, j) =>
            j === 0 ? { exec: { command: argvOf(L.argvBytes, 'argv-at-limit'), onError: 'Fail', timeout: '30m' } } : hook('pre', j),
          )
        : [],
    post: [] as unknown[],
  });
  const sets = Array.from({ length: L.hookSets }, (_, i) => hookSet(i));
  // Hooks in all at the limit: the first set's 50, backup-level 25 + 25, the rest in the sets that do not run.
  let left = L.hooks - L.hooksPerList - 50;
  for (const set of sets.slice(1)) {
    const n = Math.min(left, L.hooksPerList);
    set.post = Array.from({ length: n }, (_, j) => hook(`${set.name}-post`, j));
    left -= n;
  }
  const levelHooks = (phase: string) =>
    Array.from({ length: 25 }, (_, i) => ({
      name: `${phase}-${i}`,
      namespace: 'shop',
      labelSelector: { matchLabels: { app: 'web' } },
      mode: 'one',
      command: ['/bin/true', `level-${phase}-${i}`],
      onError: 'Fail',
      timeout: '30s',
    }));
  const policy = (i: number) => ({ conditions: { storageClass: [`absent-sc-${i}`] }, action: { type: 'skip' } });
  return {
    name,
    labels: entries('label-', L.metadataEntries),
    annotations: entries('example.com/note-', L.metadataEntries),
    spec: {
      includedNamespaces: fill('absent-ns', L.namespaces, ['shop']),
      excludedNamespaces: fill('other-ns', L.namespaces),
      includedResources: fill('things', L.resources, ['pods', 'configmaps', 'namespaces']).map((r) =>
        r.startsWith('things-') ? `${r}.example.com` : r,
      ),
      excludedResources: fill('others', L.resources).map((r) => `${r}.example.com`),
      orLabelSelectors: [
        { matchLabels: { bench: 'true' } },
        {
          matchLabels: entries('s', L.labelSelectorTerms - 1),
          matchExpressions: [{ key: 'absent', operator: 'In', values: fill('value', L.labelSelectorTerms) }],
        },
        ...Array.from({ length: L.orLabelSelectors - 2 }, (_, i) => ({ matchLabels: { absent: `x-${i}` } })),
      ],
      hooks: { resources: sets, backup: { pre: levelHooks('pre'), post: levelHooks('post') } },
      resourcePolicy: {
        volumePolicies: [
          ...Array.from({ length: L.volumePolicies - 1 }, (_, i) => policy(i)),
          {
            conditions: {
              storageClass: fill('absent-sc', L.policyEntries),
              pvcLabels: entries('pvc-label-', L.policyEntries),
              csi: { driver: 'absent.csi.example.com', volumeAttributes: entries('attr-', L.policyEntries) },
            },
            action: { type: 'skip', parameters: entries('param-', L.policyEntries) },
          },
        ],
      },
    },
  };
}

/** A restore request with every bound of a restore spec at its limit, restoring `shop` into `shop-restored`. */
function restoreAtEveryLimit(name: string, backupName: string): Record<string, unknown> {
  const exec = (i: number) => ({ exec: { command: ['/bin/true', `restore-post-${i}`], onError: 'Fail', execTimeout: '30s' } });
  const sets = Array.from({ length: L.hookSets }, (_, i) => ({
    name: `set-${i}`,
    // Restore hooks select pods by the namespace they are restored into.
    includedNamespaces: i === 0 ? fill('hook-ns', L.namespaces, ['shop-restored']) : [`absent-${i}`],
    excludedNamespaces: i === 0 ? fill('hook-other-ns', L.namespaces) : [],
    includedResources: i === 0 ? fill('hook-things', L.resources, ['pods']).map((r) => (r === 'pods' ? r : `${r}.example.com`)) : ['pods'],
    excludedResources: i === 0 ? fill('hook-others', L.resources).map((r) => `${r}.example.com`) : [],
    labelSelector:
      i === 0
        ? {
            matchLabels: { ...entries('t', L.labelSelectorTerms - 2), app: 'web' },
            matchExpressions: [{ key: 'bench', operator: 'In', values: fill('value', L.labelSelectorTerms, ['true']) }],
          }
        : { matchLabels: { app: 'web' } },
    postHooks: [] as unknown[],
  }));
  // The first set's 50 exec hooks run in the restored pod (the first with a 64 KiB argv and the longest timeout).
  sets[0]!.postHooks = Array.from({ length: L.hooksPerList }, (_, j) =>
    j === 0 ? { exec: { command: argvOf(L.argvBytes, 'restore-argv-at-limit'), onError: 'Fail', execTimeout: '30m' } } : exec(j),
  );
  // An init hook with the most init containers, in a set that matches nothing; hooks in all at the limit.
  sets[1]!.postHooks = [
    {
      init: {
        initContainers: Array.from({ length: L.hooksPerList }, (_, j) => ({ name: `init-${j}`, image: 'busybox', command: ['/bin/true'] })),
      },
    },
  ];
  let left = L.hooks - L.hooksPerList - 1;
  for (const set of sets.slice(2)) {
    const n = Math.min(left, L.hooksPerList);
    set.postHooks = Array.from({ length: n }, (_, j) => exec(j));
    left -= n;
  }
  return {
    name,
    spec: {
      backupName,
      includedNamespaces: fill('absent-ns', L.namespaces, ['shop']),
      excludedNamespaces: fill('other-ns', L.namespaces),
      includedResources: fill('things', L.resources, ['pods', 'configmaps', 'namespaces']).map((r) =>
        r.startsWith('things-') ? `${r}.example.com` : r,
      ),
      excludedResources: fill('others', L.resources).map((r) => `${r}.example.com`),
      orLabelSelectors: [
        { matchLabels: { bench: 'true' } },
        {
          matchLabels: entries('s', L.labelSelectorTerms - 1),
          matchExpressions: [{ key: 'absent', operator: 'In', values: fill('value', L.labelSelectorTerms) }],
        },
        ...Array.from({ length: L.orLabelSelectors - 2 }, (_, i) => ({ matchLabels: { absent: `x-${i}` } })),
      ],
      namespaceMapping: Object.fromEntries(
        fill('absent-ns', L.namespaces, ['shop']).map((ns) => [ns, ns === 'shop' ? 'shop-restored' : `to-${ns}`]),
      ),
      hooks: { resources: sets },
    },
  };
}

const ENDED = ['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled'];

describe('a request at every bound is accepted and its run completes', () => {
  let redis: { url: string; stop: () => Promise<void> };
  let sim: Simulator;
  let api: ApiService;
  let worker: WorkerProcess;
  let storageDir: string;

  beforeAll(async () => {
    redis = await useTestRedis();
    sim = await startSimulator({ fixture: { objects }, port: 0, materializeVolumes: 'none' });
    storageDir = await mkdtemp(join(tmpdir(), 'stowage-limits-completed-'));
    const prefix = uniquePrefix();
    const env = {
      REDIS_URL: redis.url,
      KUBECONFIG: sim.kubeconfigPath,
      STOWAGE_STORAGE: storageDir,
      STOWAGE_API_TOKENS: TOKEN,
      STOWAGE_QUEUE_PREFIX: prefix,
    };
    const loaded = loadConfig({ ...env, LOG_LEVEL: 'warn' });
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    api = await startApiService({ config: loaded.config, logger: pino({ level: 'warn' }), port: 0, host: '127.0.0.1' });
    api.markReady();
    await new NodeAgentRegistry({ redis: api.producer, prefix: statePrefixFor(prefix) }).registerNodeAgent('node-a', 600_000);
    worker = await spawnWorker(env, 120_000);
  }, 180_000);

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

  const call = apiCaller(() => api.url, TOKEN);
  async function ended(path: string): Promise<Record<string, unknown>> {
    for (const until = Date.now() + 180_000; ; ) {
      const run = (await call('GET', path)).json() as Record<string, unknown>;
      if (ENDED.includes(String(run.phase))) return run;
      if (Date.now() > until) throw new Error(`${path} did not end: ${JSON.stringify(run)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const argvBytes = (command: readonly string[] | undefined) => command?.reduce((n, arg) => n + Buffer.byteLength(arg), 0);

  it('a backup at every bound of its spec: 201, then Completed, its hooks run (the 64 KiB argv too)', async () => {
    const body = backupAtEveryLimit('at-limits');
    const created = await call('POST', '/v1/backups', body);
    expect(created.status, created.text.slice(0, 2000)).toBe(201);
    const backup = await ended('/v1/backups/at-limits');
    expect(backup.phase, (await call('GET', '/v1/backups/at-limits/logs')).text.slice(-3000)).toBe('Completed');
    expect(backup).toMatchObject({ errors: 0 });
    const commands = sim.execLog({ namespace: 'shop', pod: 'web-0' }).map((e) => e.command);
    expect(argvBytes(commands.find((c) => c[1]?.startsWith('argv-at-limit-')))).toBe(L.argvBytes);
    expect(commands.filter((c) => /^pre-\d+$/.test(c[1] ?? ''))).toHaveLength(L.hooksPerList - 1);
    expect(commands.filter((c) => /^level-(pre|post)-\d+$/.test(c[1] ?? ''))).toHaveLength(50);
    expect(Object.keys((backup.labels ?? {}) as object)).toHaveLength(L.metadataEntries);
  }, 240_000);

  it('a restore at every bound of its spec: 201, then Completed, its post hooks run in the restored pod', async () => {
    const created = await call('POST', '/v1/restores', restoreAtEveryLimit('restore-at-limits', 'at-limits'));
    expect(created.status, created.text.slice(0, 2000)).toBe(201);
    const restore = await ended('/v1/restores/restore-at-limits');
    expect(restore.phase, (await call('GET', '/v1/restores/restore-at-limits/logs')).text.slice(-3000)).toBe('Completed');
    const commands = sim.execLog({ namespace: 'shop-restored', pod: 'web-0' }).map((e) => e.command);
    expect(argvBytes(commands.find((c) => c[1]?.startsWith('restore-argv-at-limit-')))).toBe(L.argvBytes);
    expect(commands.filter((c) => /^restore-post-\d+$/.test(c[1] ?? ''))).toHaveLength(L.hooksPerList - 1);
  }, 240_000);
});
