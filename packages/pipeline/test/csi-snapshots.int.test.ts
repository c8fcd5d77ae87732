/*
 * CSI snapshots in a block (issue #47, docs/architecture.md#csi-snapshots-and-the-data-mover):
 * the item-block job creates a VolumeSnapshot per snapshotted volume after the pre hooks, the
 * block's post hooks run once every snapshot is cut (`creationTime`) — not when it is ready to use —
 * and a volume a policy says to snapshot whose driver has no VolumeSnapshotClass is an error naming
 * it. Real BullMQ workers on a real redis-server, the kube-sim's snapshot controller over HTTP.
 */
import { getVolumeSnapshot, getVolumeSnapshotContent, type VolumeSnapshot } from '@stowage/kube';
import { SIM_SNAPSHOT_PARAMETERS, snapshotCrdsPath } from '@stowage/kube-sim';
import type { BlockPlan, RunningWorkers } from '@stowage/pipeline';
import { startWorkers, submitBackup, volumeOutcomes } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { csiStorageClass, simClaim, simSnapshotClass, useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFinishedBackup } from './support/finished-backup.js';
import { backupSpec, namespace, node, pod } from './support/fixtures.js';
import { type Harness, startHarness, waitFor, waitForBackupEnd } from './support/harness.js';

const QUEUES = [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks];
const FREEZE = ['/bin/freeze'];
const THAW = ['/bin/thaw'];
const MiB = 1024 * 1024;

const objects: unknown[] = [
  namespace('shop'),
  namespace('stowage'),
  node('node-a'),
  csiStorageClass(),
  csiStorageClass('nfs', 'nfs.csi.example'),
  // Ready to use only when the test says (it plays the provider's upload): the hooks must not wait for it.
  simSnapshotClass({ [SIM_SNAPSHOT_PARAMETERS.readyDelayMs]: '3600000' }, 'velero-label'),
  simClaim('data', [{ path: 'db/table.bin', size: 2 * MiB, seed: 'table' }]),
  simClaim('shared', [{ path: 'x', content: 'nfs\n' }], { storageClassName: 'nfs' }),
  pod({
    name: 'db-0',
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }],
    annotations: {
      'pre.hook.backup.velero.io/command': JSON.stringify(FREEZE),
      'post.hook.backup.velero.io/command': JSON.stringify(THAW),
    },
  }),
  pod({ name: 'nfs-0', volumes: [{ name: 'files', persistentVolumeClaim: { claimName: 'shared' } }] }),
];

const snapshotPolicy = {
  kind: 'Inline',
  volumePolicies: [{ conditions: { storageClass: ['standard', 'nfs'] }, action: { type: 'snapshot' } }],
};

describe('CSI snapshots in a block', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({
      redisUrl: redisHandle.url,
      fixture: { objects },
      agentNodes: ['node-a'],
      materializeVolumes: 'all',
      extraManifests: [snapshotCrdsPath],
    });
    workers = startWorkers({ deps: h.deps, queues: QUEUES });
  });
  afterAll(async () => {
    await workers?.close();
    await h?.close();
    await redisHandle?.stop();
  });

  it('runs the post hook at the cut, before the snapshot is ready; a volume whose driver has no class fails the backup naming it', async () => {
    const name = 'snap-cut';
    await submitBackup(
      { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
      { name, spec: backupSpec({ resourcePolicy: snapshotPolicy }) },
    );
    // The post hook runs while the snapshot is cut but not ready to use.
    const thaw = await waitFor('the post hook', async () =>
      h.sim.execLog({ namespace: 'shop', pod: 'db-0' }).find((e) => e.command.join(' ') === THAW.join(' ')),
    );
    const freeze = h.sim.execLog({ namespace: 'shop', pod: 'db-0' }).find((e) => e.command.join(' ') === FREEZE.join(' '));
    const snapshots = await h.kube.requestJson<{ items: VolumeSnapshot[] }>({
      path: '/apis/snapshot.storage.k8s.io/v1/namespaces/shop/volumesnapshots',
    });
    expect(snapshots.items).toHaveLength(1);
    const snapshot = snapshots.items[0]!;
    expect(snapshot.spec.volumeSnapshotClassName).toBe('sim-snap');
    expect(snapshot.spec.source.persistentVolumeClaimName).toBe('data');
    expect(snapshot.status?.readyToUse).toBe(false);
    const content = await getVolumeSnapshotContent(h.kube, snapshot.status!.boundVolumeSnapshotContentName!);
    const cutAtMs = Math.floor(content!.status!.creationTime! / 1e6);
    // pre hook ended → snapshot created → cut → post hook started
    expect(Date.parse(freeze!.endedAt!)).toBeLessThanOrEqual(Date.parse(snapshot.metadata.creationTimestamp!) + 999);
    expect(Date.parse(thaw.startedAt)).toBeGreaterThanOrEqual(cutAtMs);
    expect((await h.deps.state.getBackup(name))?.phase).toBe('InProgress');

    // The provider finishes its upload: ready to use. The backup completes its volume then.
    for (const [path, body] of [
      [`/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents/${content!.metadata.name}/status`, { status: { readyToUse: true } }],
      [
        `/apis/snapshot.storage.k8s.io/v1/namespaces/shop/volumesnapshots/${snapshot.metadata.name}/status`,
        { status: { readyToUse: true } },
      ],
    ] as const) {
      await h.kube.requestJson({ method: 'PATCH', path, body, contentType: 'application/merge-patch+json' });
    }
    expect(await waitForBackupEnd(h.deps.state, name)).toBe('PartiallyFailed');
    // The snapshot names its block, and the worker's VolumeSnapshot informer woke the parked
    // post-hooks job when it was ready (a watch, not a poll every second).
    expect(snapshot.metadata.annotations?.['stowage.dev/block']).toBeTruthy();
    expect(workers!.pipeline.runtime.snapshotHub?.promotions).toBeGreaterThanOrEqual(1);

    const finished = await readFinishedBackup(h.deps.storage, name);
    const errors = finished.logs.filter((l) => l.level === 'error').map((l) => l.msg);
    expect(errors.join('\n')).toMatch(/pods\/shop\/nfs-0 volume files.*no VolumeSnapshotClass exists for its CSI driver nfs\.csi\.example/);
    expect(errors).toHaveLength(1);
    const volumes = finished.blocks.flatMap((b) => (b.plan ? volumeOutcomes(b.plan as BlockPlan, b.block) : []));
    const db = volumes.find((v) => v.pod === 'shop/db-0');
    expect(db).toMatchObject({
      outcome: 'snapshotted',
      snapshot: { method: 'kept', className: 'sim-snap', phase: 'Completed', cutAt: cutAtMs },
    });
    expect(volumes.find((v) => v.pod === 'shop/nfs-0')).toMatchObject({ outcome: 'error' });
    // Kept: the snapshot stays, and its content outlives it (Retain).
    expect((await getVolumeSnapshot(h.kube, 'shop', snapshot.metadata.name))?.status?.readyToUse).toBe(true);
    expect((await getVolumeSnapshotContent(h.kube, content!.metadata.name))?.spec.deletionPolicy).toBe('Retain');
    const types = finished.events.map((e) => e.type);
    expect(types.indexOf('snapshot.cut')).toBeLessThan(types.indexOf('hook.started', types.indexOf('snapshot.created')));
  });
});
