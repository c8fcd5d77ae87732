import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createKubeClients,
  discoverResources,
  getPod,
  isKubeError,
  type KubeClients,
  listAll,
  listAllItems,
  listNodes,
  readPods,
} from '../src/index.js';
import { pvbCrdFile, smallCluster } from './sim-fixture.js';

const configMapCount = 1200;

let sim: Simulator;
let kube: KubeClients;

beforeAll(async () => {
  const configMaps = Array.from({ length: configMapCount }, (_, i) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: `cm-${String(i).padStart(4, '0')}`, namespace: 'bulk', labels: { parity: i % 2 === 0 ? 'even' : 'odd' } },
    data: { index: String(i) },
  }));
  sim = await startSimulator({
    fixture: smallCluster([{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'bulk' } }, ...configMaps]),
    extraManifests: [pvbCrdFile],
  });
  kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
});

afterAll(async () => {
  await sim?.close();
});

describe('createKubeClients', () => {
  it('loads the same cluster from YAML text', async () => {
    const fromYaml = createKubeClients({ kubeconfigYaml: sim.kubeconfigYaml });
    expect(fromYaml.server).toBe(sim.url);
    const namespaces = await fromYaml.core.listNamespace();
    expect(namespaces.items.map((ns) => ns.metadata?.name)).toEqual(expect.arrayContaining(['apps', 'bulk', 'stowage']));
  });

  it('says which kubeconfig it could not load', () => {
    const missing = join(tmpdir(), 'no-such-kubeconfig-for-stowage');
    expect(() => createKubeClients({ kubeconfigPath: missing })).toThrow(expect.objectContaining({ code: 'KUBE_CONFIG_INVALID' }));
    const noCluster = join(tmpdir(), `stowage-empty-kubeconfig-${process.pid}`);
    writeFileSync(noCluster, 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n');
    expect(() => createKubeClients({ kubeconfigPath: noCluster })).toThrow(/no current cluster/);
    expect(() => createKubeClients({ kubeconfigPath: noCluster, kubeconfigYaml: 'x' })).toThrow(
      expect.objectContaining({ code: 'KUBE_BAD_ARGUMENT' }),
    );
  });
});

describe('discoverResources', () => {
  it('finds the built-in resources and the PVB CRD, without subresources', async () => {
    const { resources, failures } = await discoverResources(kube);
    expect(failures).toEqual([]);
    const byKey = new Map(resources.map((r) => [`${r.groupVersion} ${r.resource}`, r]));
    expect(byKey.get('v1 pods')).toMatchObject({ group: '', version: 'v1', kind: 'Pod', namespaced: true });
    expect(byKey.get('v1 nodes')).toMatchObject({ kind: 'Node', namespaced: false });
    expect(byKey.get('v1 configmaps')).toMatchObject({ kind: 'ConfigMap', namespaced: true });
    expect(byKey.get('apps/v1 deployments')).toMatchObject({ group: 'apps', kind: 'Deployment', namespaced: true });
    expect(byKey.get('stowage.dev/v1alpha1 podvolumebackups')).toMatchObject({
      group: 'stowage.dev',
      version: 'v1alpha1',
      kind: 'PodVolumeBackup',
      namespaced: true,
    });
    expect(resources.filter((r) => r.resource.includes('/'))).toEqual([]);
    expect(resources.every((r) => r.verbs.includes('list'))).toBe(true);
    // One entry per group and resource: only preferred versions.
    const groupResources = resources.map((r) => `${r.group}/${r.resource}`);
    expect(new Set(groupResources).size).toBe(groupResources.length);
  });
});

describe('listAll', () => {
  it('returns each of 1,200 configmaps exactly once, in pages of the asked size', async () => {
    sim.resetRequests();
    const names: string[] = [];
    let pages = 0;
    for await (const page of listAll(kube, {
      resource: { group: '', version: 'v1', resource: 'configmaps' },
      namespace: 'bulk',
      pageSize: 100,
    })) {
      pages++;
      expect(page.items.length).toBeLessThanOrEqual(100);
      for (const item of page.items) {
        expect(item).toMatchObject({ apiVersion: 'v1', kind: 'ConfigMap' });
        names.push(item.metadata!.name!);
      }
    }
    expect(names).toHaveLength(configMapCount);
    expect(new Set(names).size).toBe(configMapCount);
    expect(pages).toBeGreaterThanOrEqual(12);
    expect(sim.requests().byResource.configmaps?.list).toBe(pages);
  });

  it('passes the label selector on every page and lists cluster-scoped resources', async () => {
    const odd = await listAllItems(kube, {
      resource: { group: '', version: 'v1', resource: 'configmaps' },
      namespace: 'bulk',
      labelSelector: 'parity=odd',
      pageSize: 250,
    });
    expect(odd).toHaveLength(configMapCount / 2);
    expect(odd.every((cm) => cm.metadata?.labels?.parity === 'odd')).toBe(true);
    const nodes = await listAllItems(kube, { resource: { group: '', version: 'v1', resource: 'nodes', namespaced: false } });
    expect(nodes.map((n) => n.metadata?.name).sort()).toEqual(['node-a', 'node-b']);
  });

  it('rejects a namespace for a cluster-scoped resource and a bad page size', async () => {
    await expect(
      listAllItems(kube, { resource: { group: '', version: 'v1', resource: 'nodes', namespaced: false }, namespace: 'x' }),
    ).rejects.toMatchObject({
      code: 'KUBE_BAD_ARGUMENT',
    });
    await expect(listAllItems(kube, { resource: { group: '', version: 'v1', resource: 'pods' }, pageSize: 0 })).rejects.toMatchObject({
      code: 'KUBE_BAD_ARGUMENT',
    });
  });

  it('maps an unknown resource to KUBE_NOT_FOUND', async () => {
    const err = await listAllItems(kube, { resource: { group: 'nope.example', version: 'v1', resource: 'things' } }).catch(
      (e: unknown) => e,
    );
    expect(isKubeError(err, 'KUBE_NOT_FOUND')).toBe(true);
  });

  it('rides out a 429/500/503 storm, waiting as Retry-After says', async () => {
    const sleeps: number[] = [];
    const stormy = createKubeClients({
      kubeconfigYaml: sim.kubeconfigYaml,
      retryPolicy: { maxAttempts: 10, baseDelayMs: 50, maxDelayMs: 400 },
      retryDeps: {
        sleep: (ms) => {
          sleeps.push(ms);
          return new Promise((resolve) => setTimeout(resolve, ms));
        },
      },
    });
    sim.resetRequests();
    sim.setFaults({ errorRate: 1, statuses: [429, 500, 503], retryAfterSeconds: 1, appliesTo: { resources: ['configmaps'] } });
    const calm = setTimeout(() => sim.clearFaults(), 1500);
    try {
      const items = await listAllItems(stormy, {
        resource: { group: '', version: 'v1', resource: 'configmaps' },
        namespace: 'bulk',
        pageSize: 600,
      });
      expect(items).toHaveLength(configMapCount);
    } finally {
      clearTimeout(calm);
      sim.clearFaults();
    }
    const counts = sim.requests();
    expect(counts.faulted['429']).toBeGreaterThanOrEqual(1);
    expect(counts.faulted['500']).toBeGreaterThanOrEqual(1);
    // Every attempt reached the server: ours and its counts agree.
    expect(counts.byResource.configmaps?.list).toBe(stormy.retryStats.attempts);
    expect(stormy.retryStats.retries).toBe(stormy.retryStats.attempts - 2);
    expect(stormy.retryStats.retriesByReason['status-429']).toBeGreaterThanOrEqual(1);
    // The 429 carried Retry-After: 1, which replaced the (at most 400 ms) computed backoff.
    expect(sleeps).toContain(1000);
    expect(sleeps.filter((ms) => ms !== 1000).every((ms) => ms < 400)).toBe(true);
  });

  it('gives up with KUBE_UNAVAILABLE when the storm outlasts the attempts', async () => {
    const impatient = createKubeClients({
      kubeconfigYaml: sim.kubeconfigYaml,
      retryPolicy: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 5 },
      retryDeps: { sleep: async () => undefined },
    });
    sim.resetRequests();
    sim.setFaults({ errorRate: 1, statuses: [503], appliesTo: { resources: ['nodes'] } });
    try {
      await expect(listNodes(impatient)).rejects.toMatchObject({ code: 'KUBE_UNAVAILABLE', status: 503 });
    } finally {
      sim.clearFaults();
    }
    expect(sim.requests().byResource.nodes?.list).toBe(3);
    expect(impatient.retryStats.exhausted).toBe(1);
  });

  it('does not retry a 404', async () => {
    sim.resetRequests();
    const before = kube.retryStats.attempts;
    expect(await getPod(kube, 'apps', 'missing')).toBeUndefined();
    expect(kube.retryStats.attempts - before).toBe(1);
    expect(sim.requests().byResource.pods?.get).toBe(1);
  });
});

describe('pods and nodes', () => {
  it('reads pods by namespace, selector and field, and nodes by label', async () => {
    const pod = await getPod(kube, 'apps', 'db');
    expect(pod?.spec?.nodeName).toBe('node-a');
    expect(pod?.spec?.containers.map((c) => c.name)).toEqual(['main', 'sidecar']);
    expect((await readPods(kube, { namespace: 'apps', labelSelector: 'app=db' })).map((p) => p.metadata?.name)).toEqual(['db']);
    expect(await readPods(kube, { fieldSelector: 'spec.nodeName=node-b' })).toEqual([]);
    expect((await listNodes(kube, { labelSelector: 'pool=big' })).map((n) => n.metadata?.name)).toEqual(['node-a']);
  });
});
