/**
 * API groups named by code that must not load the Kubernetes client (the restore plan's process,
 * pipeline/src/restore/restore-plan-child.ts): a module with no imports, exported as
 * `@stowage/kube/api-groups`.
 */

/** The external snapshotter's CSI snapshot API (VolumeSnapshot, VolumeSnapshotContent, VolumeSnapshotClass). */
export const snapshotGroup = 'snapshot.storage.k8s.io';
