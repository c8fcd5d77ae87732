import type { BackupSpec } from '@stowage/core';
import { createKubeClients, type KubeClients } from '@stowage/kube';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClusterPlanInput, type PlannedBlock, planCluster } from '../src/plan/cluster-plan.js';
import { backupSpec, configMap, namespace, node, pod } from './support/fixtures.js';

/*
 * A backup of a few named namespaces is planned from their own lists (one per namespace and type)
 * and reads only the PVs its PVCs are bound to, instead of every type across the cluster. The plan
 * must be the same either way; what changes is what the API server is asked for.
 */

const PAGE = 10;
/** Namespaces besides the backed-up ones, each with pods, PVCs and PVs: many pages across the cluster. */
const OTHERS = 8;
const PER_OTHER = 12;

function boundClaim(name: string, ns: string, volume: string, storageClassName = 'standard'): unknown {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, namespace: ns },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '1Gi' } },
      storageClassName,
      volumeName: volume,
    },
    status: { phase: 'Bound' },
  };
}

function volume(name: string, ns: string, claim: string): unknown {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name },
    spec: {
      capacity: { storage: '1Gi' },
      accessModes: ['ReadWriteOnce'],
      storageClassName: 'standard',
      claimRef: { kind: 'PersistentVolumeClaim', namespace: ns, name: claim },
      hostPath: { path: `/data/${name}` },
    },
    status: { phase: 'Bound' },
  };
}

/** A pod with its own bound PVC and PV. */
function podWithVolume(name: string, ns: string): unknown[] {
  const claim = `${name}-data`;
  const pv = `pv-${ns}-${name}`;
  return [
    pod({ name, namespace: ns, volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }] }),
    boundClaim(claim, ns, pv),
    volume(pv, ns, claim),
  ];
}

const objects: unknown[] = [
  node('node-a'),
  namespace('shop'),
  namespace('web'),
  ...podWithVolume('db-0', 'shop'),
  ...podWithVolume('db-1', 'shop'),
  // Two pods sharing one claim: one block.
  pod({ name: 'app-0', namespace: 'shop', volumes: [{ name: 'shared', persistentVolumeClaim: { claimName: 'shared' } }] }),
  pod({ name: 'app-1', namespace: 'shop', volumes: [{ name: 'shared', persistentVolumeClaim: { claimName: 'shared' } }] }),
  boundClaim('shared', 'shop', 'pv-shared'),
  volume('pv-shared', 'shop', 'shared'),
  // Bound to a PV that does not exist: a warning, the same whichever way it is read.
  // No class: the simulator's provisioner would give it a volume.
  boundClaim('ghost', 'shop', 'pv-gone', ''),
  configMap('settings', 'shop'),
  ...podWithVolume('front-0', 'web'),
  configMap('settings', 'web'),
];
for (let n = 0; n < OTHERS; n++) {
  objects.push(namespace(`other-${n}`), configMap('settings', `other-${n}`));
  for (let i = 0; i < PER_OTHER; i++) objects.push(...podWithVolume(`p-${i}`, `other-${n}`));
}
const PODS = 5 + OTHERS * PER_OTHER;

let sim: Simulator;
let kube: KubeClients;
/** PVs in the cluster. */
let PVS = 0;

beforeAll(async () => {
  sim = await startSimulator({ fixture: { objects }, port: 0, materializeVolumes: 'none' });
  kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
  PVS = (await kube.requestJson<{ items: unknown[] }>({ path: '/api/v1/persistentvolumes', description: 'count PVs' })).items.length;
  expect(PVS).toBeGreaterThanOrEqual(4 + OTHERS * PER_OTHER);
});
afterAll(async () => {
  await sim?.close();
});

interface Planned {
  blocks: PlannedBlock[];
  problems: string[];
  /** Requests of the plan: verb → resource → count. */
  requests: Record<string, Record<string, number>>;
}

async function plan(spec: Record<string, unknown>, namespaceListsMax: number): Promise<Planned> {
  const input: ClusterPlanInput = {
    kube,
    backupName: `b-${namespaceListsMax}`,
    spec: backupSpec(spec) as unknown as BackupSpec,
    policies: [],
    nodesWithAgent: new Set(['node-a']),
    listPageSize: PAGE,
    namespaceListsMax,
  };
  const out: Planned = { blocks: [], problems: [], requests: {} };
  sim.resetRequests();
  await planCluster(input, {
    blocks: async (planned) => {
      out.blocks.push(...planned);
    },
    problem: async (problem) => {
      out.problems.push(problem.msg);
    },
    note: async () => {},
  });
  for (const [resource, verbs] of Object.entries(sim.requests().byResource)) {
    for (const [verb, n] of Object.entries(verbs)) {
      out.requests[verb] ??= {};
      (out.requests[verb] as Record<string, number>)[resource] = n;
    }
  }
  return out;
}

/** Blocks without the backup's name (the two plans have different names), in a stable order. */
function comparable(blocks: PlannedBlock[]): unknown[] {
  return blocks
    .map(({ plan: blockPlan, manifests }) => ({
      items: blockPlan.items.map((item) => item.key),
      pods: blockPlan.pods.map((p) => ({ ...p, volumes: p.volumes.map((v) => ({ ...v, pvbName: undefined })) })),
      manifests,
    }))
    .sort((a, b) => JSON.stringify(a.items).localeCompare(JSON.stringify(b.items)));
}

describe('plan of a few named namespaces', () => {
  it('reads their lists and the PVs of their claims, and plans what the whole-cluster lists plan', async () => {
    const spec = { includedNamespaces: ['shop'] };
    const cluster = await plan(spec, 0);
    const scoped = await plan(spec, 10);

    // The same blocks, items, manifests and warnings (the PVC bound to a missing PV among them).
    const podsOf = (p: Planned) => p.blocks.map((b) => b.plan.pods.map((pod) => pod.name).sort()).filter((pods) => pods.length > 0);
    expect(podsOf(scoped).sort()).toEqual([['app-0', 'app-1'], ['db-0'], ['db-1']]);
    expect(comparable(scoped.blocks)).toEqual(comparable(cluster.blocks));
    expect(scoped.problems).toEqual(cluster.problems);
    expect(scoped.problems.some((p) => p.includes('pv-gone'))).toBe(true);
    const items = scoped.blocks.flatMap((b) => b.plan.items.map((i) => i.key));
    expect(items).toEqual(expect.arrayContaining(['persistentvolumes/-cluster-/pv-shop-db-0', 'persistentvolumes/-cluster-/pv-shared']));
    expect(items.filter((k) => k.includes('other-') || k.includes('web'))).toEqual([]);

    // Across the cluster: every page of pods, PVCs and PVs.
    expect(cluster.requests.list?.pods).toBe(Math.ceil(PODS / PAGE));
    expect(cluster.requests.list?.persistentvolumes).toBe(Math.ceil(PVS / PAGE));
    expect(cluster.requests.get?.persistentvolumes).toBeUndefined();
    // One namespace: one page of its pods and of its PVCs; the first page of PVs, then a GET for
    // each bound PV not on it (4 GETs against 91 PVs left to list).
    expect(scoped.requests.list?.pods).toBe(1);
    expect(scoped.requests.list?.persistentvolumeclaims).toBe(1);
    expect(scoped.requests.list?.configmaps).toBe(1);
    expect(scoped.requests.list?.persistentvolumes).toBe(1);
    expect(scoped.requests.get?.persistentvolumes).toBe(4); // pv-shop-db-0, pv-shop-db-1, pv-shared, pv-gone (404)
    // Its Namespace object by name; the whole-cluster plan lists them all.
    expect(items).toContain('namespaces/-cluster-/shop');
    expect(scoped.requests.list?.namespaces).toBeUndefined();
    expect(scoped.requests.get?.namespaces).toBe(1);
    expect(cluster.requests.list?.namespaces).toBeGreaterThan(1);
  });

  it('lists the rest of the PVs when there are few left for each GET it would take', async () => {
    const spec = { includedNamespaces: ['shop', 'other-0', 'other-1'] };
    const cluster = await plan(spec, 0);
    const scoped = await plan(spec, 10);
    expect(comparable(scoped.blocks)).toEqual(comparable(cluster.blocks));
    expect(scoped.problems).toEqual(cluster.problems);
    expect(scoped.requests.list?.pods).toBe(1 + 2 * Math.ceil(PER_OTHER / PAGE));
    // 28 bound PVs wanted out of ~100: every page of PVs, no GET.
    expect(scoped.requests.list?.persistentvolumes).toBe(Math.ceil(PVS / PAGE));
    expect(scoped.requests.get?.persistentvolumes).toBeUndefined();
  });

  it('lists across the cluster for globs, more namespaces than the limit, and cluster-scoped items', async () => {
    const wholeCluster = Math.ceil(PODS / PAGE);
    expect((await plan({ includedNamespaces: ['sh*'] }, 10)).requests.list?.pods).toBe(wholeCluster);
    expect((await plan({ includedNamespaces: ['shop', 'web'] }, 1)).requests.list?.pods).toBe(wholeCluster);
    // includeClusterResources: every PV is an item, so all are listed (the pods still by namespace).
    const withCluster = await plan({ includedNamespaces: ['shop'], includeClusterResources: true }, 10);
    expect(withCluster.requests.list?.pods).toBe(1);
    expect(withCluster.requests.list?.persistentvolumes).toBe(Math.ceil(PVS / PAGE));
    expect(withCluster.requests.get?.persistentvolumes).toBeUndefined();
    const pvItems = withCluster.blocks.flatMap((b) => b.plan.items).filter((i) => i.groupResource === 'persistentvolumes');
    expect(pvItems.length).toBe(PVS);
  });
});
