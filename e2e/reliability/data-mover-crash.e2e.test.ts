/*
 * The snapshot data mover through restarts (issue #47, docs/architecture.md#csi-snapshots-and-the-data-mover),
 * real processes under their own identities: a node agent SIGKILLed mid-upload, and a worker
 * SIGKILLed between a snapshot's cut and its upload. Either way the backup completes, each moved
 * volume is in the repository once (one repository snapshot per volume: nothing uploaded twice
 * into it), each DataUpload was created once, and no temporary claim, pod, VolumeSnapshot or
 * content is left behind.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDataUploadClient, dataMoverLabels, type VolumeSnapshot } from '../../packages/kube/src/index.js';
import { SIM_SNAPSHOT_PARAMETERS, snapshotCrdsPath } from '../../packages/kube-sim/src/index.js';
import { csiStorageClass, simClaim, simSnapshotClass } from '../../packages/testing/src/index.js';
import { openOrInitRepository } from '../../services/node-agent/src/index.js';
import { execsOf, FREEZE, namespace, node, UNFREEZE } from './support/fixtures.js';
import { DATA_UPLOAD_CRD_PATH, type ServiceProcess, type Stack, startStack, waitFor, waitForBackupEnd } from './support/stack.js';

const MiB = 1024 * 1024;
const SNAPSHOTS = '/apis/snapshot.storage.k8s.io/v1';

const fixture = {
  objects: [
    namespace('shop'),
    namespace('stowage'),
    node('node-a'),
    csiStorageClass(),
    // Cut at once, ready to use only when the test says (a provider's upload): the window between
    // cut and upload is the test's to choose, whatever the machine's load.
    simSnapshotClass({ [SIM_SNAPSHOT_PARAMETERS.holdReady]: 'true' }),
    // 6 MiB: at ~1 MiB/s its upload lasts seconds, long enough to be cut off.
    simClaim('data', [{ path: 'chunk-{i}.bin', size: 256 * 1024, count: 24, seed: 'data-{i}' }]),
    simClaim('raw', [{ path: 'disk', size: 2 * MiB, seed: 'raw-disk' }], { spec: { volumeMode: 'Block' } }),
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: 'db-0',
        namespace: 'shop',
        uid: 'd4700000-0000-4000-8000-000000000001',
        annotations: {
          'pre.hook.backup.velero.io/command': JSON.stringify(FREEZE),
          'post.hook.backup.velero.io/command': JSON.stringify(UNFREEZE),
        },
      },
      spec: {
        nodeName: 'node-a',
        containers: [
          {
            name: 'app',
            image: 'busybox',
            volumeMounts: [{ name: 'data', mountPath: '/data' }],
            volumeDevices: [{ name: 'raw', devicePath: '/dev/xvda' }],
          },
        ],
        volumes: [
          { name: 'data', persistentVolumeClaim: { claimName: 'data' } },
          { name: 'raw', persistentVolumeClaim: { claimName: 'raw' } },
        ],
      },
      status: { phase: 'Running' },
    },
  ],
};
const MOVED_VOLUMES = 2; // data (a filesystem) and raw (a block device)

describe('the snapshot data mover survives SIGKILLs', () => {
  let stack: Stack;
  let api: ServiceProcess;
  let worker: ServiceProcess;
  let agent: ServiceProcess;

  beforeAll(async () => {
    stack = await startStack({ fixture, extraManifests: [snapshotCrdsPath, DATA_UPLOAD_CRD_PATH] });
    [api, worker, agent] = await Promise.all([
      stack.spawn('api', 'api'),
      stack.spawn('worker', 'worker-1'),
      stack.spawn('node-agent', 'agent-1', stack.agentEnv('node-a', { STOWAGE_BANDWIDTH_LIMIT: '1MiB' })),
    ]);
    await waitFor('node-a heartbeat', async () => ((await stack.agents.nodesWithAgent()).has('node-a') ? true : undefined), 20_000);
  }, 180_000);

  afterAll(async () => {
    await stack?.close();
  });

  const uploads = () => createDataUploadClient(stack.kube, { namespace: 'stowage' });
  const uploadsOf = (backup: string) => uploads().list({ labelSelector: `${dataMoverLabels.backupName}=${backup}` });
  const submit = async (name: string) => {
    const res = await fetch(`http://127.0.0.1:${api.port}/v1/backups`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, spec: { includedNamespaces: ['shop'], snapshotVolumes: true, snapshotMoveData: true } }),
    });
    expect(res.status, await res.clone().text()).toBe(201);
  };

  /** Both volumes' snapshots of the backup cut, and not ready to use (held by the simulator). */
  const waitForCuts = (backup: string) =>
    waitFor(
      'the snapshots cut',
      async () => {
        const snaps = await stack.kube.requestJson<{ items: VolumeSnapshot[] }>({ path: `${SNAPSHOTS}/namespaces/shop/volumesnapshots` });
        const ours = snaps.items.filter((s) => s.metadata.labels?.['stowage.dev/backup-name'] === backup);
        return ours.length === MOVED_VOLUMES && ours.every((s) => s.status?.creationTime && s.status.readyToUse !== true)
          ? true
          : undefined;
      },
      120_000,
      50,
    );

  /** What every run must leave: the backup whole, each volume once in the repository, nothing temporary. */
  async function expectMovedOnce(name: string, since: number) {
    const rec = await waitForBackupEnd(stack.state, name, 180_000);
    expect(rec.phase).toBe('Completed');
    const counters = await stack.state.counters(name);
    expect(counters.snapshotsCompleted).toBe(MOVED_VOLUMES);
    expect(counters.snapshotsFailed ?? 0).toBe(0);
    // One DataUpload per volume (a second create is a 409), each Completed.
    const done = await uploadsOf(name);
    expect(done.map((u) => [u.spec.volume, u.spec.volumeMode, u.status?.phase]).sort()).toEqual([
      ['data', 'Block', 'Completed'],
      ['data', 'Filesystem', 'Completed'],
    ]);
    // Nothing uploaded twice into the snapshot: one repository snapshot per moved volume, each
    // the one its DataUpload recorded.
    const repo = await openOrInitRepository(join(stack.storageDir, 'repository'), stack.repoKey);
    try {
      const mine = (await repo.listSnapshots()).filter((s) => s.tags.backup === name);
      expect(mine).toHaveLength(MOVED_VOLUMES);
      expect(mine.map((s) => s.id).sort()).toEqual(done.map((u) => u.status?.snapshotID).sort());
    } finally {
      await repo.close();
    }
    // Nothing temporary is left: no claim or pod in Stowage's namespace, no snapshot or content.
    expect((await stack.kube.core.listNamespacedPersistentVolumeClaim({ namespace: 'stowage' })).items).toHaveLength(0);
    expect((await stack.kube.core.listNamespacedPod({ namespace: 'stowage' })).items).toHaveLength(0);
    for (const ns of ['shop', 'stowage']) {
      const snaps = await stack.kube.requestJson<{ items: VolumeSnapshot[] }>({ path: `${SNAPSHOTS}/namespaces/${ns}/volumesnapshots` });
      expect(snaps.items).toHaveLength(0);
    }
    const contents = await stack.kube.requestJson<{ items: unknown[] }>({ path: `${SNAPSHOTS}/volumesnapshotcontents` });
    expect(contents.items).toHaveLength(0);
    // The post hook ran once, after the cuts (data movement never holds the application frozen).
    const posts = execsOf(stack, 'shop', 'db-0', UNFREEZE, since);
    expect(posts).toHaveLength(1);
    expect(posts[0]?.exitCode).toBe(0);
  }

  it('a node agent SIGKILLed mid-upload: a new one finishes the upload, once', async () => {
    const since = Date.now();
    await submit('agent-killed');
    await waitForCuts('agent-killed');
    expect(stack.sim.releaseSnapshots()).toBe(MOVED_VOLUMES);
    const copying = await waitFor(
      'a DataUpload copying',
      async () =>
        (await uploadsOf('agent-killed')).find(
          (u) => u.status?.phase === 'InProgress' && (u.status.progress?.bytesDone ?? 0) > 0 && u.spec.volumeMode !== 'Block',
        ),
      120_000,
    );
    await agent.killHard();
    // Nothing moves it while no agent runs.
    const stuck = await uploads().get(copying.metadata.name);
    expect(stuck?.status?.phase).toBe('InProgress');
    agent = await stack.spawn('node-agent', 'agent-2', stack.agentEnv('node-a', { STOWAGE_BANDWIDTH_LIMIT: '8MiB' }));
    await expectMovedOnce('agent-killed', since);
  }, 300_000);

  it('a worker SIGKILLed between the cut and the upload: another worker moves the data, once', async () => {
    const since = Date.now();
    await submit('worker-killed');
    // Cut (creationTime set) and not yet ready to use: no DataUpload can exist yet.
    await waitForCuts('worker-killed');
    // The post hooks ran at the cut and their run is recorded: a hook cut off mid-run would run again
    // (at least once, by design), so the kill comes after the record, while the data still waits.
    await waitFor(
      'the post hooks recorded as run at the cut',
      async () => {
        const blocks = await stack.state.getBlocks('worker-killed', await stack.state.blockIds('worker-killed'));
        return blocks.some((b) => b?.postHooksDone !== undefined) ? true : undefined;
      },
      120_000,
      50,
    );
    await worker.killHard();
    expect(await uploadsOf('worker-killed')).toHaveLength(0);
    worker = await stack.spawn('worker', 'worker-2');
    expect(stack.sim.releaseSnapshots()).toBe(MOVED_VOLUMES);
    await expectMovedOnce('worker-killed', since);
  }, 300_000);
});
