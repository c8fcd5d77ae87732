import { type RestoreObject, type RestoreSpec, type RestoreTransformContext, restoreDiff, validateRestoreRequest } from '@stowage/core';
import { type RunningWorkers, startWorkers, submitBackup, submitRestore } from '@stowage/pipeline';
import { readBackupTarball } from '@stowage/storage';
import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, namespace, node } from './support/fixtures.js';
import { BACKUP_AND_RESTORE_QUEUES, type Harness, startHarness, waitFor, waitForBackupEnd, waitForRestoreEnd } from './support/harness.js';

/*
 * What a restore does to namespaces (simulator over HTTP, the real job graph on redis-server): a
 * subset of the backed-up namespaces, namespace mapping into the PV's claimRef and RoleBinding
 * subjects, and Service addresses (clusterIP always reassigned, nodePorts kept only with
 * preserveNodePorts — refused by the cluster when another Service holds the port).
 */

const ALL_QUEUES = BACKUP_AND_RESTORE_QUEUES;
const RBAC = 'rbac.authorization.k8s.io';
const OLD_CLAIM_UID = '0b1d2c3e-0000-4000-8000-00000000da7a';

const objects: unknown[] = [
  node('node-a'),
  namespace('shop'),
  namespace('billing'),
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'shop' }, data: { mode: 'prod' } },
  { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'web', namespace: 'shop' } },
  {
    apiVersion: `${RBAC}/v1`,
    kind: 'Role',
    metadata: { name: 'reader', namespace: 'shop' },
    rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }],
  },
  {
    apiVersion: `${RBAC}/v1`,
    kind: 'RoleBinding',
    metadata: { name: 'read-settings', namespace: 'shop' },
    roleRef: { apiGroup: RBAC, kind: 'Role', name: 'reader' },
    subjects: [
      { kind: 'ServiceAccount', name: 'web', namespace: 'shop' },
      { kind: 'ServiceAccount', name: 'auditor', namespace: 'billing' },
      { kind: 'User', apiGroup: RBAC, name: 'alice' },
    ],
  },
  {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: 'pv-data' },
    spec: {
      capacity: { storage: '1Gi' },
      accessModes: ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Retain',
      storageClassName: '',
      hostPath: { path: '/mnt/data' },
      claimRef: { kind: 'PersistentVolumeClaim', apiVersion: 'v1', namespace: 'shop', name: 'data', uid: OLD_CLAIM_UID },
    },
  },
  {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'data', namespace: 'shop', uid: OLD_CLAIM_UID },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } }, storageClassName: '', volumeName: 'pv-data' },
  },
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
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'invoices', namespace: 'billing' }, data: { count: '3' } },
  { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'key', namespace: 'billing' }, type: 'Opaque', data: { k: 'dg==' } },
];

const PLURALS: Record<string, string> = {
  ConfigMap: 'configmaps',
  Secret: 'secrets',
  ServiceAccount: 'serviceaccounts',
  Service: 'services',
  Role: 'roles',
  RoleBinding: 'rolebindings',
  PersistentVolume: 'persistentvolumes',
  PersistentVolumeClaim: 'persistentvolumeclaims',
  Namespace: 'namespaces',
};
function pathOf(o: RestoreObject, namespace = o.metadata.namespace): string {
  const apiVersion = o.apiVersion ?? 'v1';
  const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  const plural = PLURALS[o.kind ?? ''];
  return namespace ? `${base}/namespaces/${namespace}/${plural}/${o.metadata.name}` : `${base}/${plural}/${o.metadata.name}`;
}

interface ServiceShape {
  spec: { clusterIP?: string; ports: Array<{ nodePort?: number }> };
}

describe('restore: a namespace subset, namespace mapping (PV claimRef, RoleBinding subjects), Service addresses', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;
  const originals: RestoreObject[] = [];

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: ['node-a'] });
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES });
    await submitBackup(
      { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
      { name: 'bk1', spec: backupSpec({ includedNamespaces: ['shop', 'billing'] }) },
    );
    expect(await waitForBackupEnd(h.deps.state, 'bk1')).toBe('Completed');
    for await (const item of readBackupTarball(h.deps.storage, 'bk1')) {
      if (item.object.kind !== 'Node') originals.push(item.object as RestoreObject);
    }
  });
  afterAll(async () => {
    await workers?.close();
    await h?.close();
    await redisHandle?.stop();
  });

  const readBack = (path: string) => h.kube.requestJson<RestoreObject>({ path }).catch(() => undefined);
  const restore = async (name: string, spec: Record<string, unknown>) => {
    const validation = validateRestoreRequest({ name, spec: { backupName: 'bk1', ...spec } });
    if (!validation.ok) throw new Error(JSON.stringify(validation.problems));
    await submitRestore({ restores: h.deps.restores!, connection: h.redis, queuePrefix: h.queuePrefix }, { name, spec: validation.value });
    // Read from storage: once archived, Redis keeps only the restore's record and counters.
    const ended = await waitForRestoreEnd(h.deps.restores!, h.deps.storage, name, 30_000);
    return { phase: ended.phase, spec: validation.value, uid: ended.record.uid, results: ended.items, logs: ended.logs };
  };
  const contextOf = (name: string, spec: RestoreSpec, uid: string): RestoreTransformContext => ({
    backupName: 'bk1',
    restoreName: name,
    restoreUid: uid,
    spec,
    volumes: { podVolumes: {}, reprovisionedClaims: [] },
    restoreWait: { image: h.deps.config.restoreWaitImage, command: h.deps.config.restoreWaitCommand },
  });
  const gone = async (path: string) => {
    await h.kube.requestJson({ method: 'DELETE', path });
    await waitFor(`${path} gone`, async () => ((await readBack(path)) ? undefined : true));
  };

  it('a namespace subset: only billing comes back; shop is neither touched nor listed', async () => {
    expect(originals.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ConfigMap/invoices',
      'ConfigMap/settings',
      'Namespace/billing',
      'Namespace/shop',
      'PersistentVolume/pv-data',
      'PersistentVolumeClaim/data',
      'Role/reader',
      'RoleBinding/read-settings',
      'Secret/key',
      'Service/web',
      'ServiceAccount/web',
    ]);
    await gone('/api/v1/namespaces/billing');
    await h.kube.requestJson({
      method: 'PATCH',
      path: '/api/v1/namespaces/shop/configmaps/settings',
      body: { data: { mode: 'edited' } },
      contentType: 'application/merge-patch+json',
    });
    const { phase, results, logs } = await restore('rs-subset', { includedNamespaces: ['billing'] });
    expect(phase).toBe('Completed');
    expect(Object.keys(results).sort()).toEqual(['configmaps/billing/invoices', 'namespaces/-cluster-/billing', 'secrets/billing/key']);
    // The log says once why shop's objects are not restored, with their count, not a line per object.
    const shopLines = logs.filter((l) => l.reason === 'namespace-excluded');
    const shopObjects = originals.filter((o) => o.metadata.namespace === 'shop' || (o.kind === 'Namespace' && o.metadata.name === 'shop'));
    expect(shopLines.map((l) => [l.msg, l.items])).toEqual([
      [`namespace shop is not restored (${shopObjects.length} items)`, shopObjects.length],
    ]);
    expect(Object.values(results).map((r) => r.outcome)).toEqual(['created', 'created', 'created']);
    expect(await readBack('/api/v1/namespaces/billing/configmaps/invoices')).toBeDefined();
    // shop was left as it is (an edited object not brought back, no PV restored).
    expect(((await readBack('/api/v1/namespaces/shop/configmaps/settings')) as unknown as { data: { mode: string } }).data.mode).toBe(
      'edited',
    );
  });

  it('namespaceMapping: objects, the claim, the PV claimRef and the RoleBinding subjects land in the new namespace', async () => {
    // The volume was lost with its cluster; the static PV comes back from the backup, bound to the mapped claim.
    await gone('/api/v1/persistentvolumes/pv-data');
    const { phase, spec, uid, results } = await restore('rs-mapped', {
      includedNamespaces: ['shop'],
      namespaceMapping: { shop: 'shop-copy' },
    });
    expect(phase, JSON.stringify(results)).toBe('Completed');
    expect(Object.values(results).filter((r) => r.outcome !== 'created')).toEqual([]);
    for (const original of originals.filter((o) => o.metadata.namespace === 'shop' || o.kind === 'PersistentVolume')) {
      const restored = await readBack(pathOf(original, original.metadata.namespace ? 'shop-copy' : undefined));
      expect(restored, `${original.kind} ${original.metadata.name} restored`).toBeDefined();
      expect(restoreDiff(original, restored as RestoreObject, contextOf('rs-mapped', spec, uid)), original.kind).toEqual([]);
    }
    const pv = (await readBack('/api/v1/persistentvolumes/pv-data')) as unknown as {
      spec: { claimRef: Record<string, string> };
      metadata: { labels: Record<string, string> };
    };
    expect(pv.spec.claimRef).toMatchObject({ namespace: 'shop-copy', name: 'data' });
    expect(pv.spec.claimRef.uid).not.toBe(OLD_CLAIM_UID);
    const claim = await waitFor('shop-copy/data bound', async () => {
      const c = (await readBack('/api/v1/namespaces/shop-copy/persistentvolumeclaims/data')) as unknown as
        | { spec: { volumeName?: string }; status?: { phase?: string } }
        | undefined;
      return c?.status?.phase === 'Bound' ? c : undefined;
    });
    expect(claim.spec.volumeName).toBe('pv-data');
    const binding = (await readBack(`/apis/${RBAC}/v1/namespaces/shop-copy/rolebindings/read-settings`)) as unknown as {
      subjects: Array<Record<string, string>>;
      roleRef: Record<string, string>;
    };
    expect(binding.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'web', namespace: 'shop-copy' },
      { kind: 'ServiceAccount', name: 'auditor', namespace: 'billing' },
      { kind: 'User', apiGroup: RBAC, name: 'alice' },
    ]);
    expect(binding.roleRef).toEqual({ apiGroup: RBAC, kind: 'Role', name: 'reader' });
    // The Service got a new clusterIP and, without preserveNodePorts, a new nodePort.
    const service = (await readBack('/api/v1/namespaces/shop-copy/services/web')) as unknown as ServiceShape;
    expect(service.spec.clusterIP).toMatch(/^10\.96\./);
    expect(service.spec.clusterIP).not.toBe('10.96.0.42');
    expect(service.spec.ports[0]?.nodePort).toBeGreaterThanOrEqual(30000);
    expect(service.spec.ports[0]?.nodePort).not.toBe(30080);
  });

  it('preserveNodePorts: the port is kept; while another Service holds it the item fails naming the field', async () => {
    const held = await restore('rs-ports-held', {
      includedNamespaces: ['shop'],
      includedResources: ['services'],
      namespaceMapping: { shop: 'shop-ports' },
      preserveNodePorts: true,
    });
    expect(held.phase).toBe('PartiallyFailed');
    expect(held.results['services/shop-ports/web']?.outcome).toBe('failed');
    expect(held.results['services/shop-ports/web']?.reason).toMatch(/nodePort.*30080.*already allocated/);

    await gone('/api/v1/namespaces/shop/services/web');
    const kept = await restore('rs-ports', { includedNamespaces: ['shop'], includedResources: ['services'], preserveNodePorts: true });
    expect(kept.phase).toBe('Completed');
    expect(kept.results['services/shop/web']?.outcome).toBe('created');
    const service = (await readBack('/api/v1/namespaces/shop/services/web')) as unknown as ServiceShape;
    expect(service.spec.ports[0]?.nodePort).toBe(30080);
    expect(service.spec.clusterIP).toMatch(/^10\.96\./);
  });
});
