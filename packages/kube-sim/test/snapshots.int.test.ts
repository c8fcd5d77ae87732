/*
 * The simulator's CSI snapshots (snapshot-controller.ts, volume-disks.ts) through the real
 * client-node over HTTP: the external-snapshotter's phases (bound content, creationTime at the cut,
 * readyToUse after the class's delay, error), point-in-time contents, block volumes as one file, a
 * claim provisioned from a snapshot, deletionPolicy, pre-provisioned contents, and volumes whose
 * bytes follow them from pod to pod.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIM_SNAPSHOT_PARAMETERS, type Simulator, snapshotCrdsPath, startSimulator } from '../src/index.js';
import { apiExceptionBody, kubeConfigFor } from './sim-helpers.js';

const MiB = 1024 * 1024;
const group = 'snapshot.storage.k8s.io';
const version = 'v1';

const claim = (name: string, spec: Record<string, unknown> = {}, files?: unknown) => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: { name, namespace: 'app', ...(files ? { annotations: { 'sim.stowage.dev/files': JSON.stringify(files) } } : {}) },
  spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } }, storageClassName: 'standard', ...spec },
});

const fixture = {
  include: [snapshotCrdsPath],
  objects: [
    { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } },
    {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: 'standard', annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } },
      provisioner: 'sim.csi.stowage.dev',
      reclaimPolicy: 'Delete',
    },
    {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: 'nfs' },
      provisioner: 'nfs.csi.example',
      reclaimPolicy: 'Delete',
    },
    {
      apiVersion: `${group}/${version}`,
      kind: 'VolumeSnapshotClass',
      metadata: { name: 'sim-snap', annotations: { 'snapshot.storage.kubernetes.io/is-default-class': 'true' } },
      driver: 'sim.csi.stowage.dev',
      deletionPolicy: 'Delete',
      parameters: { [SIM_SNAPSHOT_PARAMETERS.readyDelayMs]: '400' },
    },
    {
      apiVersion: `${group}/${version}`,
      kind: 'VolumeSnapshotClass',
      metadata: { name: 'sim-retain' },
      driver: 'sim.csi.stowage.dev',
      deletionPolicy: 'Retain',
    },
    {
      apiVersion: `${group}/${version}`,
      kind: 'VolumeSnapshotClass',
      metadata: { name: 'sim-broken' },
      driver: 'sim.csi.stowage.dev',
      deletionPolicy: 'Delete',
      parameters: { [SIM_SNAPSHOT_PARAMETERS.failCut]: 'the provider refused: quota exceeded' },
    },
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'app' } },
    claim('data', {}, [
      { path: 'db/table.bin', size: 2 * MiB, seed: 'table' },
      { path: 'db/wal.log', content: 'wal 1\n' },
    ]),
    claim('raw', { volumeMode: 'Block' }, [{ path: 'disk', size: 3 * MiB, seed: 'raw-disk' }]),
    claim('shared-nfs', { storageClassName: 'nfs' }),
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'db-0', namespace: 'app' },
      spec: {
        nodeName: 'n1',
        containers: [
          {
            name: 'db',
            image: 'db',
            volumeMounts: [{ name: 'data', mountPath: '/data' }],
            volumeDevices: [{ name: 'raw', devicePath: '/dev/xvdb' }],
          },
        ],
        volumes: [
          { name: 'data', persistentVolumeClaim: { claimName: 'data' } },
          { name: 'raw', persistentVolumeClaim: { claimName: 'raw' } },
          { name: 'nfs', persistentVolumeClaim: { claimName: 'shared-nfs' } },
        ],
      },
      status: { phase: 'Running' },
    },
  ],
};

type Obj = { metadata: { name: string; uid?: string }; spec?: Record<string, unknown>; status?: Record<string, unknown> };

async function eventually<T>(read: () => Promise<T>, accept: (value: T) => boolean, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (accept(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last value: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function digestOfTree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string, rel: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const st = statSync(path);
      const key = rel ? `${rel}/${name}` : name;
      if (st.isDirectory()) walk(path, key);
      else out[key] = `${(st.mode & 0o777).toString(8)}:${createHash('sha256').update(readFileSync(path)).digest('hex')}`;
    }
  };
  walk(root, '');
  return out;
}

const sha = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

describe('simulated CSI snapshots (client-node over HTTP)', () => {
  let sim: Simulator;
  let core: k8s.CoreV1Api;
  let custom: k8s.CustomObjectsApi;

  beforeAll(async () => {
    sim = await startSimulator({ fixture });
    const kc = kubeConfigFor(sim);
    core = kc.makeApiClient(k8s.CoreV1Api);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
  });
  afterAll(async () => {
    await sim?.close();
  });

  const createSnapshot = (name: string, source: Record<string, string>, className?: string) =>
    custom.createNamespacedCustomObject({
      group,
      version,
      namespace: 'app',
      plural: 'volumesnapshots',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'VolumeSnapshot',
        metadata: { name },
        spec: { source, ...(className ? { volumeSnapshotClassName: className } : {}) },
      },
    }) as Promise<Obj>;
  const readSnapshot = (name: string) =>
    custom.getNamespacedCustomObject({ group, version, namespace: 'app', plural: 'volumesnapshots', name }) as Promise<Obj>;
  const readContent = (name: string) =>
    custom.getClusterCustomObject({ group, version, plural: 'volumesnapshotcontents', name }) as Promise<Obj>;
  const volumeOf = (pod: string, volume: string) => sim.podVolumes('app', pod).find((v) => v.volume === volume)!;

  it('cuts a point-in-time copy: bound content first, creationTime once the copy is done, readyToUse after the delay', async () => {
    const volume = volumeOf('db-0', 'data');
    const before = digestOfTree(volume.path);
    const created = await createSnapshot('data-snap', { persistentVolumeClaimName: 'data' });
    expect(created.status).toBeUndefined();
    const cut = await eventually(
      () => readSnapshot('data-snap'),
      (s) => typeof s.status?.creationTime === 'string',
      'the cut',
    );
    // the application writes again after the cut: the snapshot keeps what was there at the cut
    writeFileSync(join(volume.path, 'db/wal.log'), 'wal 2, after the cut\n');
    expect(cut.status).toMatchObject({ boundVolumeSnapshotContentName: `snapcontent-${created.metadata.uid}`, readyToUse: false });
    const content = await readContent(`snapcontent-${created.metadata.uid}`);
    expect(content.spec).toMatchObject({
      deletionPolicy: 'Delete',
      driver: 'sim.csi.stowage.dev',
      volumeSnapshotClassName: 'sim-snap',
      sourceVolumeMode: 'Filesystem',
      volumeSnapshotRef: { namespace: 'app', name: 'data-snap', uid: created.metadata.uid },
    });
    const handle = content.status?.snapshotHandle as string;
    expect(typeof content.status?.creationTime).toBe('number');
    expect(Math.abs(Number(content.status?.creationTime) / 1e6 - Date.parse(cut.status?.creationTime as string))).toBeLessThan(1000);
    expect(digestOfTree(sim.snapshotDataPath(handle))).toEqual(before);
    const ready = await eventually(
      () => readSnapshot('data-snap'),
      (s) => s.status?.readyToUse === true,
      'readyToUse',
    );
    expect(ready.status?.restoreSize).toBe(String(1024 * MiB));
    expect(digestOfTree(sim.snapshotDataPath(handle))).toEqual(before);
    // The data root's filesystem decides the mode; the freeze benchmark's reflink run pins it
    // (STOWAGE_EXPECT_CUT_MODE=reflink with TMPDIR on XFS) so this test shows reflinks keep the cut.
    expect(await sim.cutMode()).toBe(process.env.STOWAGE_EXPECT_CUT_MODE ?? (await sim.cutMode()));
    expect(await sim.cutMode()).toMatch(/^(copy|reflink)$/);
  });

  it('refuses a snapshot that names both sources or none (oneOf)', async () => {
    for (const source of [{ persistentVolumeClaimName: 'data', volumeSnapshotContentName: 'x' }, {}] as Record<string, string>[]) {
      const error = await createSnapshot('bad', source).catch((e: unknown) => e);
      const body = apiExceptionBody(error);
      expect(body.code).toBe(422);
      expect(body.details?.causes?.[0]?.field).toBe('spec.source');
    }
  });

  it('sets status.error, never a creationTime, when there is no class for the driver, a class fails, or the claim is missing', async () => {
    await createSnapshot('nfs-snap', { persistentVolumeClaimName: 'shared-nfs' });
    await createSnapshot('broken-snap', { persistentVolumeClaimName: 'data' }, 'sim-broken');
    await createSnapshot('ghost-snap', { persistentVolumeClaimName: 'ghost' });
    const messages: Record<string, string> = {};
    for (const name of ['nfs-snap', 'broken-snap', 'ghost-snap']) {
      const snapshot = await eventually(
        () => readSnapshot(name),
        (s) => s.status?.error !== undefined,
        `${name} error`,
      );
      expect(snapshot.status?.creationTime).toBeUndefined();
      expect(snapshot.status?.readyToUse).toBe(false);
      messages[name] = (snapshot.status?.error as { message: string } | undefined)?.message ?? '';
    }
    expect(messages['nfs-snap']).toMatch(/cannot find default snapshot class for CSI driver nfs\.csi\.example/);
    expect(messages['broken-snap']).toMatch(/quota exceeded/);
    expect(messages['ghost-snap']).toMatch(/"ghost" not found/);
  });

  it('snapshots a block volume as its one file, and provisions a claim from a snapshot with its bytes', async () => {
    const device = volumeOf('db-0', 'raw');
    expect(device.block).toBe(true);
    expect(statSync(device.path).size).toBe(3 * MiB);
    const rawSum = sha(device.path);
    const snapshot = await createSnapshot('raw-snap', { persistentVolumeClaimName: 'raw' }, 'sim-retain');
    await eventually(
      () => readSnapshot('raw-snap'),
      (s) => s.status?.readyToUse === true,
      'raw snapshot ready',
    );
    const content = await readContent(`snapcontent-${snapshot.metadata.uid}`);
    expect(content.spec?.sourceVolumeMode).toBe('Block');
    expect(sha(sim.snapshotDataPath(content.status?.snapshotHandle as string))).toBe(rawSum);

    // restored block and filesystem claims, mounted by a new pod
    await core.createNamespacedPersistentVolumeClaim({
      namespace: 'app',
      body: claim('raw-restored', {
        volumeMode: 'Block',
        dataSource: { apiGroup: group, kind: 'VolumeSnapshot', name: 'raw-snap' },
      }) as k8s.V1PersistentVolumeClaim,
    });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: 'app',
      body: claim('data-restored', {
        dataSource: { apiGroup: group, kind: 'VolumeSnapshot', name: 'data-snap' },
      }) as k8s.V1PersistentVolumeClaim,
    });
    for (const name of ['raw-restored', 'data-restored']) {
      await eventually(
        () => core.readNamespacedPersistentVolumeClaim({ namespace: 'app', name }),
        (c) => c.status?.phase === 'Bound',
        `${name} bound`,
      );
    }
    await core.createNamespacedPod({
      namespace: 'app',
      body: {
        metadata: { name: 'restored', namespace: 'app' },
        spec: {
          containers: [
            {
              name: 'c',
              image: 'c',
              volumeMounts: [{ name: 'data', mountPath: '/d' }],
              volumeDevices: [{ name: 'raw', devicePath: '/dev/b' }],
            },
          ],
          volumes: [
            { name: 'data', persistentVolumeClaim: { claimName: 'data-restored' } },
            { name: 'raw', persistentVolumeClaim: { claimName: 'raw-restored' } },
          ],
        },
      },
    });
    const restoredRaw = await eventually(
      async () => volumeOf('restored', 'raw'),
      (v) => v !== undefined && existsSync(v.path) && statSync(v.path).size === 3 * MiB,
      'the restored block volume',
    );
    expect(sha(restoredRaw.path)).toBe(rawSum);
    const restoredData = await eventually(
      async () => volumeOf('restored', 'data'),
      (v) => v !== undefined && existsSync(join(v.path, 'db/wal.log')),
      'the restored filesystem volume',
    );
    // the snapshot was cut before the application wrote "wal 2"
    expect(readFileSync(join(restoredData.path, 'db/wal.log'), 'utf8')).toBe('wal 1\n');
    expect(statSync(join(restoredData.path, 'db/table.bin')).size).toBe(2 * MiB);
  });

  it('keeps a volume’s bytes when its pod goes, for the next pod that mounts it; reclaims the volume with its claim', async () => {
    const first = volumeOf('restored', 'data');
    writeFileSync(join(first.path, 'written-by-first-pod'), 'hello');
    await core.deleteNamespacedPod({ namespace: 'app', name: 'restored' });
    await eventually(async () => existsSync(join(sim.dataRoot, '_disks', first.pvName!)), Boolean, 'the detached disk');
    await core.createNamespacedPod({
      namespace: 'app',
      body: {
        metadata: { name: 'second', namespace: 'app' },
        spec: {
          containers: [{ name: 'c', image: 'c', volumeMounts: [{ name: 'data', mountPath: '/d' }] }],
          volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data-restored' } }],
        },
      },
    });
    const second = await eventually(
      async () => volumeOf('second', 'data'),
      (v) => v !== undefined && existsSync(join(v.path, 'written-by-first-pod')),
      'the volume in the second pod',
    );
    expect(readFileSync(join(second.path, 'written-by-first-pod'), 'utf8')).toBe('hello');
    await core.deleteNamespacedPod({ namespace: 'app', name: 'second' });
    await core.deleteNamespacedPersistentVolumeClaim({ namespace: 'app', name: 'data-restored' });
    await eventually(
      () =>
        core.readPersistentVolume({ name: second.pvName! }).then(
          () => true,
          () => false,
        ),
      (present) => !present,
      'the volume deleted with its claim (reclaim policy Delete)',
    );
    await eventually(
      async () => existsSync(join(sim.dataRoot, '_disks', second.pvName!)),
      (present) => !present,
      'the disk removed',
    );
  });

  it('deletes the content and its data with the snapshot under Delete, keeps them under Retain', async () => {
    const deleted = await readSnapshot('data-snap');
    const contentName = deleted.status?.boundVolumeSnapshotContentName as string;
    const handle = (await readContent(contentName)).status?.snapshotHandle as string;
    await custom.deleteNamespacedCustomObject({ group, version, namespace: 'app', plural: 'volumesnapshots', name: 'data-snap' });
    await eventually(
      () =>
        readContent(contentName).then(
          () => true,
          () => false,
        ),
      (present) => !present,
      'the content deleted',
    );
    await eventually(
      async () => existsSync(sim.snapshotDataPath(handle)),
      (present) => !present,
      'the snapshot data removed',
    );

    const kept = await readSnapshot('raw-snap');
    const keptContent = kept.status?.boundVolumeSnapshotContentName as string;
    await custom.deleteNamespacedCustomObject({ group, version, namespace: 'app', plural: 'volumesnapshots', name: 'raw-snap' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const content = await readContent(keptContent);
    expect(existsSync(sim.snapshotDataPath(content.status?.snapshotHandle as string))).toBe(true);
  });

  it('binds a pre-provisioned snapshot to a content naming an existing snapshot handle, and fails one naming none', async () => {
    const retained = (
      (await custom.listClusterCustomObject({ group, version, plural: 'volumesnapshotcontents' })) as { items: Obj[] }
    ).items.find((c) => c.spec?.deletionPolicy === 'Retain')!;
    const handle = retained.status?.snapshotHandle as string;
    for (const [name, snapshotHandle] of [
      ['static-ok', handle],
      ['static-missing', 'snapshot-does-not-exist'],
    ] as const) {
      await custom.createClusterCustomObject({
        group,
        version,
        plural: 'volumesnapshotcontents',
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'VolumeSnapshotContent',
          metadata: { name },
          spec: {
            deletionPolicy: 'Retain',
            driver: 'sim.csi.stowage.dev',
            source: { snapshotHandle },
            sourceVolumeMode: 'Block',
            volumeSnapshotRef: { namespace: 'app', name },
          },
        },
      });
      await createSnapshot(name, { volumeSnapshotContentName: name });
    }
    const ok = await eventually(
      () => readSnapshot('static-ok'),
      (s) => s.status?.readyToUse === true,
      'the pre-provisioned snapshot ready',
    );
    expect(ok.status).toMatchObject({ boundVolumeSnapshotContentName: 'static-ok', restoreSize: String(3 * MiB) });
    expect(typeof ok.status?.creationTime).toBe('string');
    const missing = await eventually(
      () => readSnapshot('static-missing'),
      (s) => s.status?.error !== undefined,
      'the pre-provisioned snapshot error',
    );
    expect((missing.status?.error as { message: string } | undefined)?.message).toMatch(/snapshot-does-not-exist not found/);
  });

  it('never provisions a claim with a selector; binds it to an Available volume whose labels match', async () => {
    await core.createNamespacedPersistentVolumeClaim({
      namespace: 'app',
      body: claim('selected', { selector: { matchLabels: { 'restore-of': 'x' } } }) as k8s.V1PersistentVolumeClaim,
    });
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect((await core.readNamespacedPersistentVolumeClaim({ namespace: 'app', name: 'selected' })).status?.phase).not.toBe('Bound');
    await core.createPersistentVolume({
      body: {
        metadata: { name: 'pv-for-selected', labels: { 'restore-of': 'x' } },
        spec: {
          capacity: { storage: '1Gi' },
          accessModes: ['ReadWriteOnce'],
          storageClassName: 'standard',
          persistentVolumeReclaimPolicy: 'Delete',
          csi: { driver: 'sim.csi.stowage.dev', volumeHandle: 'pv-for-selected' },
        },
      },
    });
    const bound = await eventually(
      () => core.readNamespacedPersistentVolumeClaim({ namespace: 'app', name: 'selected' }),
      (c) => c.status?.phase === 'Bound',
      'the selected claim bound',
    );
    expect(bound.spec?.volumeName).toBe('pv-for-selected');
  });
});
