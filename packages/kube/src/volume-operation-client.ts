import { type KubernetesObject, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { type Informer, type InformerOptions, startInformer } from './informer.js';
import type { KubeClients } from './kube-clients.js';
import { callKube, isKubeError, KubeError, KubeErrorCodes } from './kube-errors.js';
import { listAllItems } from './list-all.js';

/**
 * PodVolumeBackups and PodVolumeRestores are the same kind of object to Kubernetes: a namespaced
 * custom resource in Stowage's namespace that a node agent claims with a conditional status
 * update, reports progress on and ends in a terminal phase, and that a caller can ask to cancel
 * through `spec.cancel`. This is the one client for both; `pvb-client.ts` and `pvr-client.ts`
 * only bind it to their CRD.
 */
export type VolumeOperationPhase = 'New' | 'InProgress' | 'Completed' | 'Failed' | 'Canceling' | 'Canceled';

export const terminalVolumeOperationPhases: ReadonlySet<VolumeOperationPhase> = new Set(['Completed', 'Failed', 'Canceled']);

/** What every volume operation's spec and status have in common. */
export interface VolumeOperationSpecBase {
  pod: { namespace: string; name: string; uid: string };
  volume: string;
  cancel?: boolean;
}

export interface VolumeOperationStatusBase {
  phase?: VolumeOperationPhase;
  message?: string;
  /** RFC 3339. */
  startTimestamp?: string;
  completionTimestamp?: string;
  progress?: { totalBytes?: number; bytesDone?: number };
  /**
   * What the operation asked of object storage so far (@stowage/storage's StorageCost: requests by
   * operation, object bytes each way), every run of it together; the backup or restore adds it up.
   */
  storage?: VolumeOperationStorageCost;
}

/** @stowage/storage's StorageCost, as it is kept in a volume operation's status. */
export interface VolumeOperationStorageCost {
  requests: { put: number; get: number; head: number; list: number; delete: number };
  bytesWritten: number;
  bytesRead: number;
}

export interface VolumeOperation<Spec extends VolumeOperationSpecBase, Status extends VolumeOperationStatusBase> extends KubernetesObject {
  apiVersion?: string;
  kind?: string;
  metadata: NonNullable<KubernetesObject['metadata']> & { name: string };
  spec: Spec;
  status?: Status;
}

/** What `create` takes: name, labels, spec (namespace, apiVersion and kind are filled in). */
export interface NewVolumeOperation<Spec, Status> {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: Spec;
  status?: Status;
}

/** Which CRD a client serves, and how messages name its objects (`PVB`, `PVR`). */
export interface VolumeOperationKind {
  group: string;
  version: string;
  plural: string;
  kind: string;
  shortName: string;
}

export function isVolumeOperationTerminal(object: { status?: VolumeOperationStatusBase | undefined }): boolean {
  const phase = object.status?.phase;
  return phase !== undefined && terminalVolumeOperationPhases.has(phase);
}

export type CreateVolumeOperationResult<T> = { created: boolean; object: T };

export type CancelVolumeOperationResult<T> = { outcome: 'requested'; object: T } | { outcome: 'not-found' };

export type ConditionalVolumeOperationStatusResult<T> =
  | { outcome: 'updated'; object: T }
  /** It changed since `expectedResourceVersion` (someone else wrote first); `current` is what it is now. */
  | { outcome: 'conflict'; message: string; current: T | undefined }
  | { outcome: 'not-found' };

export interface VolumeOperationClientOptions {
  /** Where the objects live (Stowage's namespace). Default `stowage`. */
  namespace?: string | undefined;
}

export interface VolumeOperationClient<Spec extends VolumeOperationSpecBase, Status extends VolumeOperationStatusBase> {
  readonly namespace: string;
  readonly kind: VolumeOperationKind;
  /** Idempotent: an existing object of that name is read and returned with `created: false`. */
  create(object: NewVolumeOperation<Spec, Status>): Promise<CreateVolumeOperationResult<VolumeOperation<Spec, Status>>>;
  /** undefined when there is no such object. */
  get(name: string): Promise<VolumeOperation<Spec, Status> | undefined>;
  list(options?: { labelSelector?: string | undefined }): Promise<VolumeOperation<Spec, Status>[]>;
  /** Merge-patches spec.cancel=true; the node agent moves it to Canceling/Canceled. */
  requestCancel(name: string): Promise<CancelVolumeOperationResult<VolumeOperation<Spec, Status>>>;
  /** Merge-patches the status subresource (fields not given are kept). Throws KUBE_NOT_FOUND. */
  patchStatus(name: string, status: Status): Promise<VolumeOperation<Spec, Status>>;
  /**
   * Replaces the whole status only if the object is still at `expectedResourceVersion` (PUT /status
   * with that resourceVersion). Exactly one of two concurrent claimers gets `updated`.
   */
  updateStatusIf(
    name: string,
    expectedResourceVersion: string,
    status: Status,
  ): Promise<ConditionalVolumeOperationStatusResult<VolumeOperation<Spec, Status>>>;
  delete(name: string): Promise<{ deleted: boolean }>;
  /** A resilient informer on this namespace's objects of the kind (see startInformer). */
  watch(options: Omit<InformerOptions<VolumeOperation<Spec, Status>>, 'path'>): Informer<VolumeOperation<Spec, Status>>;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export function createVolumeOperationClient<Spec extends VolumeOperationSpecBase, Status extends VolumeOperationStatusBase>(
  kube: KubeClients,
  kind: VolumeOperationKind,
  options: VolumeOperationClientOptions = {},
): VolumeOperationClient<Spec, Status> {
  type Obj = VolumeOperation<Spec, Status>;
  const namespace = options.namespace ?? 'stowage';
  const where = { group: kind.group, version: kind.version, namespace, plural: kind.plural };
  const apiVersion = `${kind.group}/${kind.version}`;
  const co = kube.customObjects;
  const label = (name: string) => `${kind.shortName} ${namespace}/${name}`;

  function requireName(name: string, operation: string): void {
    if (typeof name !== 'string' || name.length === 0) {
      throw new KubeError({ code: KubeErrorCodes.badArgument, message: `${operation}: a ${kind.shortName} name is required` });
    }
  }

  async function get(name: string): Promise<Obj | undefined> {
    requireName(name, `get ${kind.shortName}`);
    try {
      return (await callKube(`get ${label(name)}`, () => co.getNamespacedCustomObject({ ...where, name }))) as Obj;
    } catch (err) {
      if (isKubeError(err, KubeErrorCodes.notFound)) return undefined;
      throw err;
    }
  }

  async function create(object: NewVolumeOperation<Spec, Status>): Promise<CreateVolumeOperationResult<Obj>> {
    requireName(object?.metadata?.name, `create ${kind.shortName}`);
    const body = { ...object, apiVersion, kind: kind.kind, metadata: { ...object.metadata, namespace } };
    const description = `create ${label(object.metadata.name)}`;
    // Two rounds: an object deleted between our 409 and our read is created on the second.
    for (let round = 0; round < 2; round++) {
      try {
        const created = (await callKube(description, () => co.createNamespacedCustomObject({ ...where, body }))) as Obj;
        return { created: true, object: created };
      } catch (err) {
        if (!isKubeError(err, KubeErrorCodes.alreadyExists) && !isKubeError(err, KubeErrorCodes.conflict)) throw err;
        const existing = await get(object.metadata.name);
        if (existing) return { created: false, object: existing };
      }
    }
    throw new KubeError({ code: KubeErrorCodes.conflict, message: `${description}: it exists and vanishes again on every read` });
  }

  function list(listOptions: { labelSelector?: string | undefined } = {}): Promise<Obj[]> {
    return listAllItems<Obj>(kube, {
      resource: { group: kind.group, version: kind.version, resource: kind.plural, kind: kind.kind, namespaced: true },
      namespace,
      labelSelector: listOptions.labelSelector,
    });
  }

  async function requestCancel(name: string): Promise<CancelVolumeOperationResult<Obj>> {
    requireName(name, `cancel ${kind.shortName}`);
    try {
      const object = (await callKube(`cancel ${label(name)}`, () =>
        co.patchNamespacedCustomObject({ ...where, name, body: { spec: { cancel: true } } }, mergePatch),
      )) as Obj;
      return { outcome: 'requested', object };
    } catch (err) {
      if (isKubeError(err, KubeErrorCodes.notFound)) return { outcome: 'not-found' };
      throw err;
    }
  }

  async function patchStatus(name: string, status: Status): Promise<Obj> {
    requireName(name, `patch status of ${kind.shortName}`);
    return (await callKube(`patch status of ${label(name)}`, () =>
      co.patchNamespacedCustomObjectStatus({ ...where, name, body: { status } }, mergePatch),
    )) as Obj;
  }

  async function updateStatusIf(
    name: string,
    expectedResourceVersion: string,
    status: Status,
  ): Promise<ConditionalVolumeOperationStatusResult<Obj>> {
    requireName(name, `update status of ${kind.shortName}`);
    if (typeof expectedResourceVersion !== 'string' || expectedResourceVersion.length === 0) {
      // An empty resourceVersion would make the PUT unconditional: refuse rather than claim twice.
      throw new KubeError({
        code: KubeErrorCodes.badArgument,
        message: `update status of ${label(name)}: expectedResourceVersion is required`,
      });
    }
    // The status subresource ignores everything but status; spec is kept from the stored object.
    const body = { apiVersion, kind: kind.kind, metadata: { name, namespace, resourceVersion: expectedResourceVersion }, status };
    try {
      const object = (await callKube(`update status of ${label(name)}`, () =>
        co.replaceNamespacedCustomObjectStatus({ ...where, name, body }),
      )) as Obj;
      return { outcome: 'updated', object };
    } catch (err) {
      if (isKubeError(err, KubeErrorCodes.notFound)) return { outcome: 'not-found' };
      if (isKubeError(err, KubeErrorCodes.conflict)) return { outcome: 'conflict', message: err.message, current: await get(name) };
      throw err;
    }
  }

  async function deleteObject(name: string): Promise<{ deleted: boolean }> {
    requireName(name, `delete ${kind.shortName}`);
    try {
      await callKube(`delete ${label(name)}`, () => co.deleteNamespacedCustomObject({ ...where, name }));
      return { deleted: true };
    } catch (err) {
      if (isKubeError(err, KubeErrorCodes.notFound)) return { deleted: false };
      throw err;
    }
  }

  function watch(informerOptions: Omit<InformerOptions<Obj>, 'path'>): Informer<Obj> {
    return startInformer<Obj>(kube, { ...informerOptions, path: `/apis/${apiVersion}/namespaces/${namespace}/${kind.plural}` });
  }

  return { namespace, kind, create, get, list, requestCancel, patchStatus, updateStatusIf, delete: deleteObject, watch };
}
