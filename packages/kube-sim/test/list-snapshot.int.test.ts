/**
 * A paginated list is one consistent snapshot (as on a real API server): writes between pages do
 * not show up in later pages, every page carries the first page's resourceVersion, and a watch from
 * that resourceVersion delivers exactly the writes the list did not show. Without this, an object
 * created between pages that sorts before the cursor is in no page and never in the watch either.
 */
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pvbCrdPath, type Simulator, startSimulator } from '../src/index.js';
import { apiExceptionBody, kubeConfigFor, waitFor } from './sim-helpers.js';

const G = { group: 'stowage.dev', version: 'v1alpha1', namespace: 'stowage', plural: 'podvolumebackups' };
const historyLimit = 40;

type Pvb = k8s.KubernetesObject & { spec?: { volume?: string } };
interface PvbList {
  metadata?: { resourceVersion?: string; continue?: string; remainingItemCount?: number };
  items: Pvb[];
}

function pvb(name: string, volume = 'data') {
  return {
    apiVersion: 'stowage.dev/v1alpha1',
    kind: 'PodVolumeBackup',
    metadata: { name, namespace: 'stowage' },
    spec: { node: 'node-a', pod: { namespace: 'shop', name: 'postgres-0', uid: 'u-1' }, volume, backupStorageLocation: 'default' },
  };
}

let sim: Simulator;
let kc: k8s.KubeConfig;
let custom: k8s.CustomObjectsApi;

beforeAll(async () => {
  sim = await startSimulator({
    materializeVolumes: 'none',
    fixture: { objects: [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'stowage' } }] },
    extraManifests: [pvbCrdPath],
    historyLimit,
  });
  kc = kubeConfigFor(sim);
  custom = kc.makeApiClient(k8s.CustomObjectsApi);
});

afterAll(async () => {
  await sim?.close();
});

const listPage = async (limit: number, token?: string) =>
  (await custom.listNamespacedCustomObject({ ...G, limit, _continue: token })) as PvbList;

describe('paginated lists', () => {
  it('show the first page’s snapshot on every page; a watch from its resourceVersion brings the rest', async () => {
    for (let i = 0; i < 10; i++) await custom.createNamespacedCustomObject({ ...G, body: pvb(`b-${i}`) });
    const first = await listPage(3);
    const snapshotRv = first.metadata?.resourceVersion;
    expect(first.items.map((p) => p.metadata?.name)).toEqual(['b-0', 'b-1', 'b-2']);

    // Between pages: a create before the cursor, one after it, a change and two deletes after it.
    await custom.createNamespacedCustomObject({ ...G, body: pvb('a-between') });
    await custom.createNamespacedCustomObject({ ...G, body: pvb('z-between') });
    await custom.patchNamespacedCustomObject(
      { ...G, name: 'b-5', body: { spec: { volume: 'changed' } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await custom.deleteNamespacedCustomObject({ ...G, name: 'b-7' });
    await custom.deleteNamespacedCustomObject({ ...G, name: 'b-8' });

    const pages = [first];
    for (let token = first.metadata?.continue; token; token = pages.at(-1)?.metadata?.continue) pages.push(await listPage(3, token));
    const listed = pages.flatMap((page) => page.items);
    expect(listed.map((p) => p.metadata?.name)).toEqual(['b-0', 'b-1', 'b-2', 'b-3', 'b-4', 'b-5', 'b-6', 'b-7', 'b-8', 'b-9']);
    expect(listed.find((p) => p.metadata?.name === 'b-5')?.spec?.volume).toBe('data');
    // What each page says is left is what the later pages of the snapshot hold (the writes after
    // the first page do not change it: now there is one object less after the cursor); the last
    // page says nothing.
    let seen = 0;
    const remaining = pages.map((page) => {
      seen += page.items.length;
      return page.metadata?.continue ? listed.length - seen : undefined;
    });
    expect(pages.map((page) => page.metadata?.remainingItemCount)).toEqual(remaining);
    expect(pages.map((page) => page.metadata?.resourceVersion)).toEqual(pages.map(() => snapshotRv));

    const events: string[] = [];
    const controller = await new k8s.Watch(kc).watch(
      '/apis/stowage.dev/v1alpha1/namespaces/stowage/podvolumebackups',
      { resourceVersion: snapshotRv },
      (type: string, object: Pvb) => {
        events.push(`${type} ${object.metadata?.name}`);
      },
      () => undefined,
    );
    try {
      await waitFor(() => events.length >= 5, 5_000, 'the writes made between pages');
      expect(events).toEqual(['ADDED a-between', 'ADDED z-between', 'MODIFIED b-5', 'DELETED b-7', 'DELETED b-8']);
    } finally {
      controller.abort();
    }
  });

  it('answer 410 Expired for a continue token whose snapshot left the history', async () => {
    await custom.createNamespacedCustomObject({ ...G, body: pvb('old-1') });
    await custom.createNamespacedCustomObject({ ...G, body: pvb('old-2') });
    const first = await listPage(1);
    expect(first.metadata?.continue).toBeTruthy();
    for (let i = 0; i <= historyLimit; i++) {
      await custom.patchNamespacedCustomObject(
        { ...G, name: 'old-1', body: { spec: { volume: `v${i}` } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
    }
    const error = await listPage(1, first.metadata?.continue).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(apiExceptionBody(error)).toMatchObject({ code: 410, reason: 'Expired' });
    // A fresh list still works and shows the current state.
    const fresh = await custom.listNamespacedCustomObject({ ...G });
    expect((fresh as PvbList).items.find((p) => p.metadata?.name === 'old-1')?.spec?.volume).toBe(`v${historyLimit}`);
  });
});
