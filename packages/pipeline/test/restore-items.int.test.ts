import { type RestoreObject, type RestoreSpec, type RestoreTransformContext, restoreDiff, validateRestoreRequest } from '@stowage/core';
import type { KubeClients } from '@stowage/kube';
import { InFlightLimit, type RunningWorkers, startWorkers, submitBackup, submitRestore } from '@stowage/pipeline';
import { readBackupTarball } from '@stowage/storage';
import { useTestRedis } from '@stowage/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, namespace, node, pod } from './support/fixtures.js';
import { BACKUP_AND_RESTORE_QUEUES, type Harness, startHarness, waitFor, waitForBackupEnd, waitForRestoreEnd } from './support/harness.js';

const ALL_QUEUES = BACKUP_AND_RESTORE_QUEUES;
const ENDED = new Set(['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled']);

const objects: unknown[] = [
  node('node-a'),
  namespace('shop'),
  {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'settings', namespace: 'shop', labels: { app: 'web' } },
    data: { mode: 'prod' },
  },
  { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'db-pass', namespace: 'shop' }, type: 'Opaque', data: { password: 'c2VjcmV0' } },
  { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'web', namespace: 'shop' } },
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
  pod({ name: 'web-0', labels: { app: 'web' } }),
];

async function restoreEnd(h: Harness, name: string, timeoutMs = 30_000): Promise<string> {
  return waitFor(
    `restore ${name} to end`,
    async () => {
      const rec = await h.deps.restores?.getRestore(name);
      return rec && ENDED.has(rec.phase) ? rec.phase : undefined;
    },
    timeoutMs,
  );
}

async function readBack(kube: KubeClients, path: string): Promise<RestoreObject | undefined> {
  try {
    return await kube.requestJson<RestoreObject>({ path });
  } catch {
    return undefined;
  }
}

function pathOf(o: RestoreObject): string {
  const apiVersion = o.apiVersion ?? 'v1';
  const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  const plural = {
    ConfigMap: 'configmaps',
    Secret: 'secrets',
    ServiceAccount: 'serviceaccounts',
    Service: 'services',
    RoleBinding: 'rolebindings',
    Pod: 'pods',
    Namespace: 'namespaces',
  }[o.kind ?? ''];
  const ns = o.metadata.namespace;
  return ns ? `${base}/namespaces/${ns}/${plural}/${o.metadata.name}` : `${base}/${plural}/${o.metadata.name}`;
}

describe('restore of items (no volumes) through the job graph', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;
  let originals: RestoreObject[] = [];

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: ['node-a'] });
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES });
    await submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name: 'bk1', spec: backupSpec() });
    expect(await waitForBackupEnd(h.deps.state, 'bk1')).toBe('Completed');
    for await (const item of readBackupTarball(h.deps.storage, 'bk1')) originals.push(item.object as RestoreObject);
    originals = originals.filter((o) => o.kind !== 'Node');
  });
  afterEach(async () => {
    // Each test leaves the workers running; the suite closes them.
  });
  afterAll(async () => {
    await workers?.close();
    await h?.close();
    await redisHandle?.stop();
  });

  const restore = async (name: string, spec: Record<string, unknown>) => {
    const validation = validateRestoreRequest({ name, spec: { backupName: 'bk1', ...spec } });
    if (!validation.ok) throw new Error(JSON.stringify(validation.problems));
    await submitRestore({ restores: h.deps.restores!, connection: h.redis, queuePrefix: h.queuePrefix }, { name, spec: validation.value });
    return validation.value;
  };
  const contextOf = (name: string, spec: RestoreSpec, uid: string): RestoreTransformContext => ({
    backupName: 'bk1',
    restoreName: name,
    restoreUid: uid,
    spec,
    volumes: { podVolumes: {}, reprovisionedClaims: [] },
    restoreWait: { image: h.deps.config.restoreWaitImage, command: h.deps.config.restoreWaitCommand },
  });
  const deleteNamespace = async (ns: string) => {
    await h.kube.core.deleteNamespace({ name: ns });
    await waitFor(`namespace ${ns} gone`, async () => ((await readBack(h.kube, `/api/v1/namespaces/${ns}`)) ? undefined : true));
  };

  it('the namespace deleted, restored: every object equals its original up to the documented transforms, each created once', async () => {
    expect(originals.map((o) => o.kind).sort()).toEqual(['ConfigMap', 'Namespace', 'Pod', 'Secret', 'Service', 'ServiceAccount']);
    await deleteNamespace('shop');
    const spec = await restore('rs-all', {});
    expect(await restoreEnd(h, 'rs-all')).toBe('Completed');
    const record = await h.deps.restores!.getRestore('rs-all');
    for (const original of originals) {
      const restored = await readBack(h.kube, pathOf(original));
      expect(restored, `${original.kind} ${original.metadata.name} restored`).toBeDefined();
      expect(
        restoreDiff(original, restored as RestoreObject, contextOf('rs-all', spec, record!.uid)),
        `${original.kind} ${original.metadata.name}`,
      ).toEqual([]);
    }
    const results = (await waitForRestoreEnd(h.deps.restores!, h.deps.storage, 'rs-all')).items;
    expect(Object.values(results).map((r) => r.outcome)).toEqual(Array(originals.length).fill('created'));
    const counters = await h.deps.restores!.counters('rs-all');
    expect(counters).toMatchObject({ totalItems: originals.length, itemsRestored: originals.length, itemsCreated: originals.length });
    expect(counters.itemsFailed ?? 0).toBe(0);
    // The Service kept no clusterIP and got a fresh nodePort (preserveNodePorts is false).
    const service = (await readBack(h.kube, '/api/v1/namespaces/shop/services/web')) as unknown as {
      spec: { clusterIP?: string; ports: Array<{ nodePort?: number }> };
    };
    expect(service.spec.clusterIP).not.toBe('10.96.0.42');
    expect(service.spec.ports[0]?.nodePort).not.toBe(30080);
  });

  it('existingResourcePolicy none leaves a changed object alone with a warning; update brings it back', async () => {
    await h.kube.requestJson({
      method: 'PATCH',
      path: '/api/v1/namespaces/shop/configmaps/settings',
      body: { data: { mode: 'edited' } },
      contentType: 'application/merge-patch+json',
    });
    await restore('rs-none', {});
    // A differing object left alone is a warning, not an error (Velero): the restore is Completed.
    expect(await restoreEnd(h, 'rs-none')).toBe('Completed');
    const none = (await waitForRestoreEnd(h.deps.restores!, h.deps.storage, 'rs-none')).items;
    expect(none['configmaps/shop/settings']?.outcome).toBe('exists-skipped');
    expect(none['configmaps/shop/settings']?.reason).toMatch(/settings/);
    expect(
      ((await readBack(h.kube, '/api/v1/namespaces/shop/configmaps/settings')) as unknown as { data: Record<string, string> }).data.mode,
    ).toBe('edited');
    expect((await h.deps.restores!.counters('rs-none')).warnings).toBeGreaterThan(0);

    await restore('rs-update', { existingResourcePolicy: 'update' });
    expect(await restoreEnd(h, 'rs-update')).toBe('Completed');
    const updated = (await waitForRestoreEnd(h.deps.restores!, h.deps.storage, 'rs-update')).items;
    expect(updated['configmaps/shop/settings']?.outcome).toBe('updated');
    expect(
      ((await readBack(h.kube, '/api/v1/namespaces/shop/configmaps/settings')) as unknown as { data: Record<string, string> }).data.mode,
    ).toBe('prod');
  });

  it('namespaceMapping restores every object into another namespace', async () => {
    const spec = await restore('rs-mapped', { namespaceMapping: { shop: 'shop-copy' } });
    expect(await restoreEnd(h, 'rs-mapped')).toBe('Completed');
    const record = await h.deps.restores!.getRestore('rs-mapped');
    for (const original of originals) {
      const mapped = structuredClone(original);
      if (mapped.kind === 'Namespace') mapped.metadata.name = 'shop-copy';
      else mapped.metadata.namespace = 'shop-copy';
      const restored = await readBack(h.kube, pathOf(mapped));
      expect(restored, `${original.kind} ${original.metadata.name} in shop-copy`).toBeDefined();
      expect(restoreDiff(original, restored as RestoreObject, contextOf('rs-mapped', spec, record!.uid))).toEqual([]);
    }
  });

  it('the in-flight cap holds: never more requests at once than configured', async () => {
    const limit = new InFlightLimit(3);
    let active = 0;
    let peak = 0;
    await Promise.all(
      Array.from({ length: 20 }, () =>
        limit.run(async () => {
          active++;
          peak = Math.max(peak, active);
          await new Promise((r) => setTimeout(r, 5));
          active--;
        }),
      ),
    );
    expect(peak).toBe(3);
    expect(limit.peak).toBe(3);
  });
});
