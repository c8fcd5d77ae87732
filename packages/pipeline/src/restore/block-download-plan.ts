/*
 * The restore plan's part of moved block volumes (block-downloads.ts drives them): the names of a
 * claim's DataDownload, the restored claim's selector, and which restored pod writes each claim
 * back. No Kubernetes client here: the plan runs in a process of its own (restore-plan-child.ts).
 */
import { hashParts, objectKey, type RestoreItem } from '@stowage/core';
import type { SnapshotStateRecord } from '../snapshots/block-snapshots.js';

/** The label a restored claim's selector matches, put on the volume filled for it. */
export const RESTORE_VOLUME_LABEL = 'stowage.dev/restore-volume';

/** One moved block volume of a restored pod (in its RestorePodPlan). */
export interface PlannedBlockDownload {
  /** The DataDownload, temporary claim and pod in Stowage's namespace. */
  name: string;
  /** The pod volume and the restored claim (in the pod's target namespace). */
  volume: string;
  claim: string;
  snapshotID: string;
  storageClassName?: string;
  /** The restored claim's request (the temporary claim asks for the same). */
  storage: string;
  /** The value of RESTORE_VOLUME_LABEL the restored claim's selector matches. */
  selectorValue: string;
}

/** Names of a restore's download of one claim: DataDownload, temporary claim and pod, and the selector's value. */
export function blockDownloadNames(restoreName: string, targetNamespace: string, claim: string): { name: string; selectorValue: string } {
  const hash = hashParts('datadownload', restoreName, targetNamespace, claim);
  return { name: `stowage-dd-${hash.slice(0, 20)}`, selectorValue: hash.slice(0, 32) };
}

/** A restored claim of a moved block volume: no volumeName or dataSource, a selector naming the volume to be filled. */
export function claimForDownload(object: Record<string, unknown>, selectorValue: string): void {
  const spec = (object.spec ?? {}) as Record<string, unknown>;
  delete spec.volumeName;
  delete spec.dataSource;
  delete spec.dataSourceRef;
  spec.selector = { matchLabels: { [RESTORE_VOLUME_LABEL]: selectorValue } };
  object.spec = spec;
  const annotations = (object.metadata as { annotations?: Record<string, string> } | undefined)?.annotations;
  if (annotations) {
    for (const key of ['pv.kubernetes.io/bind-completed', 'pv.kubernetes.io/bound-by-controller', 'volume.kubernetes.io/selected-node'])
      delete annotations[key];
  }
}

/**
 * The DataDownloads of moved block volumes: each claim (backed-up `<ns>/<name>`) that a restored
 * pod mounts, planned for the first such pod; the claims no restored pod mounts.
 */
export function planBlockDownloads(
  restoreName: string,
  items: readonly RestoreItem[],
  movedBlock: ReadonlyMap<string, SnapshotStateRecord>,
): { byClaim: Map<string, PlannedBlockDownload>; byPod: Map<string, PlannedBlockDownload[]>; unmounted: string[] } {
  const byClaim = new Map<string, PlannedBlockDownload>();
  const byPod = new Map<string, PlannedBlockDownload[]>();
  if (movedBlock.size === 0) return { byClaim, byPod, unmounted: [] };
  const claims = new Map<string, RestoreItem>();
  for (const item of items) {
    if (item.group === '' && item.resource === 'persistentvolumeclaims' && item.namespace !== null)
      claims.set(objectKey(item.namespace, item.name), item);
  }
  for (const item of items) {
    if (item.group !== '' || item.resource !== 'pods' || item.namespace === null || item.targetNamespace === null) continue;
    const volumes = ((item.object.spec as { volumes?: unknown[] } | undefined)?.volumes ?? []) as Array<{
      name?: string;
      persistentVolumeClaim?: { claimName?: string };
    }>;
    for (const volume of volumes) {
      const claimName = volume.persistentVolumeClaim?.claimName;
      if (!volume.name || !claimName) continue;
      const key = objectKey(item.namespace, claimName);
      const record = movedBlock.get(key);
      const claim = claims.get(key);
      if (!record?.repositorySnapshotId || !claim || byClaim.has(key)) continue;
      const claimSpec = (claim.object.spec ?? {}) as { storageClassName?: string; resources?: { requests?: { storage?: string } } };
      const names = blockDownloadNames(restoreName, item.targetNamespace, claimName);
      const planned: PlannedBlockDownload = {
        ...names,
        volume: volume.name,
        claim: claimName,
        snapshotID: record.repositorySnapshotId,
        ...(claimSpec.storageClassName ? { storageClassName: claimSpec.storageClassName } : {}),
        storage: claimSpec.resources?.requests?.storage ?? String(Math.max(1, record.restoreSizeBytes ?? 1)),
      };
      byClaim.set(key, planned);
      const podKey = objectKey(item.namespace, item.name);
      byPod.set(podKey, [...(byPod.get(podKey) ?? []), planned]);
    }
  }
  const unmounted = [...claims.keys()].filter((key) => movedBlock.has(key) && !byClaim.has(key)).sort();
  return { byClaim, byPod, unmounted };
}
