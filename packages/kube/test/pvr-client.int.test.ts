import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createKubeClients,
  createPvbClient,
  createPvrClient,
  type InformerEvent,
  type NewPodVolumeRestore,
  type PodVolumeRestore,
  type PvrClient,
  pvrLabels,
} from '../src/index.js';
import { pvbCrdFile, pvrCrdFile, smallCluster, waitFor } from './sim-fixture.js';

let sim: Simulator;
let pvrs: PvrClient;

beforeAll(async () => {
  sim = await startSimulator({ fixture: smallCluster(), extraManifests: [pvbCrdFile, pvrCrdFile], bookmarkIntervalMs: 200 });
  pvrs = createPvrClient(createKubeClients({ kubeconfigPath: sim.kubeconfigPath }));
});

afterAll(async () => {
  await sim?.close();
});

function newPvr(name: string, restore: string, podUid = 'restored-pod-uid-1'): NewPodVolumeRestore {
  return {
    metadata: { name, labels: { [pvrLabels.restoreName]: restore, [pvrLabels.restoreUid]: `uid-${restore}`, [pvrLabels.podUid]: podUid } },
    spec: {
      pod: { namespace: 'apps', name: 'db', uid: podUid },
      volume: 'data',
      snapshotID: 'snap-1',
      backupStorageLocation: 'default',
      repoIdentifier: 'repository',
      sourceNamespace: 'apps',
      uploaderType: 'stowage',
    },
  };
}

describe('PVR client (the volume-operation client bound to PodVolumeRestores)', () => {
  it('creates a PVR once, lists it by label, and never confuses it with a PVB of the same name', async () => {
    const first = await pvrs.create(newPvr('r1-aaaa', 'r1'));
    const again = await pvrs.create(newPvr('r1-aaaa', 'r1'));
    expect(first.created).toBe(true);
    expect(again.created).toBe(false);
    expect(again.object.metadata.uid).toBe(first.object.metadata.uid);
    expect(first.object).toMatchObject({
      apiVersion: 'stowage.dev/v1alpha1',
      kind: 'PodVolumeRestore',
      metadata: { namespace: 'stowage' },
    });
    expect((await pvrs.list({ labelSelector: `${pvrLabels.restoreName}=r1` })).map((p) => p.metadata.name)).toEqual(['r1-aaaa']);
    const pvbs = createPvbClient(createKubeClients({ kubeconfigPath: sim.kubeconfigPath }));
    expect(await pvbs.getPvb('r1-aaaa')).toBeUndefined();
  });

  it('reports a missing PVR as a value and an invalid one as KUBE_INVALID naming the field', async () => {
    expect(await pvrs.get('no-such-pvr')).toBeUndefined();
    expect(await pvrs.requestCancel('no-such-pvr')).toEqual({ outcome: 'not-found' });
    const invalid = newPvr('r1-invalid', 'r1');
    invalid.spec.snapshotID = '';
    await expect(pvrs.create(invalid)).rejects.toMatchObject({ code: 'KUBE_INVALID', message: expect.stringMatching(/spec\.snapshotID/) });
    await expect(pvrs.get('')).rejects.toMatchObject({ code: 'KUBE_BAD_ARGUMENT', message: expect.stringMatching(/PVR name/) });
  });

  it('claims with a conditional status update (one winner), merge-patches progress, and cancels through spec.cancel', async () => {
    const { object } = await pvrs.create(newPvr('r2-aaaa', 'r2'));
    const results = await Promise.all(
      ['node-a', 'node-b', 'node-a'].map((node) =>
        pvrs.updateStatusIf('r2-aaaa', object.metadata.resourceVersion!, { phase: 'InProgress', node }),
      ),
    );
    expect(results.filter((r) => r.outcome === 'updated')).toHaveLength(1);
    await pvrs.patchStatus('r2-aaaa', { progress: { totalBytes: 10, bytesDone: 4 } });
    const cancel = await pvrs.requestCancel('r2-aaaa');
    expect(cancel.outcome).toBe('requested');
    const read = await pvrs.get('r2-aaaa');
    expect(read?.spec).toMatchObject({ cancel: true, snapshotID: 'snap-1' });
    expect(read?.status).toMatchObject({ phase: 'InProgress', progress: { totalBytes: 10, bytesDone: 4 } });
    expect(['node-a', 'node-b']).toContain(read?.status?.node);
    expect(await pvrs.delete('r2-aaaa')).toEqual({ deleted: true });
    expect(await pvrs.delete('r2-aaaa')).toEqual({ deleted: false });
  });

  it('informs about PVR changes', async () => {
    const events: InformerEvent<PodVolumeRestore>[] = [];
    const informer = pvrs.watch({ labelSelector: `${pvrLabels.restoreName}=r3`, onEvent: (event) => void events.push(event) });
    try {
      expect(await informer.synced).toBe(true);
      await pvrs.create(newPvr('r3-aaaa', 'r3'));
      await pvrs.patchStatus('r3-aaaa', { phase: 'Completed' });
      await waitFor('the Completed event', () => events.find((e) => e.type === 'MODIFIED' && e.object.status?.phase === 'Completed'), 5000);
      expect(events[0]).toMatchObject({ type: 'ADDED', object: { metadata: { name: 'r3-aaaa' } } });
      expect(informer.get('r3-aaaa', 'stowage')?.status?.phase).toBe('Completed');
    } finally {
      await informer.stop();
    }
  });
});
