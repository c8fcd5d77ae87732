import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createKubeClients,
  createPvbClient,
  type Informer,
  type InformerEvent,
  type KubeClients,
  type NewPodVolumeBackup,
  type PodVolumeBackup,
  type PvbClient,
  pvbLabels,
  watchPods,
} from '../src/index.js';
import { pvbCrdFile, smallCluster, waitFor } from './sim-fixture.js';

let sim: Simulator;
let kube: KubeClients;
let pvbs: PvbClient;
const informers: Informer<unknown>[] = [];

beforeAll(async () => {
  sim = await startSimulator({ fixture: smallCluster(), extraManifests: [pvbCrdFile], bookmarkIntervalMs: 200 });
  kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
  pvbs = createPvbClient(kube);
});

afterEach(async () => {
  sim.clearFaults();
  await Promise.all(informers.splice(0).map((informer) => informer.stop()));
});

afterAll(async () => {
  await sim?.close();
});

function newPvb(name: string, backup: string, node = 'node-a'): NewPodVolumeBackup {
  return {
    metadata: { name, labels: { [pvbLabels.backupName]: backup, [pvbLabels.backupUid]: `uid-${backup}`, [pvbLabels.node]: node } },
    spec: {
      node,
      pod: { namespace: 'apps', name: 'db', uid: 'pod-uid-1' },
      volume: 'data',
      backupStorageLocation: 'default',
      tags: { backup: backup, volume: 'data' },
    },
  };
}

describe('PVB client', () => {
  it('creates a PVB once: the second create returns the existing one', async () => {
    const first = await pvbs.createPvb(newPvb('b1-aaaa', 'b1'));
    const second = await pvbs.createPvb(newPvb('b1-aaaa', 'b1'));
    expect(first.created).toBe(true);
    expect(second.created).toBe(false);
    expect(second.pvb.metadata.uid).toBe(first.pvb.metadata.uid);
    expect(first.pvb).toMatchObject({ apiVersion: 'stowage.dev/v1alpha1', kind: 'PodVolumeBackup', metadata: { namespace: 'stowage' } });
    const listed = await pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=b1` });
    expect(listed.map((p) => p.metadata.name)).toEqual(['b1-aaaa']);
  });

  it('reports a missing PVB as a value and an invalid one as KUBE_INVALID', async () => {
    expect(await pvbs.getPvb('no-such-pvb')).toBeUndefined();
    expect(await pvbs.requestCancel('no-such-pvb')).toEqual({ outcome: 'not-found' });
    const invalid = newPvb('b1-invalid', 'b1');
    invalid.spec.node = '';
    await expect(pvbs.createPvb(invalid)).rejects.toMatchObject({ code: 'KUBE_INVALID', status: 422 });
    await expect(pvbs.patchPvbStatus('no-such-pvb', { phase: 'InProgress' })).rejects.toMatchObject({ code: 'KUBE_NOT_FOUND' });
  });

  it('merge-patches the status and keeps the fields it was not given', async () => {
    await pvbs.createPvb(newPvb('b2-aaaa', 'b2'));
    const started = await pvbs.patchPvbStatus('b2-aaaa', {
      phase: 'InProgress',
      startTimestamp: '2026-01-01T00:00:00Z',
      progress: { totalBytes: 1000, bytesDone: 0 },
    });
    expect(started.status).toMatchObject({ phase: 'InProgress', progress: { totalBytes: 1000, bytesDone: 0 } });
    await pvbs.patchPvbStatus('b2-aaaa', { progress: { bytesDone: 400 } });
    const read = await pvbs.getPvb('b2-aaaa');
    expect(read?.status).toEqual({
      phase: 'InProgress',
      startTimestamp: '2026-01-01T00:00:00Z',
      progress: { totalBytes: 1000, bytesDone: 400 },
    });
    // spec is untouched by status writes
    expect(read?.spec.volume).toBe('data');
  });

  it('asks a PVB to cancel through spec.cancel', async () => {
    await pvbs.createPvb(newPvb('b3-aaaa', 'b3'));
    const result = await pvbs.requestCancel('b3-aaaa');
    expect(result.outcome).toBe('requested');
    expect((await pvbs.getPvb('b3-aaaa'))?.spec).toMatchObject({ cancel: true, node: 'node-a' });
  });

  it('updates the status only at the expected resourceVersion: a stale claimer gets a conflict', async () => {
    const { pvb } = await pvbs.createPvb(newPvb('b4-aaaa', 'b4'));
    const seen = pvb.metadata.resourceVersion!;
    const claimed = await pvbs.updatePvbStatusIf('b4-aaaa', seen, { phase: 'InProgress', message: 'claimed by agent-1' });
    expect(claimed.outcome).toBe('updated');
    const stale = await pvbs.updatePvbStatusIf('b4-aaaa', seen, { phase: 'InProgress', message: 'claimed by agent-2' });
    expect(stale.outcome).toBe('conflict');
    if (stale.outcome === 'conflict') expect(stale.current?.status?.message).toBe('claimed by agent-1');
    expect((await pvbs.getPvb('b4-aaaa'))?.spec.node).toBe('node-a');
    expect(await pvbs.updatePvbStatusIf('gone', '1', { phase: 'Failed' })).toEqual({ outcome: 'not-found' });
    await expect(pvbs.updatePvbStatusIf('b4-aaaa', '', { phase: 'Failed' })).rejects.toMatchObject({ code: 'KUBE_BAD_ARGUMENT' });
  });

  it('lets exactly one of ten concurrent claimers win', async () => {
    const { pvb } = await pvbs.createPvb(newPvb('b5-aaaa', 'b5'));
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        pvbs.updatePvbStatusIf('b5-aaaa', pvb.metadata.resourceVersion!, { phase: 'InProgress', message: `agent-${i}` }),
      ),
    );
    const winners = results.filter((r) => r.outcome === 'updated');
    expect(winners).toHaveLength(1);
    expect(results.filter((r) => r.outcome === 'conflict')).toHaveLength(9);
  });
});

/** Starts a PVB informer that records events; stopped after each test. */
function recordPvbEvents(kubeClients: KubeClients, labelSelector: string, extra: { livenessTimeoutMs?: number } = {}) {
  const events: InformerEvent<PodVolumeBackup>[] = [];
  const errors: string[] = [];
  const informer = createPvbClient(kubeClients).watchPvbs({
    labelSelector,
    onEvent: (event) => {
      events.push(event);
    },
    onError: (err) => errors.push(err.code),
    backoffBaseMs: 50,
    backoffMaxMs: 300,
    ...extra,
  });
  informers.push(informer as Informer<unknown>);
  const phaseOf = (name: string) =>
    events
      .filter((e) => e.object.metadata.name === name && e.type !== 'DELETED')
      .map((e) => e.object.status?.phase)
      .at(-1);
  return { informer, events, errors, phaseOf };
}

describe('watchPvbs', () => {
  it('lists, then delivers adds, status changes and deletes, only for its selector', async () => {
    await pvbs.createPvb(newPvb('w1-before', 'w1'));
    await pvbs.createPvb(newPvb('w1-other-node', 'w1', 'node-b'));
    const { informer, events, phaseOf } = recordPvbEvents(kube, `${pvbLabels.backupName}=w1,${pvbLabels.node}=node-a`);
    expect(await informer.synced).toBe(true);
    expect(events.map((e) => `${e.type} ${e.object.metadata.name}`)).toEqual(['ADDED w1-before']);
    await pvbs.createPvb(newPvb('w1-after', 'w1'));
    await pvbs.patchPvbStatus('w1-after', { phase: 'Completed' });
    await waitFor('Completed to arrive', () => (phaseOf('w1-after') === 'Completed' ? true : undefined));
    await pvbs.deletePvb('w1-before');
    await waitFor('the delete to arrive', () => events.find((e) => e.type === 'DELETED'));
    expect(informer.list().map((p) => p.metadata.name)).toEqual(['w1-after']);
    expect(events.some((e) => e.object.metadata.name === 'w1-other-node')).toBe(false);
  });

  it('keeps delivering while the simulator drops its watches every 150 ms', async () => {
    const { informer, phaseOf, errors } = recordPvbEvents(kube, `${pvbLabels.backupName}=w2`);
    expect(await informer.synced).toBe(true);
    sim.resetRequests();
    sim.setFaults({ dropWatchesEveryMs: 150, dropWatchesMode: 'reset', appliesTo: { resources: ['podvolumebackups.stowage.dev'] } });
    for (let i = 0; i < 6; i++) {
      await pvbs.createPvb(newPvb(`w2-${i}`, 'w2'));
      await new Promise((resolve) => setTimeout(resolve, 120));
      await pvbs.patchPvbStatus(`w2-${i}`, { phase: 'Completed' });
    }
    await waitFor('every PVB to be seen Completed', () =>
      Array.from({ length: 6 }, (_, i) => phaseOf(`w2-${i}`)).every((p) => p === 'Completed') ? true : undefined,
    );
    expect(sim.requests().watches.opened).toBeGreaterThanOrEqual(3);
    expect(informer.stats.watchErrors).toBeGreaterThanOrEqual(2);
    expect(errors).toContain('KUBE_UNAVAILABLE');
  });

  it('comes back after a 429/500 storm on lists and watches', async () => {
    const { informer, phaseOf } = recordPvbEvents(kube, `${pvbLabels.backupName}=w3`);
    expect(await informer.synced).toBe(true);
    sim.resetRequests();
    sim.setFaults({
      errorRate: 1,
      statuses: [429, 500],
      retryAfterSeconds: 1,
      dropWatchesEveryMs: 100,
      appliesTo: { resources: ['podvolumebackups.stowage.dev'], verbs: ['list', 'watch'] },
    });
    await pvbs.createPvb(newPvb('w3-storm', 'w3'));
    await new Promise((resolve) => setTimeout(resolve, 800));
    sim.clearFaults();
    await pvbs.patchPvbStatus('w3-storm', { phase: 'Failed', message: 'disk gone' });
    await waitFor('the storm-time PVB to arrive as Failed', () => (phaseOf('w3-storm') === 'Failed' ? true : undefined));
    const counts = sim.requests();
    expect((counts.faulted['429'] ?? 0) + (counts.faulted['500'] ?? 0)).toBeGreaterThanOrEqual(2);
    expect(informer.stats.watchErrors).toBeGreaterThanOrEqual(1);
  });

  it('keeps its cache current by re-listing while every watch is refused (lists still answer)', async () => {
    const { informer, events } = recordPvbEvents(kube, `${pvbLabels.backupName}=w5`);
    expect(await informer.synced).toBe(true);
    sim.resetRequests();
    sim.setFaults({
      errorRate: 1,
      statuses: [503],
      dropWatchesEveryMs: 200,
      appliesTo: { resources: ['podvolumebackups.stowage.dev'], verbs: ['watch'] },
    });
    try {
      await pvbs.createPvb(newPvb('w5-outage', 'w5'));
      // Well before the 5-minute resync: the refused watches make the informer list again.
      await waitFor(
        'the outage-time PVB to reach the cache',
        () => (events.some((e) => e.object.metadata.name === 'w5-outage') && informer.list().length > 0 ? true : undefined),
        15_000,
      );
      expect(sim.requests().faulted['503'] ?? 0).toBeGreaterThanOrEqual(1);
      expect(informer.stats.watchErrors).toBeGreaterThanOrEqual(1);
    } finally {
      sim.clearFaults();
    }
  });

  it('re-lists when a watch goes quiet without closing (no events, no bookmarks)', async () => {
    const quiet = await startSimulator({
      fixture: smallCluster(),
      extraManifests: [pvbCrdFile],
      bookmarkIntervalMs: 0,
    });
    try {
      const quietKube = createKubeClients({ kubeconfigYaml: quiet.kubeconfigYaml });
      const quietPvbs = createPvbClient(quietKube);
      const { informer, phaseOf } = recordPvbEvents(quietKube, `${pvbLabels.backupName}=q`, { livenessTimeoutMs: 300 });
      expect(await informer.synced).toBe(true);
      await waitFor('a liveness restart', () => (informer.stats.livenessRestarts >= 1 ? true : undefined));
      await quietPvbs.createPvb(newPvb('q-1', 'q'));
      await waitFor('the PVB after the restart', () => phaseOf('q-1') ?? (informer.get('q-1', 'stowage') ? true : undefined));
      expect(informer.stats.lists).toBeGreaterThanOrEqual(2);
      await informer.stop();
    } finally {
      await quiet.close();
    }
  });

  it('stops cleanly: no watch stays open and stop() can be called twice', async () => {
    const { informer } = recordPvbEvents(kube, `${pvbLabels.backupName}=w4`);
    await informer.synced;
    await waitFor('the watch to open', () => (sim.requests().watches.active > 0 ? true : undefined));
    await Promise.all([informer.stop(), informer.stop()]);
    await waitFor('no active watch', () => (sim.requests().watches.active === 0 ? true : undefined));
  });
});

describe('watchPods', () => {
  it('follows pods by field selector', async () => {
    const events: string[] = [];
    const informer = watchPods(kube, {
      namespace: 'apps',
      fieldSelector: 'spec.nodeName=node-a',
      onEvent: (e) => {
        events.push(`${e.type} ${e.object.metadata?.name}`);
      },
    });
    informers.push(informer as Informer<unknown>);
    expect(await informer.synced).toBe(true);
    expect(events).toEqual(['ADDED db']);
    sim.setPodPhase('apps', 'db', 'Succeeded');
    await waitFor('the phase change', () => events.find((e) => e === 'MODIFIED db'));
  });
});
