/*
 * What a restore does with a backup's CSI snapshots (docs/architecture.md#csi-snapshots-and-the-data-mover):
 * - a **moved** snapshot's data is in the repository: the volume is restored like an fs-backup one —
 *   its claim reprovisioned, a PodVolumeRestore into the restored pod's new volume; a block-mode
 *   one is written into a new volume by a DataDownload, which then binds to the restored claim
 *   (block-downloads.ts);
 * - a **kept** snapshot is still at the provider: a VolumeSnapshotContent naming its handle
 *   (pre-provisioned, Retain) and a VolumeSnapshot bound to it are made in the target namespace,
 *   and the claim is restored with `dataSource` naming that snapshot (the driver fills the new
 *   volume from it); its old PersistentVolume is not restored.
 */
import { type BackedUpPodVolume, hashParts, objectKey, type RestoreItem } from '@stowage/core';
import {
  createVolumeSnapshot,
  createVolumeSnapshotContent,
  isKubeError,
  type KubeClients,
  KubeErrorCodes,
  snapshotGroup,
} from '@stowage/kube';
import type { BackupStorage } from '@stowage/storage';
import { blockSnapshots, type SnapshotStateRecord } from '../snapshots/block-snapshots.js';
import { BackupArchiveReader } from '../state/backup-archive.js';

/** The snapshots of a finished backup that completed (read from its archived blocks). */
export async function completedSnapshotsOf(storage: Pick<BackupStorage, 'getObject'>, backupName: string): Promise<SnapshotStateRecord[]> {
  const reader = new BackupArchiveReader(storage);
  const manifest = await reader.manifest(backupName);
  if (!manifest) return [];
  const out: SnapshotStateRecord[] = [];
  const page = 500;
  for (let offset = 0; offset < manifest.blocks.count; offset += page) {
    for (const block of await reader.blocks(manifest, offset, page)) {
      for (const r of blockSnapshots(block.block)) if (r.phase === 'Completed') out.push(r);
    }
  }
  return out;
}

/** Moved snapshots as the pod volumes they restore into (the fs-backup restore path). */
export function movedAsPodVolumes(snapshots: readonly SnapshotStateRecord[]): BackedUpPodVolume[] {
  return snapshots.flatMap((r) =>
    r.moveData && r.repositorySnapshotId && r.volumeMode !== 'Block'
      ? [{ podNamespace: r.namespace, podName: r.pod, volume: r.volume, phase: 'Completed', snapshotID: r.repositorySnapshotId }]
      : [],
  );
}

/** Moved block-mode snapshots by the claim they were taken of (`<ns>/<pvc>` as backed up): written back through DataDownloads. */
export function movedBlockByClaim(snapshots: readonly SnapshotStateRecord[]): Map<string, SnapshotStateRecord> {
  return new Map(
    snapshots
      .filter((r) => r.moveData && r.repositorySnapshotId && r.volumeMode === 'Block')
      .map((r) => [objectKey(r.namespace, r.pvc), r]),
  );
}

/** Kept snapshots by the claim they were taken of (`<ns>/<pvc>` as backed up). */
export function keptByClaim(snapshots: readonly SnapshotStateRecord[]): Map<string, SnapshotStateRecord> {
  return new Map(snapshots.filter((r) => !r.moveData && r.snapshotHandle).map((r) => [objectKey(r.namespace, r.pvc), r]));
}

/** The name of the VolumeSnapshot a restore makes for a kept snapshot. */
export function restoredSnapshotName(restoreName: string, record: SnapshotStateRecord): string {
  return `${record.name.slice(0, 40).replace(/-+$/, '')}-${hashParts('restore-vs', restoreName, record.name).slice(0, 12)}`;
}

/**
 * The selected items without the PersistentVolumes of claims restored from a kept snapshot (the
 * driver provisions new ones) or from a moved block volume's data (a DataDownload fills a new
 * one); what was left out, for the log.
 */
export function dropSnapshottedVolumes(
  items: readonly RestoreItem[],
  kept: ReadonlyMap<string, SnapshotStateRecord>,
): { items: RestoreItem[]; dropped: string[] } {
  const pvNames = new Set([...kept.values()].map((r) => r.pvName));
  const dropped: string[] = [];
  const rest = items.filter((item) => {
    if (item.group === '' && item.resource === 'persistentvolumes' && pvNames.has(item.name)) {
      dropped.push(item.name);
      return false;
    }
    return true;
  });
  return { items: rest, dropped };
}

/** A restored claim of a kept snapshot: no volumeName, `dataSource` the restore's VolumeSnapshot. */
export function claimFromSnapshot(object: Record<string, unknown>, snapshotName: string): void {
  const spec = (object.spec ?? {}) as Record<string, unknown>;
  delete spec.volumeName;
  delete spec.dataSourceRef;
  spec.dataSource = { apiGroup: snapshotGroup, kind: 'VolumeSnapshot', name: snapshotName };
  object.spec = spec;
  const annotations = (object.metadata as { annotations?: Record<string, string> } | undefined)?.annotations;
  if (annotations) {
    for (const key of ['pv.kubernetes.io/bind-completed', 'pv.kubernetes.io/bound-by-controller', 'volume.kubernetes.io/selected-node'])
      delete annotations[key];
  }
}

/** The content (pre-provisioned, Retain) and snapshot a restored claim is filled from. */
export async function provideRestoreSnapshot(
  kube: KubeClients,
  input: { restoreName: string; targetNamespace: string; record: SnapshotStateRecord },
): Promise<string> {
  const { record } = input;
  const name = restoredSnapshotName(input.restoreName, record);
  const contentName = `${name}-${hashParts('restore-vsc', input.targetNamespace).slice(0, 8)}`;
  // The snapshot lives in the claim's namespace, which the restore may not have created yet.
  try {
    await kube.requestJson({
      method: 'POST',
      path: '/api/v1/namespaces',
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: input.targetNamespace } },
    });
  } catch (err) {
    if (!isKubeError(err, KubeErrorCodes.alreadyExists) && !isKubeError(err, KubeErrorCodes.conflict)) throw err;
  }
  await createVolumeSnapshotContent(kube, {
    metadata: { name: contentName },
    spec: {
      deletionPolicy: 'Retain',
      driver: record.driver,
      volumeSnapshotClassName: record.className,
      source: { snapshotHandle: record.snapshotHandle! },
      volumeSnapshotRef: { name, namespace: input.targetNamespace },
    },
  });
  await createVolumeSnapshot(kube, {
    metadata: { name, namespace: input.targetNamespace },
    spec: { volumeSnapshotClassName: record.className, source: { volumeSnapshotContentName: contentName } },
  });
  return name;
}
