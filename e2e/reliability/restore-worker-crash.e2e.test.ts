/*
 * A worker SIGKILLed while a restore creates its items: the restore still ends Completed with
 * every item restored exactly once (each item's one result is `created`, recognised as this
 * restore's own object when a re-delivered batch meets it again), no PVR is created twice, and
 * the post-restore hook runs after its pod's PVRs completed.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { pvrLabels } from '../../packages/kube/src/index.js';
import { RestoreState, statePrefixFor } from '../../packages/pipeline/src/index.js';
import { createLogger } from '../../packages/platform/src/index.js';
import type { NodeAgent } from '../../services/node-agent/src/index.js';
import { configMap, namespace, node, pod } from './support/fixtures.js';
import { expectArchivedCounters, waitForRestoreEnd } from './support/restore-end.js';
import { type ServiceProcess, type Stack, startAgents, startStack, waitFor, waitForBackupEnd } from './support/stack.js';

const NODES = ['node-a', 'node-b'];
const BULK = 3_000;
const fixture = {
  objects: [
    namespace('shop'),
    namespace('bulk'),
    namespace('stowage'),
    ...NODES.map(node),
    pod({ name: 'db-0', node: 'node-a', volumes: [{ name: 'data', mib: 2 }] }),
    ...Array.from({ length: BULK }, (_, i) => configMap(`bulk-${i}`, 'bulk', 512)),
  ],
};

let stack: Stack;
let api: ServiceProcess;
const agents: NodeAgent[] = [];

beforeAll(async () => {
  stack = await startStack({ fixture });
  stack.sim.setNodeAgents(NODES);
  agents.push(
    ...(await startAgents(stack, NODES, { loadConcurrency: { globalConfig: 2 }, logger: createLogger({ level: 'warn', name: 'agents' }) })),
  );
  api = await stack.spawn('api', 'api-1');
}, 180_000);

afterAll(async () => {
  await Promise.allSettled(agents.map((a) => a.stop()));
  await stack?.close();
});

const post = async (path: string, body: unknown) =>
  fetch(`http://127.0.0.1:${api.port}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

it('a worker SIGKILLed mid-restore: Completed, every item once, no PVR twice, the hook after its PVRs', async () => {
  let worker = (await stack.spawnWorkers('worker-1')).restore;
  expect(
    (await post('/v1/backups', { name: 'bk', spec: { includedNamespaces: ['shop', 'bulk'], defaultVolumesToFsBackup: true } })).status,
  ).toBe(201);
  expect((await waitForBackupEnd(stack.state, 'bk', 120_000)).phase).toBe('Completed');
  for (const ns of ['shop', 'bulk']) await stack.kube.core.deleteNamespace({ name: ns });
  for (const ns of ['shop', 'bulk']) {
    await waitFor(
      `${ns} gone`,
      async () => ((await stack.kube.core.readNamespace({ name: ns }).catch(() => undefined)) ? undefined : true),
      30_000,
      100,
    );
  }

  const restores = new RestoreState({ redis: stack.redis, prefix: statePrefixFor(stack.queuePrefix) });
  const spec = {
    backupName: 'bk',
    includedNamespaces: ['shop', 'bulk'],
    hooks: { resources: [{ name: 'after', includedNamespaces: ['shop'], postHooks: [{ exec: { command: ['/bin/true'] } }] }] },
  };
  expect((await post('/v1/restores', { name: 'rs', spec })).status).toBe(201);
  // Kill the worker while batches are being created.
  const restoredBefore = await waitFor(
    'items being restored',
    async () => {
      const n = (await restores.counters('rs')).itemsRestored ?? 0;
      return n >= 200 ? n : undefined;
    },
    60_000,
    20,
  );
  await worker.killHard();
  expect(restoredBefore).toBeLessThan(BULK);
  worker = await stack.spawn('restore-worker', 'worker-2');

  // Read from storage: once archived, Redis keeps only the restore's record and counters.
  const ended = await waitForRestoreEnd(stack, restores, 'rs');
  const counters = await restores.counters('rs');
  expectArchivedCounters(ended.counters, counters);
  expect(ended.phase, JSON.stringify({ counters, logs: ended.logs.filter((l) => l.level !== 'info') })).toBe('Completed');
  expect(counters.itemsRestored).toBe(counters.totalItems);
  const results = ended.items;
  expect(Object.keys(results).length).toBe(counters.totalItems);
  expect(Object.values(results).filter((r) => r.outcome !== 'created')).toEqual([]);
  const bulk = await stack.kube.core.listNamespacedConfigMap({ namespace: 'bulk' });
  expect(bulk.items.filter((c) => c.metadata?.name?.startsWith('bulk-')).length).toBe(BULK);

  const pvrs = (
    await stack.kube.requestJson<{
      items: Array<{
        metadata: { labels?: Record<string, string> };
        spec: { pod: { uid: string }; volume: string };
        status?: { phase?: string; completionTimestamp?: string };
      }>;
    }>({
      path: '/apis/stowage.dev/v1alpha1/namespaces/stowage/podvolumerestores',
    })
  ).items.filter((p) => p.metadata.labels?.[pvrLabels.restoreName] === 'rs');
  expect(pvrs.length).toBe(1);
  expect(pvrs[0]?.status?.phase).toBe('Completed');
  const runs = ended.hookRuns;
  expect(runs.map((r) => r.outcome)).toContain('exited');
  for (const run of runs.filter((r) => r.outcome === 'exited')) {
    expect(run.startedAt).toBeGreaterThanOrEqual(Date.parse(String(pvrs[0]?.status?.completionTimestamp)));
  }
}, 300_000);
