/*
 * A node agent SIGKILLed while it restores a PodVolumeRestore, inside a full restore through real
 * processes (api, worker and node agent as OS processes): nothing moves the PVR and no hook runs
 * while no agent runs; the agent started again resumes it, and the restore ends Completed with every
 * item created once, one PVR per restored volume, the post-restore hook after its pod's PVRs
 * completed (the simulator's exec log against the PVR's completionTimestamp), init hooks as init
 * containers after stowage-restore-wait and before the pod's own, and every volume's files equal to the backed-up ones byte for byte (checksum, mode, mtime).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { pvrLabels } from '../../packages/kube/src/index.js';
import { RestoreState, statePrefixFor } from '../../packages/pipeline/src/index.js';
import { type DescribedEntry, describeTree } from '../../packages/testing/src/index.js';
import { configMap, namespace, node, pod } from './support/fixtures.js';
import { expectArchivedCounters, waitForRestoreEnd } from './support/restore-end.js';
import { type ServiceProcess, type Stack, startStack, waitFor, waitForBackupEnd } from './support/stack.js';

const HOOK = ['/bin/sh', '-c', 'echo restored'];
/** The pod with an init container of its own (restore-wait and init hooks go before it). */
function withInitContainer<T extends { spec: Record<string, unknown> }>(p: T, name: string): T {
  return { ...p, spec: { ...p.spec, initContainers: [{ name, image: 'busybox', command: ['true'] }] } };
}
const fixture = {
  objects: [
    namespace('shop'),
    namespace('stowage'),
    node('node-a'),
    withInitContainer(pod({ name: 'db-0', node: 'node-a', volumes: [{ name: 'data', mib: 6 }] }), 'chown'),
    pod({ name: 'web-0', node: 'node-a', volumes: [{ name: 'cache', mib: 1 }] }),
    ...Array.from({ length: 20 }, (_, i) => configMap(`settings-${i}`, 'shop')),
  ],
};

type Tree = Record<string, DescribedEntry>;
const withoutMarkers = (tree: Tree): Tree =>
  Object.fromEntries(Object.entries(tree).filter(([p]) => p !== '.stowage' && !p.startsWith('.stowage/')));

interface Pvr {
  metadata: { name: string; labels?: Record<string, string> };
  spec: { pod: { namespace: string; name: string; uid: string }; volume: string };
  status?: { phase?: string; completionTimestamp?: string; progress?: { bytesDone?: number; totalBytes?: number } };
}

let stack: Stack;
let api: ServiceProcess;
let agent: ServiceProcess;

beforeAll(async () => {
  stack = await startStack({ fixture });
  stack.sim.setNodeAgents(['node-a']);
  [api, agent] = await Promise.all([
    stack.spawn('api', 'api'),
    stack.spawn('node-agent', 'agent-1', stack.agentEnv('node-a')),
    stack.spawnWorkers('worker'),
  ]);
  await waitFor('node-a heartbeat', async () => ((await stack.agents.nodesWithAgent()).has('node-a') ? true : undefined), 20_000);
}, 180_000);

afterAll(async () => {
  await stack?.close();
});

const post = async (path: string, body: unknown) =>
  fetch(`http://127.0.0.1:${api.port}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

const pvrsOf = async (restore: string): Promise<Pvr[]> =>
  (
    await stack.kube.requestJson<{ items: Pvr[] }>({ path: '/apis/stowage.dev/v1alpha1/namespaces/stowage/podvolumerestores' })
  ).items.filter((p) => p.metadata.labels?.[pvrLabels.restoreName] === restore);

it('a node agent SIGKILLed mid-PVR: Completed, every item once, one PVR per volume, the hook after its PVRs, the bytes equal', async () => {
  const originals = new Map<string, Tree>();
  for (const podName of ['db-0', 'web-0']) {
    for (const v of stack.sim.podVolumes('shop', podName)) originals.set(`shop/${podName}/${v.volume}`, await describeTree(v.path));
  }
  expect(originals.size).toBe(2);
  expect((await post('/v1/backups', { name: 'bk', spec: { includedNamespaces: ['shop'], defaultVolumesToFsBackup: true } })).status).toBe(
    201,
  );
  expect((await waitForBackupEnd(stack.state, 'bk', 120_000)).phase).toBe('Completed');

  await stack.kube.core.deleteNamespace({ name: 'shop' });
  await waitFor(
    'shop gone',
    async () => ((await stack.kube.core.readNamespace({ name: 'shop' }).catch(() => undefined)) ? undefined : true),
    30_000,
  );
  // ~1 MiB/s from here: the 6 MiB volume takes about six seconds, long enough to be cut off mid-copy.
  await agent.killHard();
  agent = await stack.spawn('node-agent', 'agent-2', stack.agentEnv('node-a', { STOWAGE_BANDWIDTH_LIMIT: '1MiB' }));

  const since = Date.now();
  const spec = {
    backupName: 'bk',
    includedNamespaces: ['shop'],
    hooks: {
      resources: [
        { name: 'after', includedNamespaces: ['shop'], postHooks: [{ exec: { command: HOOK, onError: 'Fail' } }] },
        { name: 'prep', includedNamespaces: ['shop'], postHooks: [{ init: { initContainers: [{ name: 'prep', image: 'busybox' }] } }] },
      ],
    },
  };
  const created = await post('/v1/restores', { name: 'rs', spec });
  expect(created.status, await created.clone().text()).toBe(201);
  const copying = await waitFor(
    'db-0 PVR copying',
    async () => {
      const pvr = (await pvrsOf('rs')).find((p) => p.spec.pod.name === 'db-0');
      return pvr?.status?.phase === 'InProgress' && (pvr.status.progress?.bytesDone ?? 0) > 0 ? pvr : undefined;
    },
    90_000,
    50,
  );
  await agent.killHard();
  // Nothing moves it while no agent runs: the PVR stays InProgress and db-0's hook does not run.
  await new Promise((r) => setTimeout(r, 1_500));
  const stuck = (await pvrsOf('rs')).find((p) => p.metadata.name === copying.metadata.name);
  expect(stuck?.status?.phase).toBe('InProgress');
  expect(stack.sim.execLog({ namespace: 'shop', pod: 'db-0' }).filter((e) => Date.parse(e.startedAt) >= since)).toEqual([]);

  agent = await stack.spawn('node-agent', 'agent-3', stack.agentEnv('node-a', { STOWAGE_BANDWIDTH_LIMIT: '8MiB' }));
  const restores = new RestoreState({ redis: stack.redis, prefix: statePrefixFor(stack.queuePrefix) });
  // Read from storage: once archived, Redis keeps only the restore's record and counters.
  const ended = await waitForRestoreEnd(stack, restores, 'rs');
  const counters = await restores.counters('rs');
  expectArchivedCounters(ended.counters, counters);
  expect(ended.phase, JSON.stringify({ counters, logs: ended.logs.filter((l) => l.level !== 'info') })).toBe('Completed');

  // Every item created once.
  expect(counters.itemsRestored).toBe(counters.totalItems);
  const results = ended.items;
  expect(Object.keys(results).length).toBe(counters.totalItems);
  expect(Object.entries(results).filter(([, r]) => r.outcome !== 'created')).toEqual([]);
  const pods = await stack.kube.core.listNamespacedPod({ namespace: 'shop' });
  expect(pods.items.map((p) => p.metadata?.name).sort()).toEqual(['db-0', 'web-0']);

  // Init hooks became init containers after stowage-restore-wait and before the pod's own, and
  // the kubelet ran them in that order, each after the one before had finished.
  const initOrder = Object.fromEntries(pods.items.map((p) => [p.metadata?.name, p.spec?.initContainers?.map((c) => c.name)]));
  expect(initOrder).toEqual({ 'db-0': ['stowage-restore-wait', 'prep', 'chown'], 'web-0': ['stowage-restore-wait', 'prep'] });
  for (const p of pods.items) {
    const states = (p.status?.initContainerStatuses ?? []).map((s) => s.state?.terminated);
    expect(
      states.map((t) => t?.exitCode),
      p.metadata?.name,
    ).toEqual(states.map(() => 0));
    for (let i = 1; i < states.length; i++) {
      expect(new Date(String(states[i]?.startedAt)).getTime()).toBeGreaterThanOrEqual(
        new Date(String(states[i - 1]?.finishedAt)).getTime(),
      );
    }
  }

  // One PVR per restored volume, the cut one among them, all Completed.
  const pvrs = await pvrsOf('rs');
  expect(pvrs.map((p) => `${p.spec.pod.name}/${p.spec.volume}`).sort()).toEqual(['db-0/data', 'web-0/cache']);
  expect(new Set(pvrs.map((p) => `${p.spec.pod.uid}/${p.spec.volume}`)).size).toBe(2);
  expect(pvrs.map((p) => p.metadata.name)).toContain(copying.metadata.name);
  expect(pvrs.map((p) => p.status?.phase)).toEqual(['Completed', 'Completed']);

  // The hook ran once in each pod, after that pod's PVR completed (the simulator's exec log).
  for (const pvr of pvrs) {
    const execs = stack.sim
      .execLog({ namespace: 'shop', pod: pvr.spec.pod.name })
      .filter((e) => e.command.join(' ') === HOOK.join(' ') && Date.parse(e.startedAt) >= since);
    expect(execs, pvr.spec.pod.name).toHaveLength(1);
    expect(execs[0]?.exitCode).toBe(0);
    expect(Date.parse(String(execs[0]?.startedAt)), `${pvr.spec.pod.name}: hook after its PVR`).toBeGreaterThanOrEqual(
      Date.parse(String(pvr.status?.completionTimestamp)),
    );
  }
  const runs = ended.hookRuns;
  expect(runs.map((r) => `${r.podName}:${r.outcome}`).sort()).toEqual(['db-0:exited', 'web-0:exited']);

  // The bytes: every restored volume holds exactly the backed-up files.
  for (const [key, original] of originals) {
    const [ns, podName, volume] = key.split('/') as [string, string, string];
    const dir = stack.sim.podVolumes(ns, podName).find((v) => v.volume === volume)?.path;
    expect(dir, `${key} has a volume directory`).toBeDefined();
    expect(withoutMarkers(await describeTree(dir as string)), key).toEqual(original);
  }
}, 360_000);
