/**
 * Nothing is lost: 2,000 PVBs created (half of them then patched) in concurrent bursts while the
 * simulator drops every PVB watch and delays lists and watches, so the informer re-lists (in pages
 * of 50) while objects are being created. An informer and a raw client-node watch (resuming from the
 * last resourceVersion it received) must both end up with every object at its final
 * resourceVersion, without any resync (set to an hour here). The last bursts run on a healthy watch,
 * so nothing a re-list missed is repaired by a later re-list.
 */
import { type KubernetesObject, Watch } from '@kubernetes/client-node';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createKubeClients,
  createPvbClient,
  type InformerEvent,
  type KubeClients,
  type NewPodVolumeBackup,
  type PodVolumeBackup,
  type PvbClient,
  pvbLabels,
} from '../src/index.js';
import { pvbCrdFile, smallCluster, waitFor } from './sim-fixture.js';

const total = 2_000;
const burst = 100;
const pvbPath = '/apis/stowage.dev/v1alpha1/namespaces/stowage/podvolumebackups';

let sim: Simulator;
let kube: KubeClients;
let pvbs: PvbClient;

beforeAll(async () => {
  sim = await startSimulator({ fixture: smallCluster(), extraManifests: [pvbCrdFile], bookmarkIntervalMs: 50 });
  kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
  pvbs = createPvbClient(kube);
});

afterAll(async () => {
  await sim?.close();
});

/** Names spread over the whole (namespace, name) order, so every list page is hit by new objects. */
function pvbName(i: number): string {
  const spread = (i * 7_919) % 10_007;
  return `s-${String(spread).padStart(5, '0')}-${i}`;
}

function newPvb(i: number): NewPodVolumeBackup {
  return {
    metadata: {
      name: pvbName(i),
      labels: { [pvbLabels.backupName]: 'stress', [pvbLabels.backupUid]: 'uid-stress', [pvbLabels.node]: 'node-a' },
    },
    spec: { node: 'node-a', pod: { namespace: 'apps', name: 'db', uid: 'pod-uid-1' }, volume: `v${i}`, backupStorageLocation: 'default' },
  };
}

/**
 * A bare client-node watch loop: resumes from the last resourceVersion it received (event or
 * bookmark); records any ERROR/410 so the test can fail on it instead of re-listing.
 */
function rawWatch(kubeClients: KubeClients, fromRv: string) {
  const seen = new Map<string, string>();
  const errors: string[] = [];
  let rv = fromRv;
  let stopped = false;
  let abort: AbortController | undefined;
  let streams = 0;
  const loop = async () => {
    while (!stopped) {
      streams++;
      await new Promise<void>((resolve) => {
        new Watch(kubeClients.kubeConfig)
          .watch(
            pvbPath,
            { resourceVersion: rv, allowWatchBookmarks: true, labelSelector: `${pvbLabels.backupName}=stress` },
            (type: string, object: KubernetesObject & { code?: number }) => {
              if (type === 'ERROR') {
                errors.push(`ERROR ${object.code}`);
                return;
              }
              if (type === 'ADDED' || type === 'MODIFIED') seen.set(object.metadata!.name!, object.metadata!.resourceVersion!);
              const version = object.metadata?.resourceVersion;
              if (version) rv = version;
            },
            () => resolve(),
          )
          .then(
            (controller) => {
              abort = controller;
            },
            () => resolve(),
          );
      });
      if (!stopped) await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };
  const running = loop();
  return {
    seen,
    errors,
    streams: () => streams,
    stop: async () => {
      stopped = true;
      abort?.abort();
      await running;
    },
  };
}

describe('informer under create bursts, dropped watches and latency', () => {
  it('sees every PVB at its final resourceVersion without waiting for a resync', async () => {
    const events: InformerEvent<PodVolumeBackup>[] = [];
    const errors: string[] = [];
    const informer = pvbs.watchPvbs({
      labelSelector: `${pvbLabels.backupName}=stress`,
      onEvent: (event) => {
        events.push(event);
      },
      onError: (err) => errors.push(err.code),
      resyncIntervalMs: 3_600_000,
      livenessTimeoutMs: 3_600_000,
      backoffBaseMs: 20,
      backoffMaxMs: 200,
      pageSize: 50,
    });
    const start = await kube.requestJson<{ metadata: { resourceVersion: string } }>({ path: pvbPath, query: { limit: 1 } });
    const raw = rawWatch(kube, start.metadata.resourceVersion);
    try {
      expect(await informer.synced).toBe(true);
      sim.setFaults({
        latencyMs: 15,
        dropWatchesEveryMs: 250,
        dropWatchesMode: 'reset',
        appliesTo: { resources: ['podvolumebackups.stowage.dev'], verbs: ['list', 'watch'] },
      });
      for (let first = 0; first < total; first += burst) {
        // The last bursts run on a healthy watch: what an earlier re-list missed must not stay missed.
        // The faults last until the informer lost its watch a few times (creates got fast enough,
        // with reused connections, that the bursts alone could end within two drops).
        if (first === total - 4 * burst) {
          await waitFor('the informer to lose its watch three times', () => (informer.stats.watchErrors >= 3 ? true : undefined), 15_000);
          sim.clearFaults();
        }
        const batch = Array.from({ length: Math.min(burst, total - first) }, (_, k) => first + k);
        await Promise.all(
          batch.map(async (i) => {
            await pvbs.createPvb(newPvb(i));
            if (i % 2 === 0) await pvbs.patchPvbStatus(pvbName(i), { phase: 'InProgress' });
          }),
        );
      }
      const truth = new Map(
        (await pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=stress` })).map((p) => [
          p.metadata.name,
          p.metadata.resourceVersion,
        ]),
      );
      expect(truth.size).toBe(total);
      const missingFrom = (has: (name: string, rv: string | undefined) => boolean) =>
        [...truth].filter(([name, rv]) => !has(name, rv)).map(([name]) => name);
      await waitFor(
        'the informer cache to hold every PVB at its final resourceVersion',
        () => (missingFrom((name, rv) => informer.get(name, 'stowage')?.metadata.resourceVersion === rv).length === 0 ? true : undefined),
        15_000,
      ).catch((err: Error) => {
        const missing = missingFrom((name, rv) => informer.get(name, 'stowage')?.metadata.resourceVersion === rv);
        throw new Error(`${err.message}; ${missing.length} missing or stale, e.g. ${missing.slice(0, 5).join(', ')}`);
      });
      await waitFor(
        'the raw watch to see every PVB at its final resourceVersion',
        () => (missingFrom((name, rv) => raw.seen.get(name) === rv).length === 0 ? true : undefined),
        15_000,
      ).catch((err: Error) => {
        const missing = missingFrom((name, rv) => raw.seen.get(name) === rv);
        throw new Error(`${err.message}; ${missing.length} missing or stale, e.g. ${missing.slice(0, 5).join(', ')}`);
      });
      // Every PVB reached the informer's subscriber as ADDED, and none was reported deleted.
      const added = new Set(events.filter((e) => e.type === 'ADDED').map((e) => e.object.metadata.name));
      expect(missingFrom((name) => added.has(name))).toEqual([]);
      expect(events.filter((e) => e.type === 'DELETED').map((e) => e.object.metadata.name)).toEqual([]);
      expect(raw.errors).toEqual([]);
      expect(new Set(errors)).toEqual(new Set(['KUBE_UNAVAILABLE']));
      // The faults really happened: watches were dropped and the informer re-listed.
      expect(informer.stats.watchErrors).toBeGreaterThanOrEqual(3);
      expect(informer.stats.lists).toBeGreaterThanOrEqual(3);
      expect(raw.streams()).toBeGreaterThanOrEqual(3);
    } finally {
      sim.clearFaults();
      await raw.stop();
      await informer.stop();
    }
  }, 40_000);
});
