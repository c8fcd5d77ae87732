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
import { hashParts } from '@stowage/core';
import { createVolumeSnapshot, createVolumeSnapshotContent, isKubeError, type KubeClients, KubeErrorCodes } from '@stowage/kube';
import type { BackupStorage } from '@stowage/storage';
import { blockSnapshots, type SnapshotStateRecord } from '../snapshots/block-snapshots.js';
import { BackupArchiveReader } from '../state/backup-archive.js';
import { restoredSnapshotName } from './snapshot-claims.js';

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
