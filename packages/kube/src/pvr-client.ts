import type { KubeClients } from './kube-clients.js';
import {
  createVolumeOperationClient,
  type NewVolumeOperation,
  type VolumeOperation,
  type VolumeOperationClient,
  type VolumeOperationClientOptions,
  type VolumeOperationKind,
  type VolumeOperationPhase,
  type VolumeOperationStorageCost,
} from './volume-operation-client.js';

export const pvrGroup = 'stowage.dev';
export const pvrVersion = 'v1alpha1';
export const pvrPlural = 'podvolumerestores';
export const pvrKind = 'PodVolumeRestore';
export const pvrApiVersion = `${pvrGroup}/${pvrVersion}`;

export const pvrOperationKind: VolumeOperationKind = {
  group: pvrGroup,
  version: pvrVersion,
  plural: pvrPlural,
  kind: pvrKind,
  shortName: 'PVR',
};

/**
 * Labels every PVR carries. No node label: a PVR is made before its pod is scheduled, so every
 * node agent watches all PVRs and takes those whose pod runs on its node (recording status.node).
 */
export const pvrLabels = {
  restoreName: 'stowage.dev/restore-name',
  restoreUid: 'stowage.dev/restore-uid',
  podUid: 'stowage.dev/pod-uid',
} as const;

export type PvrPhase = VolumeOperationPhase;

export interface PodVolumeRestoreSpec {
  /** The restored pod (its new uid), whose volume directory receives the data. */
  pod: { namespace: string; name: string; uid: string };
  /** The volume's name in the pod spec. */
  volume: string;
  /** The repository snapshot to restore (the backup's PVB status.snapshotID). */
  snapshotID: string;
  backupStorageLocation: string;
  /** Which repository holds the snapshot (Stowage has one per storage: `repository`). */
  repoIdentifier: string;
  /** The namespace the pod was backed up from (differs under namespaceMapping). */
  sourceNamespace: string;
  uploaderType: 'stowage';
  cancel?: boolean;
}

export interface PodVolumeRestoreStatus {
  phase?: PvrPhase;
  message?: string;
  /** The node whose agent took it (set when it starts). */
  node?: string;
  /** RFC 3339. */
  startTimestamp?: string;
  completionTimestamp?: string;
  progress?: { totalBytes?: number; bytesDone?: number };
  /** What the node agent asked of object storage for it (every run together). */
  storage?: VolumeOperationStorageCost;
}

export type PodVolumeRestore = VolumeOperation<PodVolumeRestoreSpec, PodVolumeRestoreStatus>;

export type NewPodVolumeRestore = NewVolumeOperation<PodVolumeRestoreSpec, PodVolumeRestoreStatus>;

/** create (409 → existing), get, list, patchStatus, updateStatusIf, requestCancel, delete, watch. */
export type PvrClient = VolumeOperationClient<PodVolumeRestoreSpec, PodVolumeRestoreStatus>;

export function createPvrClient(kube: KubeClients, options: VolumeOperationClientOptions = {}): PvrClient {
  return createVolumeOperationClient<PodVolumeRestoreSpec, PodVolumeRestoreStatus>(kube, pvrOperationKind, options);
}

/**
 * The `stowage-restore-wait` init container (contract between core's pod transform, the node agent
 * and the simulator's kubelet). The node agent's image ships the program
 * (`services/node-agent/src/restore-wait.ts`); WORKDIR /app is the deployed node-agent service.
 */
export const restoreWaitContainer = Object.freeze({
  name: 'stowage-restore-wait',
  /** The container command in the node agent's image. */
  command: Object.freeze(['node', '/app/dist/restore-wait.js']) as readonly string[],
  /** Each restored volume is mounted at `<mountRoot>/<volume name>`. */
  mountRoot: '/restores',
  /** Env var naming the restore whose markers to wait for. */
  restoreUidEnv: 'STOWAGE_RESTORE_UID',
  /** Env var bounding the wait (milliseconds); default 4 h, the restore's itemOperationTimeout default. */
  timeoutEnv: 'STOWAGE_RESTORE_WAIT_TIMEOUT_MS',
  /** The node agent writes `<volume root>/<markerDir>/<restore uid>` when the volume is restored. */
  markerDir: '.stowage',
  /**
   * How often the init container looks for its markers when no change event woke it (it watches
   * each volume's root and `.stowage`): the fallback for a filesystem or an inotify limit that
   * gives no events. A stat per volume, cheap enough to do often.
   */
  pollIntervalMs: 100,
});
