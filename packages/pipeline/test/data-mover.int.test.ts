/*
 * The snapshot data mover (issue #47, docs/architecture.md#csi-snapshots-and-the-data-mover): with
 * snapshotMoveData a snapshotted volume's data goes into the repository through a DataUpload that
 * a real node agent (in this process) copies from a temporary pod's claim made from the snapshot —
 * a block-mode volume as one file — and nothing temporary is left behind; a restore brings every
 * volume back (a moved block volume through a DataDownload into a new volume handed to the
 * restored claim). Real BullMQ workers on a real redis-server, the kube-sim's snapshot controller
 * and provisioner over HTTP.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { validateRestoreRequest } from '@stowage/core';
import { createDataDownloadClient, createDataUploadClient, getVolumeSnapshotContent, type VolumeSnapshot } from '@stowage/kube';
import { SIM_SNAPSHOT_PARAMETERS, snapshotCrdsPath } from '@stowage/kube-sim';
import { type NodeAgent, openOrInitRepository, startNodeAgent } from '@stowage/node-agent';
import type { BlockPlan, RunningWorkers } from '@stowage/pipeline';
import { completedSnapshotsOf, requestBackupDeletion, startWorkers, submitBackup, submitRestore, volumeOutcomes } from '@stowage/pipeline';
import { createLogger } from '@stowage/platform';
import { createFlowProducer, QueueName } from '@stowage/queue';
import { csiStorageClass, describeTree, simClaim, simSnapshotClass, useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFinishedBackup } from './support/finished-backup.js';
import { backupSpec, namespace, node } from './support/fixtures.js';
import { BACKUP_AND_RESTORE_QUEUES, type Harness, startHarness, waitFor, waitForBackupEnd, waitForRestoreEnd } from './support/harness.js';

const DU_CRD = fileURLToPath(new URL('../../../k8s/base/crd-datauploads.yaml', import.meta.url));
const DD_CRD = fileURLToPath(new URL('../../../k8s/base/crd-datadownloads.yaml', import.meta.url));
const REPO_KEY = 'test-key-not-a-secret-0123456789abcdef';
const MiB = 1024 * 1024;
const FREEZE = ['/bin/freeze'];
const THAW = ['/bin/thaw'];
const RESTORED = ['/bin/restored'];

const objects: unknown[] = [
  namespace('shop'),
  namespace('stowage'),
  node('node-a'),
  csiStorageClass(),
  simSnapshotClass({ [SIM_SNAPSHOT_PARAMETERS.readyDelayMs]: '200' }),
  simClaim('data', [
    { path: 'db/table.bin', size: 3 * MiB, seed: 'table' },
    { path: 'db/wal.log', content: 'wal 1\n' },
  ]),
  simClaim('raw', [{ path: 'disk', size: 2 * MiB, seed: 'raw-disk' }], { spec: { volumeMode: 'Block' } }),
  // Its snapshot is kept, whatever the backup's snapshotMoveData says.
  simClaim('keep', [{ path: 'k/state.bin', size: MiB, seed: 'keep' }], { annotations: { 'stowage.dev/snapshot-move-data': 'false' } }),
  // One block: an fs-backup volume (cache), a kept snapshot (keep), a moved filesystem snapshot
  // (data) and a moved block volume (raw); a post-restore hook.
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'db-0',
      namespace: 'shop',
      uid: 'b10c0000-0000-4000-8000-000000000001',
      annotations: {
        'backup.velero.io/backup-volumes': 'cache',
        'pre.hook.backup.velero.io/command': JSON.stringify(FREEZE),
        'post.hook.backup.velero.io/command': JSON.stringify(THAW),
        'post.hook.restore.velero.io/command': JSON.stringify(RESTORED),
        'sim.stowage.dev/files': JSON.stringify({ cache: [{ path: 'c/blob', size: MiB, seed: 'cache' }] }),
      },
    },
    spec: {
      nodeName: 'node-a',
      containers: [
        {
          name: 'app',
          image: 'busybox',
          volumeMounts: [
            { name: 'data', mountPath: '/data' },
            { name: 'keep', mountPath: '/keep' },
            { name: 'cache', mountPath: '/cache' },
          ],
          volumeDevices: [{ name: 'raw', devicePath: '/dev/xvda' }],
        },
      ],
      volumes: [
        { name: 'data', persistentVolumeClaim: { claimName: 'data' } },
        { name: 'raw', persistentVolumeClaim: { claimName: 'raw' } },
        { name: 'keep', persistentVolumeClaim: { claimName: 'keep' } },
        { name: 'cache', emptyDir: {} },
      ],
    },
    status: { phase: 'Running' },
  },
];

const SNAPSHOT_POLICY = { kind: 'Inline', volumePolicies: [{ conditions: { storageClass: ['standard'] }, action: { type: 'snapshot' } }] };
const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
/** Names, types, modes, sizes and contents (a cut copies files: their times are the copy's, to the millisecond). */
const contentsOf = async (dir: string) =>
  Object.fromEntries(Object.entries(await describeTree(dir)).map(([path, e]) => [path, { ...e, mtimeMs: undefined }]));

describe('the snapshot data mover', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;
  let agent: NodeAgent | undefined;
  let repoDir: string;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({
      redisUrl: redisHandle.url,
      fixture: { objects },
      agentNodes: ['node-a'],
      materializeVolumes: 'all',
      extraManifests: [snapshotCrdsPath, DU_CRD, DD_CRD],
    });
    repoDir = await mkdtemp(join(tmpdir(), 'stowage-mover-repo-'));
    agent = await startNodeAgent({
      nodeName: 'node-a',
      kube: h.kube,
      namespace: 'stowage',
      repoDir,
      repoKey: REPO_KEY,
      kubeletRoot: join(h.sim.dataRoot, 'node-a'),
      loadConcurrency: { globalConfig: 2 },
      logger: createLogger({ level: 'silent', name: 'data-mover-test' }),
      progressIntervalMs: 100,
      rescanIntervalMs: 500,
    });
    workers = startWorkers({ deps: h.deps, queues: [...BACKUP_AND_RESTORE_QUEUES, QueueName.repository] });
  });
  afterAll(async () => {
    await workers?.close();
    await agent?.stop();
    await h?.close();
    await redisHandle?.stop();
    if (repoDir) await rm(repoDir, { recursive: true, force: true });
  });

  const volumePath = (ns: string, pod: string, volume: string) => h.sim.podVolumes(ns, pod).find((v) => v.volume === volume)?.path;
  /** What each volume of shop/db-0 held when it was backed up. */
  let before: { data: unknown; keep: unknown; cache: unknown; raw: string };

  it('backs up one block of an fs-backup volume, a kept snapshot, a moved one and a moved block volume, leaving nothing temporary', async () => {
    const name = 'moved';
    // The volumes are changed from what the fixture made them, so a restore that regenerated
    // fixture files (the simulator does for a new volume) could not pass for a real one.
    const dbDir = volumePath('shop', 'db-0', 'data')!;
    await writeFile(join(dbDir, 'db/wal.log'), 'wal 2: written after the fixture\n');
    await writeFile(join(dbDir, 'db/extra.bin'), randomBytes(64 * 1024));
    await writeFile(join(volumePath('shop', 'db-0', 'keep')!, 'k/note.txt'), 'kept snapshot, changed\n');
    await writeFile(join(volumePath('shop', 'db-0', 'cache')!, 'c/added.bin'), randomBytes(4096));
    const rawPath = volumePath('shop', 'db-0', 'raw')!;
    await writeFile(rawPath, randomBytes(2 * MiB + 512));
    // Nothing writes to them from here on: the snapshots' point in time.
    before = {
      data: await contentsOf(dbDir),
      keep: await contentsOf(volumePath('shop', 'db-0', 'keep')!),
      cache: await contentsOf(volumePath('shop', 'db-0', 'cache')!),
      raw: sha(await readFile(rawPath)),
    };

    await submitBackup(
      { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
      { name, spec: backupSpec({ snapshotMoveData: true, resourcePolicy: SNAPSHOT_POLICY }) },
    );
    expect(await waitForBackupEnd(h.deps.state, name, 90_000)).toBe('Completed');

    const finished = await readFinishedBackup(h.deps.storage, name);
    const volumes = finished.blocks.flatMap((b) => (b.plan ? volumeOutcomes(b.plan as BlockPlan, b.block) : []));
    const outcome = (volume: string) => volumes.find((v) => v.pod === 'shop/db-0' && v.volume === volume);
    const db = outcome('data');
    const raw = outcome('raw');
    const keep = outcome('keep');
    expect(db).toMatchObject({ outcome: 'snapshotted', snapshot: { method: 'moved', phase: 'Completed' } });
    expect(raw).toMatchObject({ outcome: 'snapshotted', snapshot: { method: 'moved', phase: 'Completed' } });
    expect(keep).toMatchObject({ outcome: 'snapshotted', snapshot: { method: 'kept', phase: 'Completed' } });
    expect(outcome('cache')).toMatchObject({ outcome: 'backed-up' });

    // The repository holds the moved volumes byte for byte; the block volume is one file.
    const repo = await openOrInitRepository(repoDir, REPO_KEY);
    const out = await mkdtemp(join(tmpdir(), 'stowage-mover-out-'));
    try {
      await repo.restore(db!.snapshot!.repositorySnapshotId!, join(out, 'db'));
      expect(await contentsOf(join(out, 'db'))).toEqual(before.data);
      await repo.restore(raw!.snapshot!.repositorySnapshotId!, join(out, 'raw'));
      expect(sha(await readFile(join(out, 'raw', 'disk')))).toBe(before.raw);
    } finally {
      await rm(out, { recursive: true, force: true });
    }

    // One block: the post hook started after the last cut and before either DataUpload finished
    // (it was created after the hook: data movement never holds the application frozen).
    expect(finished.blocks.filter((b) => b.pods.includes('shop/db-0'))).toHaveLength(1);
    const thaw = h.sim.execLog({ namespace: 'shop', pod: 'db-0' }).find((e) => e.command.join(' ') === THAW.join(' '))!;
    const lastCut = Math.max(db!.snapshot!.cutAt!, raw!.snapshot!.cutAt!, keep!.snapshot!.cutAt!);
    expect(Date.parse(thaw.startedAt)).toBeGreaterThanOrEqual(lastCut);
    const uploads = await createDataUploadClient(h.kube, { namespace: 'stowage' }).list();
    for (const u of uploads) expect(Date.parse(thaw.startedAt)).toBeLessThan(Date.parse(u.status!.completionTimestamp!));
    // Each DataUpload ran once on node-a; nothing temporary is left: no claim, pod or moved
    // snapshot — only the kept one, its content set to Retain.
    expect(uploads.map((u) => u.status?.phase)).toEqual(['Completed', 'Completed']);
    expect(agent!.operationStarts().filter((s) => s.kind === 'DataUpload')).toHaveLength(2);
    const claims = await h.kube.core.listNamespacedPersistentVolumeClaim({ namespace: 'stowage' });
    expect(claims.items).toHaveLength(0);
    const pods = await h.kube.core.listNamespacedPod({ namespace: 'stowage' });
    expect(pods.items).toHaveLength(0);
    const snapshotsIn = async (ns: string) =>
      (await h.kube.requestJson<{ items: VolumeSnapshot[] }>({ path: `/apis/snapshot.storage.k8s.io/v1/namespaces/${ns}/volumesnapshots` }))
        .items;
    expect((await snapshotsIn('shop')).map((v) => v.metadata.name)).toEqual([keep!.snapshot!.name]);
    expect(await snapshotsIn('stowage')).toHaveLength(0);
    const contents = await h.kube.requestJson<{ items: Array<{ spec: { deletionPolicy: string } }> }>({
      path: '/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents',
    });
    expect(contents.items.map((c) => c.spec.deletionPolicy)).toEqual(['Retain']);
  }, 120_000);

  const restore = async (name: string, backupName: string, target: string) => {
    const validation = validateRestoreRequest({ name, spec: { backupName, namespaceMapping: { shop: target } } });
    if (!validation.ok) throw new Error(JSON.stringify(validation.problems));
    await submitRestore({ restores: h.deps.restores!, connection: h.redis, queuePrefix: h.queuePrefix }, { name, spec: validation.value });
    return waitForRestoreEnd(h.deps.restores!, h.deps.storage, name, 120_000);
  };
  /** Every volume of a restored db-0 as it was backed up, byte for byte. */
  const expectRestoredVolumes = async (ns: string) => {
    const path = (volume: string) => waitFor(`${ns}/db-0 volume ${volume}`, async () => volumePath(ns, 'db-0', volume));
    expect(await contentsOf(await path('data'))).toEqual(before.data);
    expect(await contentsOf(await path('keep'))).toEqual(before.keep);
    expect(await contentsOf(await path('cache'))).toEqual(before.cache);
    expect(sha(await readFile(await path('raw')))).toBe(before.raw);
  };

  it('restores every volume of that block byte for byte: the block volume through a DataDownload, post-restore hooks after', async () => {
    const result = await restore('from-moved', 'moved', 'r1');
    expect(result.phase).toBe('Completed');
    await expectRestoredVolumes('r1');

    // The moved block volume: one DataDownload, run once on node-a, into a new volume that the
    // restored claim (waiting with a selector) took over; its reclaim policy is the class's again.
    const downloads = await createDataDownloadClient(h.kube, { namespace: 'stowage' }).list();
    expect(downloads.map((d) => [d.status?.phase, d.spec.target])).toEqual([['Completed', { namespace: 'r1', name: 'raw' }]]);
    expect(agent!.operationStarts().filter((s) => s.kind === 'DataDownload')).toHaveLength(1);
    const rawClaim = await h.kube.core.readNamespacedPersistentVolumeClaim({ namespace: 'r1', name: 'raw' });
    expect(rawClaim.status?.phase).toBe('Bound');
    const rawPv = await h.kube.core.readPersistentVolume({ name: rawClaim.spec!.volumeName! });
    expect(rawPv.spec?.persistentVolumeReclaimPolicy).toBe('Delete');
    expect(rawPv.spec?.volumeMode).toBe('Block');
    // The kept snapshot filled its claim; the moved filesystem one came back through a PVR.
    const keepClaim = await h.kube.core.readNamespacedPersistentVolumeClaim({ namespace: 'r1', name: 'keep' });
    expect(keepClaim.spec?.dataSource?.kind).toBe('VolumeSnapshot');

    // The post-restore hook ran once, after the block volume was written and the PVRs ended.
    const hooks = h.sim.execLog({ namespace: 'r1', pod: 'db-0' }).filter((e) => e.command.join(' ') === RESTORED.join(' '));
    expect(hooks).toHaveLength(1);
    const hookAt = Date.parse(hooks[0]!.startedAt);
    expect(hookAt).toBeGreaterThanOrEqual(Date.parse(downloads[0]!.status!.completionTimestamp!));
    const pvrs = await h.deps.pvrs!.list({ labelSelector: 'stowage.dev/restore-name=from-moved' });
    expect(pvrs.map((p) => [p.spec.volume, p.status?.phase]).sort()).toEqual([
      ['cache', 'Completed'],
      ['data', 'Completed'],
    ]);
    for (const pvr of pvrs) expect(hookAt).toBeGreaterThanOrEqual(Date.parse(pvr.status!.completionTimestamp!));

    // Nothing temporary is left in Stowage's namespace.
    expect((await h.kube.core.listNamespacedPersistentVolumeClaim({ namespace: 'stowage' })).items).toHaveLength(0);
    expect((await h.kube.core.listNamespacedPod({ namespace: 'stowage' })).items).toHaveLength(0);
  }, 180_000);

  it('restores a backup whose snapshots are all kept from those snapshots, byte for byte', async () => {
    await submitBackup(
      { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
      { name: 'kept', spec: backupSpec({ resourcePolicy: SNAPSHOT_POLICY }) },
    );
    expect(await waitForBackupEnd(h.deps.state, 'kept', 90_000)).toBe('Completed');
    // The claims are filled from their snapshots by the driver (a block volume too).
    const keptRestore = await restore('from-kept', 'kept', 'r2');
    expect(keptRestore.phase).toBe('Completed');
    const claims = await h.kube.core.listNamespacedPersistentVolumeClaim({ namespace: 'r2' });
    expect(claims.items.map((c) => c.spec?.dataSource?.kind)).toEqual(['VolumeSnapshot', 'VolumeSnapshot', 'VolumeSnapshot']);
    await expectRestoredVolumes('r2');
  }, 180_000);

  it('deleting a backup (the REST delete path) deletes its kept snapshots: contents and data under Delete, the data kept under Retain', async () => {
    const flowProducer = createFlowProducer({ connection: h.redis, prefix: h.queuePrefix });
    const classPath = '/apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses/sim-snap';
    const setClassPolicy = (deletionPolicy: string) =>
      h.kube.requestJson({ method: 'PATCH', path: classPath, body: { deletionPolicy }, contentType: 'application/merge-patch+json' });
    const keptOf = async (backupName: string) => (await completedSnapshotsOf(h.deps.storage, backupName)).filter((r) => !r.moveData);
    const snapshotNames = async () =>
      (
        await h.kube.requestJson<{ items: VolumeSnapshot[] }>({ path: '/apis/snapshot.storage.k8s.io/v1/namespaces/shop/volumesnapshots' })
      ).items.map((v) => v.metadata.name);
    const contentOf = (name: string) => getVolumeSnapshotContent(h.kube, name);
    try {
      // `moved` kept one snapshot (keep); its class now says Retain: the snapshot goes, its content and data stay.
      const movedKept = await keptOf('moved');
      expect(movedKept).toHaveLength(1);
      const keepContent = await contentOf(movedKept[0]!.contentName!);
      const keepHandle = keepContent!.status!.snapshotHandle!;
      await setClassPolicy('Retain');
      expect(await requestBackupDeletion({ state: h.deps.state, flowProducer }, 'moved')).toEqual({ outcome: 'deleted' });
      expect(await snapshotNames()).not.toContain(movedKept[0]!.name);
      expect(await contentOf(movedKept[0]!.contentName!)).toBeDefined();
      await expect(stat(h.sim.snapshotDataPath(keepHandle))).resolves.toBeDefined();

      // `kept` kept all three; under Delete each snapshot, its content and its data go.
      const kept = await keptOf('kept');
      expect(kept).toHaveLength(3);
      const handles = await Promise.all(kept.map(async (k) => (await contentOf(k.contentName!))!.status!.snapshotHandle!));
      await setClassPolicy('Delete');
      expect(await requestBackupDeletion({ state: h.deps.state, flowProducer }, 'kept')).toEqual({ outcome: 'deleted' });
      expect(await snapshotNames()).toEqual([]);
      for (const k of kept) expect(await contentOf(k.contentName!)).toBeUndefined();
      for (const handle of handles) {
        await waitFor(`the data of snapshot ${handle} deleted`, async () =>
          (await stat(h.sim.snapshotDataPath(handle)).catch(() => undefined)) === undefined ? true : undefined,
        );
      }
    } finally {
      await flowProducer.close();
    }
  }, 120_000);
});
