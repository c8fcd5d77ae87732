import type { KubeClients } from './kube-clients.js';
import type { PodVolumeBackupSpec, PodVolumeBackupStatus } from './pvb-client.js';
import {
  createVolumeOperationClient,
  type VolumeOperation,
  type VolumeOperationClient,
  type VolumeOperationClientOptions,
  type VolumeOperationKind,
} from './volume-operation-client.js';

/**
 * DataUploads (a CSI snapshot's data moved into the repository): volume operations like PVBs —
 * claimed, run and reported by the node agent of `spec.node` — on a temporary pod in Stowage's
 * namespace that mounts a claim made from the snapshot (k8s/base/crd-datauploads.yaml). The one
 * volume-operation client, bound to their CRD.
 */
export interface DataMoverSpec extends PodVolumeBackupSpec {
  /** Block volumes are read and written as one file, the device. */
  volumeMode?: 'Filesystem' | 'Block';
  snapshot?: { namespace?: string; name?: string; className?: string; driver?: string; handle?: string };
}

export type DataMoverStatus = PodVolumeBackupStatus;
export type DataMoverOperation = VolumeOperation<DataMoverSpec, DataMoverStatus>;
export type DataMoverClient = VolumeOperationClient<DataMoverSpec, DataMoverStatus>;

export const dataUploadKind: VolumeOperationKind = {
  group: 'stowage.dev',
  version: 'v1alpha1',
  plural: 'datauploads',
  kind: 'DataUpload',
  shortName: 'DataUpload',
};

/** Labels every DataUpload carries (each node agent watches its own node's). */
export const dataMoverLabels = {
  node: 'stowage.dev/node',
  backupName: 'stowage.dev/backup-name',
} as const;

export function createDataUploadClient(kube: KubeClients, options: VolumeOperationClientOptions = {}): DataMoverClient {
  return createVolumeOperationClient<DataMoverSpec, DataMoverStatus>(kube, dataUploadKind, options);
}

/**
 * DataDownloads (a moved block volume written back): the node agent of `spec.node` restores the
 * repository snapshot `snapshotID` (one file, the device's bytes) into the device of a temporary
 * pod's new claim in Stowage's namespace (k8s/base/crd-datadownloads.yaml); the restore then hands
 * that volume to the claim it restores.
 */
export interface DataDownloadSpec {
  node: string;
  /** The temporary pod that holds the new claim as a device. */
  pod: { namespace: string; name: string; uid: string };
  volume: string;
  snapshotID: string;
  backupStorageLocation: string;
  volumeMode: 'Block';
  /** The claim the data is for (target namespace and name), for the record. */
  target?: { namespace?: string; name?: string };
  cancel?: boolean;
}

export type DataDownloadStatus = PodVolumeBackupStatus;
export type DataDownloadOperation = VolumeOperation<DataDownloadSpec, DataDownloadStatus>;
export type DataDownloadClient = VolumeOperationClient<DataDownloadSpec, DataDownloadStatus>;

export const dataDownloadKind: VolumeOperationKind = {
  group: 'stowage.dev',
  version: 'v1alpha1',
  plural: 'datadownloads',
  kind: 'DataDownload',
  shortName: 'DataDownload',
};

/** Labels every DataDownload carries (each node agent watches its own node's). */
export const dataDownloadLabels = {
  node: 'stowage.dev/node',
  restoreName: 'stowage.dev/restore-name',
} as const;

export function createDataDownloadClient(kube: KubeClients, options: VolumeOperationClientOptions = {}): DataDownloadClient {
  return createVolumeOperationClient<DataDownloadSpec, DataDownloadStatus>(kube, dataDownloadKind, options);
}
