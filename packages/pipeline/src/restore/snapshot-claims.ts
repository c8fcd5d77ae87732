/*
 * The restore plan's part of a backup's CSI snapshots (restore-snapshots.ts has the rest): which
 * claims restore from a kept snapshot or a moved one, and how their objects change. No Kubernetes
 * client and no Redis here: the plan runs in a process of its own (restore-plan-child.ts).
 */
import { type BackedUpPodVolume, hashParts, objectKey, type RestoreItem } from '@stowage/core';
import { snapshotGroup } from '@stowage/kube/api-groups';
import type { SnapshotStateRecord } from '../snapshots/block-snapshots.js';

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
