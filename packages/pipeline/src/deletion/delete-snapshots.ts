import {
  deleteVolumeSnapshot,
  getVolumeSnapshot,
  getVolumeSnapshotContent,
  isKubeError,
  type KubeClients,
  KubeErrorCodes,
  listSnapshotClasses,
  setSnapshotContentDeletionPolicy,
  snapshotGroup,
} from '@stowage/kube';
import type { BackupStorage } from '@stowage/storage';
import { completedSnapshotsOf } from '../restore/restore-snapshots.js';
import { SNAPSHOT_LABELS } from '../snapshots/block-snapshots.js';

export interface DeletedSnapshot {
  snapshot: string;
  content?: string;
  /** What the class (or, with the class gone, the recorded content) said: Delete takes the provider's snapshot, Retain keeps it. */
  deletionPolicy: 'Delete' | 'Retain';
}

/**
 * The kept CSI snapshots of a backup being deleted (docs/architecture.md#csi-snapshots-and-the-data-mover),
 * from its archived snapshot records: a backup keeps each one's content under `Retain` while it
 * exists; now its VolumeSnapshot goes, and its content (with the provider's snapshot) goes too when
 * the snapshot's class says `deletionPolicy: Delete` — with `Retain` the content and its data stay,
 * as the class asked. Moved snapshots left nothing in the cluster. A VolumeSnapshot of that name
 * that another backup made (its label says so) is left alone. Idempotent: 404s are done already.
 * Must run before the backup's objects in storage go (the records are read from there).
 */
export async function deleteKeptSnapshots(
  kube: KubeClients,
  storage: Pick<BackupStorage, 'getObject'>,
  backupName: string,
): Promise<DeletedSnapshot[]> {
  const kept = (await completedSnapshotsOf(storage, backupName)).filter((r) => !r.moveData);
  if (kept.length === 0) return [];
  const classes = (await listSnapshotClasses(kube)) ?? [];
  const out: DeletedSnapshot[] = [];
  for (const record of kept) {
    const cls = classes.find((c) => c.metadata.name === record.className);
    const policy: 'Delete' | 'Retain' = (cls?.deletionPolicy ?? record.classDeletionPolicy) === 'Delete' ? 'Delete' : 'Retain';
    const content = record.contentName ? await getVolumeSnapshotContent(kube, record.contentName) : undefined;
    const snapshot = await getVolumeSnapshot(kube, record.namespace, record.name);
    const ours = snapshot && snapshot.metadata.labels?.[SNAPSHOT_LABELS.backupName] === backupName;
    // The content first under Delete, so deleting the snapshot (or the content) takes the data.
    if (content && policy === 'Delete' && content.spec.deletionPolicy !== 'Delete') {
      await ignoringGone(() => setSnapshotContentDeletionPolicy(kube, content.metadata.name, 'Delete'));
    }
    if (ours) await deleteVolumeSnapshot(kube, record.namespace, record.name);
    if (content && policy === 'Delete') {
      await ignoringGone(() =>
        kube.requestJson({
          method: 'DELETE',
          path: `/apis/${snapshotGroup}/v1/volumesnapshotcontents/${encodeURIComponent(content.metadata.name)}`,
          description: `delete VolumeSnapshotContent ${content.metadata.name}`,
        }),
      );
    }
    if (ours || content) {
      out.push({
        snapshot: `${record.namespace}/${record.name}`,
        ...(content ? { content: content.metadata.name } : {}),
        deletionPolicy: policy,
      });
    }
  }
  return out;
}

async function ignoringGone(work: () => Promise<unknown>): Promise<void> {
  try {
    await work();
  } catch (err) {
    if (!isKubeError(err, KubeErrorCodes.notFound)) throw err;
  }
}
