import { snapshotGroup } from './api-groups.js';
import type { KubeClients } from './kube-clients.js';
import { isKubeError, KubeErrorCodes } from './kube-errors.js';

/**
 * The CSI snapshot objects Stowage makes and reads (`snapshot.storage.k8s.io/v1`, the external
 * snapshotter's API): VolumeSnapshotClasses to choose from, VolumeSnapshots it creates per volume,
 * and their bound VolumeSnapshotContents. Plain JSON over `requestJson` (the API is a CRD).
 */
export { snapshotGroup };
export const snapshotApiVersion = `${snapshotGroup}/v1`;

export interface VolumeSnapshotClass {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  driver: string;
  deletionPolicy?: string;
  parameters?: Record<string, string>;
}

export interface VolumeSnapshot {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    creationTimestamp?: string;
  };
  spec: {
    volumeSnapshotClassName?: string;
    source: { persistentVolumeClaimName?: string; volumeSnapshotContentName?: string };
  };
  status?: {
    boundVolumeSnapshotContentName?: string;
    /** RFC 3339: when the cut was taken (the point in time the snapshot holds). */
    creationTime?: string;
    readyToUse?: boolean;
    restoreSize?: string | number;
    error?: { message?: string; time?: string };
  };
}

export interface VolumeSnapshotContent {
  metadata: { name: string; uid?: string; labels?: Record<string, string> };
  spec: {
    deletionPolicy: string;
    driver: string;
    volumeSnapshotClassName?: string;
    source: { volumeHandle?: string; snapshotHandle?: string };
    volumeSnapshotRef: { name: string; namespace: string; uid?: string };
  };
  status?: {
    snapshotHandle?: string;
    /** Nanoseconds since the epoch. */
    creationTime?: number;
    readyToUse?: boolean;
    restoreSize?: number;
    error?: { message?: string };
  };
}

const base = `/apis/${snapshotApiVersion}`;
const enc = encodeURIComponent;

async function getOrUndefined<T>(kube: KubeClients, path: string, description: string): Promise<T | undefined> {
  try {
    return await kube.requestJson<T>({ path, description });
  } catch (err) {
    if (isKubeError(err, KubeErrorCodes.notFound)) return undefined;
    throw err;
  }
}

/** Every VolumeSnapshotClass; undefined when the cluster serves no snapshot API (404). */
export async function listSnapshotClasses(kube: KubeClients): Promise<VolumeSnapshotClass[] | undefined> {
  const list = await getOrUndefined<{ items?: VolumeSnapshotClass[] }>(
    kube,
    `${base}/volumesnapshotclasses?limit=500`,
    'list volumesnapshotclasses',
  );
  return list ? (list.items ?? []) : undefined;
}

/** Creates the snapshot; one that exists already (a re-run) is read and returned with `created: false`. */
export async function createVolumeSnapshot(
  kube: KubeClients,
  snapshot: VolumeSnapshot,
): Promise<{ created: boolean; object: VolumeSnapshot }> {
  const namespace = snapshot.metadata.namespace ?? '';
  const path = `${base}/namespaces/${enc(namespace)}/volumesnapshots`;
  try {
    const object = await kube.requestJson<VolumeSnapshot>({
      method: 'POST',
      path,
      body: { apiVersion: snapshotApiVersion, kind: 'VolumeSnapshot', ...snapshot },
      description: `create VolumeSnapshot ${namespace}/${snapshot.metadata.name}`,
    });
    return { created: true, object };
  } catch (err) {
    if (!isKubeError(err, KubeErrorCodes.alreadyExists) && !isKubeError(err, KubeErrorCodes.conflict)) throw err;
    const existing = await getVolumeSnapshot(kube, namespace, snapshot.metadata.name);
    if (!existing) throw err;
    return { created: false, object: existing };
  }
}

export function getVolumeSnapshot(kube: KubeClients, namespace: string, name: string): Promise<VolumeSnapshot | undefined> {
  return getOrUndefined(
    kube,
    `${base}/namespaces/${enc(namespace)}/volumesnapshots/${enc(name)}`,
    `get VolumeSnapshot ${namespace}/${name}`,
  );
}

/** Deletes the snapshot (its content and data go with it under deletionPolicy Delete); false when it was gone. */
export async function deleteVolumeSnapshot(kube: KubeClients, namespace: string, name: string): Promise<boolean> {
  try {
    await kube.requestJson({
      method: 'DELETE',
      path: `${base}/namespaces/${enc(namespace)}/volumesnapshots/${enc(name)}`,
      description: `delete VolumeSnapshot ${namespace}/${name}`,
    });
    return true;
  } catch (err) {
    if (isKubeError(err, KubeErrorCodes.notFound)) return false;
    throw err;
  }
}

export function getVolumeSnapshotContent(kube: KubeClients, name: string): Promise<VolumeSnapshotContent | undefined> {
  return getOrUndefined(kube, `${base}/volumesnapshotcontents/${enc(name)}`, `get VolumeSnapshotContent ${name}`);
}

/** Sets a content's deletionPolicy (Retain keeps the provider's snapshot when its VolumeSnapshot goes). */
export async function setSnapshotContentDeletionPolicy(kube: KubeClients, name: string, policy: 'Retain' | 'Delete'): Promise<void> {
  await kube.requestJson({
    method: 'PATCH',
    path: `${base}/volumesnapshotcontents/${enc(name)}`,
    body: { spec: { deletionPolicy: policy } },
    contentType: 'application/merge-patch+json',
    description: `set deletionPolicy ${policy} on VolumeSnapshotContent ${name}`,
  });
}

/** Creates a cluster-scoped content (a pre-provisioned one, for a restore); an existing one is kept. */
export async function createVolumeSnapshotContent(kube: KubeClients, content: VolumeSnapshotContent): Promise<void> {
  try {
    await kube.requestJson({
      method: 'POST',
      path: `${base}/volumesnapshotcontents`,
      body: { apiVersion: snapshotApiVersion, kind: 'VolumeSnapshotContent', ...content },
      description: `create VolumeSnapshotContent ${content.metadata.name}`,
    });
  } catch (err) {
    if (!isKubeError(err, KubeErrorCodes.alreadyExists) && !isKubeError(err, KubeErrorCodes.conflict)) throw err;
  }
}

/** The point the cut was taken at (epoch ms): the content's nanoseconds when known, else the snapshot's seconds. */
export function snapshotCutAtMs(snapshot: VolumeSnapshot, content?: VolumeSnapshotContent): number | undefined {
  const ns = content?.status?.creationTime;
  if (typeof ns === 'number' && ns > 0) return Math.floor(ns / 1e6);
  const at = snapshot.status?.creationTime;
  if (!at) return undefined;
  const ms = Date.parse(at);
  return Number.isFinite(ms) ? ms : undefined;
}
