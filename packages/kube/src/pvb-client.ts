import type { Informer, InformerEvent, InformerOptions } from './informer.js';
import type { KubeClients } from './kube-clients.js';
import {
  createVolumeOperationClient,
  isVolumeOperationTerminal,
  terminalVolumeOperationPhases,
  type VolumeOperation,
  type VolumeOperationClient,
  type VolumeOperationKind,
  type VolumeOperationPhase,
  type VolumeOperationStorageCost,
} from './volume-operation-client.js';

export const pvbGroup = 'stowage.dev';
export const pvbVersion = 'v1alpha1';
export const pvbPlural = 'podvolumebackups';
export const pvbKind = 'PodVolumeBackup';
export const pvbApiVersion = `${pvbGroup}/${pvbVersion}`;

export const pvbOperationKind: VolumeOperationKind = {
  group: pvbGroup,
  version: pvbVersion,
  plural: pvbPlural,
  kind: pvbKind,
  shortName: 'PVB',
};

/** Labels every PVB carries (docs/architecture.md#podvolumebackups). */
export const pvbLabels = {
  backupName: 'stowage.dev/backup-name',
  backupUid: 'stowage.dev/backup-uid',
  node: 'stowage.dev/node',
} as const;

export type PvbPhase = VolumeOperationPhase;

export const terminalPvbPhases: ReadonlySet<PvbPhase> = terminalVolumeOperationPhases;

export function isPvbTerminal(pvb: Pick<PodVolumeBackup, 'status'>): boolean {
  return isVolumeOperationTerminal(pvb);
}

export interface PodVolumeBackupSpec {
  /** The node whose agent copies the volume. */
  node: string;
  pod: { namespace: string; name: string; uid: string };
  /** The volume's name in the pod spec. */
  volume: string;
  backupStorageLocation: string;
  tags?: Record<string, string>;
  cancel?: boolean;
}

export interface PodVolumeBackupStatus {
  phase?: PvbPhase;
  message?: string;
  snapshotID?: string;
  path?: string;
  /** RFC 3339. */
  startTimestamp?: string;
  completionTimestamp?: string;
  progress?: { totalBytes?: number; bytesDone?: number };
  /** What the node agent asked of object storage for it (every run together). */
  storage?: VolumeOperationStorageCost;
}

export type PodVolumeBackup = VolumeOperation<PodVolumeBackupSpec, PodVolumeBackupStatus>;

/** What createPvb takes: name, labels, spec (namespace, apiVersion and kind are filled in). */
export interface NewPodVolumeBackup {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: PodVolumeBackupSpec;
  status?: PodVolumeBackupStatus;
}

export type CreatePvbResult = { created: true; pvb: PodVolumeBackup } | { created: false; pvb: PodVolumeBackup };

/** `object` and `pvb` are the same PVB: `object` for code written against both kinds. */
export type RequestCancelResult = { outcome: 'requested'; pvb: PodVolumeBackup; object: PodVolumeBackup } | { outcome: 'not-found' };

export type ConditionalStatusResult =
  | { outcome: 'updated'; pvb: PodVolumeBackup; object: PodVolumeBackup }
  /** The PVB changed since `expectedResourceVersion` (someone else wrote first); `current` is what it is now. */
  | { outcome: 'conflict'; message: string; current: PodVolumeBackup | undefined }
  | { outcome: 'not-found' };

export interface PvbClientOptions {
  /** Where PVBs live (Stowage's namespace). Default `stowage`. */
  namespace?: string | undefined;
}

/**
 * The volume-operation client bound to PodVolumeBackups, plus the PVB-named methods the backup
 * pipeline has always called (same behaviour; results name the object `pvb`).
 */
export interface PvbClient extends VolumeOperationClient<PodVolumeBackupSpec, PodVolumeBackupStatus> {
  /** Idempotent: an existing PVB of that name is read and returned with `created: false`. */
  createPvb(pvb: NewPodVolumeBackup): Promise<CreatePvbResult>;
  /** undefined when there is no such PVB. */
  getPvb(name: string): Promise<PodVolumeBackup | undefined>;
  listPvbs(options?: { labelSelector?: string | undefined }): Promise<PodVolumeBackup[]>;
  /** Merge-patches spec.cancel=true; the node agent moves it to Canceling/Canceled. */
  requestCancel(name: string): Promise<RequestCancelResult>;
  /** Merge-patches the status subresource (fields not given are kept). Throws KUBE_NOT_FOUND. */
  patchPvbStatus(name: string, status: PodVolumeBackupStatus): Promise<PodVolumeBackup>;
  /**
   * Replaces the whole status only if the PVB is still at `expectedResourceVersion` (PUT /status with
   * that resourceVersion). Exactly one of two concurrent claimers gets `updated`.
   */
  updatePvbStatusIf(name: string, expectedResourceVersion: string, status: PodVolumeBackupStatus): Promise<ConditionalStatusResult>;
  deletePvb(name: string): Promise<{ deleted: boolean }>;
  /** A resilient informer on this namespace's PVBs (see startInformer). */
  watchPvbs(options: Omit<InformerOptions<PodVolumeBackup>, 'path'>): Informer<PodVolumeBackup>;
}

export function createPvbClient(kube: KubeClients, options: PvbClientOptions = {}): PvbClient {
  const client = createVolumeOperationClient<PodVolumeBackupSpec, PodVolumeBackupStatus>(kube, pvbOperationKind, options);
  return {
    ...client,
    createPvb: async (pvb) => {
      const { created, object } = await client.create(pvb);
      return created ? { created: true, pvb: object } : { created: false, pvb: object };
    },
    getPvb: client.get,
    listPvbs: client.list,
    requestCancel: async (name) => {
      const result = await client.requestCancel(name);
      return result.outcome === 'requested' ? { outcome: 'requested', pvb: result.object, object: result.object } : result;
    },
    patchPvbStatus: client.patchStatus,
    updatePvbStatusIf: async (name, expectedResourceVersion, status) => {
      const result = await client.updateStatusIf(name, expectedResourceVersion, status);
      return result.outcome === 'updated' ? { outcome: 'updated', pvb: result.object, object: result.object } : result;
    },
    deletePvb: client.delete,
    watchPvbs: client.watch,
  };
}

export type { InformerEvent };
