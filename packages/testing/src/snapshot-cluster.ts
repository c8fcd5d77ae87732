/*
 * The objects of a simulated cluster whose volumes can be snapshotted: the kube-sim provisions
 * claims of a StorageClass of its CSI driver, fills them with the files a claim names, and cuts
 * snapshots of a VolumeSnapshotClass of that driver (kube-sim's snapshot-controller.ts).
 */

/** The simulator's CSI driver. */
export const SIM_CSI_DRIVER = 'sim.csi.stowage.dev';

/** A StorageClass whose claims get volumes of `provisioner` (by default the simulator's). */
export function csiStorageClass(name = 'standard', provisioner = SIM_CSI_DRIVER): Record<string, unknown> {
  return { apiVersion: 'storage.k8s.io/v1', kind: 'StorageClass', metadata: { name }, provisioner, reclaimPolicy: 'Delete' };
}

/**
 * The simulator's VolumeSnapshotClass `sim-snap`, with the kube-sim's parameters (its
 * SIM_SNAPSHOT_PARAMETERS). A backup finds it as the driver's default class, or by Velero's label.
 */
export function simSnapshotClass(
  parameters: Record<string, string>,
  chosenBy: 'default-class' | 'velero-label' = 'default-class',
): Record<string, unknown> {
  const marks =
    chosenBy === 'default-class'
      ? { annotations: { 'snapshot.storage.kubernetes.io/is-default-class': 'true' } }
      : { labels: { 'velero.io/csi-volumesnapshot-class': 'true' } };
  return {
    apiVersion: 'snapshot.storage.k8s.io/v1',
    kind: 'VolumeSnapshotClass',
    metadata: { name: 'sim-snap', ...marks },
    driver: SIM_CSI_DRIVER,
    deletionPolicy: 'Delete',
    parameters,
  };
}

export interface SimClaimOptions {
  /** Default `shop`. */
  namespace?: string;
  /** Default `standard` (csiStorageClass's default). */
  storageClassName?: string;
  /** Added to the claim's spec (e.g. `volumeMode: 'Block'`). */
  spec?: Record<string, unknown>;
  annotations?: Record<string, string>;
}

/** A 1Gi ReadWriteOnce claim whose volume the simulator fills with `files` (`sim.stowage.dev/files`). */
export function simClaim(name: string, files: unknown[], options: SimClaimOptions = {}): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: {
      name,
      namespace: options.namespace ?? 'shop',
      annotations: { 'sim.stowage.dev/files': JSON.stringify(files), ...options.annotations },
    },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '1Gi' } },
      storageClassName: options.storageClassName ?? 'standard',
      ...options.spec,
    },
  };
}
