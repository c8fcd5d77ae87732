import { type KubernetesObject, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { type Informer, type InformerEvent, type InformerOptions, startInformer } from './informer.js';
import type { KubeClients } from './kube-clients.js';
import { callKube, isKubeError, KubeError, KubeErrorCodes } from './kube-errors.js';
import { listAllItems } from './list-all.js';

export const pvbGroup = 'stowage.dev';
export const pvbVersion = 'v1alpha1';
export const pvbPlural = 'podvolumebackups';
export const pvbKind = 'PodVolumeBackup';
export const pvbApiVersion = `${pvbGroup}/${pvbVersion}`;

/** Labels every PVB carries (DESIGN §3). */
export const pvbLabels = {
  backupName: 'stowage.dev/backup-name',
  backupUid: 'stowage.dev/backup-uid',
  node: 'stowage.dev/node',
} as const;

export type PvbPhase = 'New' | 'InProgress' | 'Completed' | 'Failed' | 'Canceling' | 'Canceled';

export const terminalPvbPhases: ReadonlySet<PvbPhase> = new Set(['Completed', 'Failed', 'Canceled']);

export function isPvbTerminal(pvb: Pick<PodVolumeBackup, 'status'>): boolean {
  const phase = pvb.status?.phase;
  return phase !== undefined && terminalPvbPhases.has(phase);
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
}

export interface PodVolumeBackup extends KubernetesObject {
  apiVersion?: string;
  kind?: string;
  metadata: NonNullable<KubernetesObject['metadata']> & { name: string };
  spec: PodVolumeBackupSpec;
  status?: PodVolumeBackupStatus;
}

/** What createPvb takes: name, labels, spec (namespace, apiVersion and kind are filled in). */
export interface NewPodVolumeBackup {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: PodVolumeBackupSpec;
  status?: PodVolumeBackupStatus;
}

export type CreatePvbResult = { created: true; pvb: PodVolumeBackup } | { created: false; pvb: PodVolumeBackup };

export type RequestCancelResult = { outcome: 'requested'; pvb: PodVolumeBackup } | { outcome: 'not-found' };

export type ConditionalStatusResult =
  | { outcome: 'updated'; pvb: PodVolumeBackup }
  /** The PVB changed since `expectedResourceVersion` (someone else wrote first); `current` is what it is now. */
  | { outcome: 'conflict'; message: string; current: PodVolumeBackup | undefined }
  | { outcome: 'not-found' };

export interface PvbClientOptions {
  /** Where PVBs live (Stowage's namespace). Default `stowage`. */
  namespace?: string | undefined;
}

export interface PvbClient {
  readonly namespace: string;
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

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function requireName(name: string, operation: string): void {
  if (typeof name !== 'string' || name.length === 0) {
    throw new KubeError({ code: KubeErrorCodes.badArgument, message: `${operation}: a PVB name is required` });
  }
}

export function createPvbClient(kube: KubeClients, options: PvbClientOptions = {}): PvbClient {
  const namespace = options.namespace ?? 'stowage';
  const where = { group: pvbGroup, version: pvbVersion, namespace, plural: pvbPlural };
  const co = kube.customObjects;

  async function getPvb(name: string): Promise<PodVolumeBackup | undefined> {
    requireName(name, 'getPvb');
    try {
      return (await callKube(`get PVB ${namespace}/${name}`, () => co.getNamespacedCustomObject({ ...where, name }))) as PodVolumeBackup;
    } catch (err) {
      if (isKubeError(err, KubeErrorCodes.notFound)) return undefined;
      throw err;
    }
  }

  async function createPvb(pvb: NewPodVolumeBackup): Promise<CreatePvbResult> {
    requireName(pvb?.metadata?.name, 'createPvb');
    const body = {
      ...pvb,
      apiVersion: pvbApiVersion,
      kind: pvbKind,
      metadata: { ...pvb.metadata, namespace },
    };
    const description = `create PVB ${namespace}/${pvb.metadata.name}`;
    // Two rounds: a PVB deleted between our 409 and our read is created on the second.
    for (let round = 0; round < 2; round++) {
      try {
        const created = (await callKube(description, () => co.createNamespacedCustomObject({ ...where, body }))) as PodVolumeBackup;
        return { created: true, pvb: created };
      } catch (err) {
        if (!isKubeError(err, KubeErrorCodes.alreadyExists) && !isKubeError(err, KubeErrorCodes.conflict)) throw err;
        const existing = await getPvb(pvb.metadata.name);
        if (existing) return { created: false, pvb: existing };
      }
    }
    throw new KubeError({ code: KubeErrorCodes.conflict, message: `${description}: it exists and vanishes again on every read` });
  }

  async function listPvbs(listOptions: { labelSelector?: string | undefined } = {}): Promise<PodVolumeBackup[]> {
    return listAllItems<PodVolumeBackup>(kube, {
      resource: { group: pvbGroup, version: pvbVersion, resource: pvbPlural, kind: pvbKind, namespaced: true },
      namespace,
      labelSelector: listOptions.labelSelector,
    });
  }

  async function requestCancel(name: string): Promise<RequestCancelResult> {
    requireName(name, 'requestCancel');
    try {
      const pvb = (await callKube(`cancel PVB ${namespace}/${name}`, () =>
        co.patchNamespacedCustomObject({ ...where, name, body: { spec: { cancel: true } } }, mergePatch),
      )) as PodVolumeBackup;
      return { outcome: 'requested', pvb };
    } catch (err) {
      if (isKubeError(err, KubeErrorCodes.notFound)) return { outcome: 'not-found' };
      throw err;
    }
  }

  async function patchPvbStatus(name: string, status: PodVolumeBackupStatus): Promise<PodVolumeBackup> {
    requireName(name, 'patchPvbStatus');
    return (await callKube(`patch status of PVB ${namespace}/${name}`, () =>
      co.patchNamespacedCustomObjectStatus({ ...where, name, body: { status } }, mergePatch),
    )) as PodVolumeBackup;
  }

  async function updatePvbStatusIf(
    name: string,
    expectedResourceVersion: string,
    status: PodVolumeBackupStatus,
  ): Promise<ConditionalStatusResult> {
    requireName(name, 'updatePvbStatusIf');
    if (typeof expectedResourceVersion !== 'string' || expectedResourceVersion.length === 0) {
      // An empty resourceVersion would make the PUT unconditional: refuse rather than claim twice.
      throw new KubeError({ code: KubeErrorCodes.badArgument, message: `updatePvbStatusIf ${name}: expectedResourceVersion is required` });
    }
    // The status subresource ignores everything but status; spec is kept from the stored object.
    const body = {
      apiVersion: pvbApiVersion,
      kind: pvbKind,
      metadata: { name, namespace, resourceVersion: expectedResourceVersion },
      status,
    };
    try {
      const pvb = (await callKube(`update status of PVB ${namespace}/${name}`, () =>
        co.replaceNamespacedCustomObjectStatus({ ...where, name, body }),
      )) as PodVolumeBackup;
      return { outcome: 'updated', pvb };
    } catch (err) {
      if (isKubeError(err, KubeErrorCodes.notFound)) return { outcome: 'not-found' };
      if (isKubeError(err, KubeErrorCodes.conflict)) return { outcome: 'conflict', message: err.message, current: await getPvb(name) };
      throw err;
    }
  }

  async function deletePvb(name: string): Promise<{ deleted: boolean }> {
    requireName(name, 'deletePvb');
    try {
      await callKube(`delete PVB ${namespace}/${name}`, () => co.deleteNamespacedCustomObject({ ...where, name }));
      return { deleted: true };
    } catch (err) {
      if (isKubeError(err, KubeErrorCodes.notFound)) return { deleted: false };
      throw err;
    }
  }

  function watchPvbs(informerOptions: Omit<InformerOptions<PodVolumeBackup>, 'path'>): Informer<PodVolumeBackup> {
    return startInformer<PodVolumeBackup>(kube, {
      ...informerOptions,
      path: `/apis/${pvbGroup}/${pvbVersion}/namespaces/${namespace}/${pvbPlural}`,
    });
  }

  return { namespace, createPvb, getPvb, listPvbs, requestCancel, patchPvbStatus, updatePvbStatusIf, deletePvb, watchPvbs };
}

export type { InformerEvent };
