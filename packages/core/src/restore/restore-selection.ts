/*
 * Which backed-up items a restore creates (Velero's restore filters, decided here):
 *
 * - Never restored, whatever the spec says: nodes, events, Velero's and Stowage's own kinds,
 *   CSINodes, VolumeAttachments (Velero's `nonRestorableResources`, plus PVBs and PVRs).
 * - Namespaces (globs) are matched against the namespace an item was backed up from, before
 *   `namespaceMapping`; `excludedNamespaces` wins; resources as in a backup (aliases accepted).
 * - `labelSelector` / `orLabelSelectors` apply to every item, as in Velero's restore.
 * - Cluster-scoped items: `includeClusterResources` true → restored; false → never; null →
 *   only when the restore covers all namespaces. A namespace object follows the namespace
 *   filter instead, and every namespace a restored item lives in is added (from the backup
 *   when it holds it, else a bare Namespace) so the item has somewhere to go.
 * - Pods that had ended (Succeeded/Failed) and Jobs that had completed (a completionTime) are
 *   not restored (Velero's isCompleted): they would only run again. Mirror pods neither.
 * - Two items that would land on the same target (a mapped namespace onto one the restore also
 *   fills) are not both created: the first in backup order wins, the other is skipped with why.
 * - PersistentVolumes: the PV of a claim whose data came through fs-backup is not restored —
 *   its claim is restored without `volumeName` and the storage class provisions a new PV, into
 *   which the PodVolumeRestore writes the data. A PV with reclaim policy `Delete` is not
 *   restored either (Velero re-provisions it dynamically: there is no snapshot to bring back).
 *   Any other PV (`Retain`) is restored as-is, also when only its claim's namespace is selected.
 */
import {
  coversAllNamespaces,
  groupResourceOf,
  isNamespaceIncluded,
  isResourceIncluded,
  matchesBackupSelectors,
  resourceEntryMatches,
  type SelectionSpec,
} from '../resource-selection.js';
import type { RestoreSpec } from './restore-spec.schema.js';
import type { BackedUpItem, BackedUpItemRef, BackedUpPodVolume, RestoredPodVolume, RestoreItem, RestoreObject } from './types.js';

/** Group-resources a restore never creates (Velero's list plus Stowage's own kinds). */
export const NEVER_RESTORED_RESOURCES: readonly string[] = [
  'nodes',
  'events',
  'events.events.k8s.io',
  'backups.velero.io',
  'restores.velero.io',
  'resticrepositories.velero.io',
  'backuprepositories.velero.io',
  'csinodes.storage.k8s.io',
  'volumeattachments.storage.k8s.io',
  'podvolumebackups.stowage.dev',
  'podvolumerestores.stowage.dev',
];

export type RestoreSkipReason =
  | 'never-restored'
  | 'resource-excluded'
  | 'namespace-excluded'
  | 'cluster-scoped-not-included'
  | 'labels-not-matched'
  | 'completed'
  | 'mirror-pod'
  | 'auto-created-token'
  | 'target-collision'
  | 'pv-reprovisioned'
  | 'cluster-rbac-not-named';

/**
 * Cluster-scoped RBAC objects: restored only when the restore's includedResources names their
 * resource (not `*`, not by default). A ClusterRole or ClusterRoleBinding grants rights across the
 * cluster, and writing one takes the restorer's `bind`/`escalate` (docs/deploy.md#restores-and-their-identity).
 */
export const CLUSTER_RBAC_RESOURCES: readonly string[] = [
  'clusterroles.rbac.authorization.k8s.io',
  'clusterrolebindings.rbac.authorization.k8s.io',
];

export interface SkippedRestoreItem {
  item: BackedUpItem;
  reason: RestoreSkipReason;
  /** A sentence for the restore's log and results. */
  message: string;
}

/** One line of a restore's log for its skipped items: the items that share a reason and message, counted. */
export interface SkippedRestoreGroup {
  reason: RestoreSkipReason;
  message: string;
  /** How many items this line stands for. */
  count: number;
  /** The item, when the line stands for one. */
  item?: BackedUpItemRef;
}

/**
 * The skipped items as the restore's log says them: items skipped for the same reason with the same
 * message (the items of an excluded namespace or resource, of a kind never restored, of a kind not
 * matching the label selector) become one line with their count, in the order first seen; a
 * message naming its item (a completed pod, a collision) stays a line of its own. A restore of one
 * namespace from a backup of a hundred thousand objects then logs a line per other namespace, not
 * per object (the count of skipped items is kept as `itemsNotSelected`).
 */
export function groupSkippedItems(skipped: readonly SkippedRestoreItem[]): SkippedRestoreGroup[] {
  const tally = new SkippedItemTally();
  for (const { item, reason, message } of skipped) tally.add(item, reason, message);
  return tally.groups();
}

/** Skipped items counted into groupSkippedItems' lines as they come, without keeping them (one item per line at most). */
export class SkippedItemTally {
  private readonly byKey = new Map<string, SkippedRestoreGroup>();
  /** How many items were added. */
  count = 0;

  add(item: BackedUpItemRef, reason: RestoreSkipReason, message: string): void {
    this.count++;
    const key = `${reason}\u0000${message}`;
    const group = this.byKey.get(key);
    if (group) {
      group.count++;
      delete group.item;
    } else this.byKey.set(key, { reason, message, count: 1, item });
  }

  /** The lines, in the order first seen. */
  groups(): SkippedRestoreGroup[] {
    return [...this.byKey.values()];
  }
}

/** The volume data a restore brings back, keyed by the backed-up pod/claim (`<ns>/<name>`). */
export interface RestoreVolumePlan {
  /** Backed-up pod `<ns>/<name>` → its volumes that get a PodVolumeRestore (empty when restorePVs is false). */
  podVolumes: Record<string, RestoredPodVolume[]>;
  /** Backed-up PVCs `<ns>/<name>` restored without `volumeName`, for a freshly provisioned PV. */
  reprovisionedClaims: string[];
}

export interface RestoreSelection {
  /** What to create, in backup order (use `restoreTiers` for the creation order). */
  items: RestoreItem[];
  /** Every backed-up item not restored, with why: nothing is dropped silently. */
  skipped: SkippedRestoreItem[];
  volumes: RestoreVolumePlan;
}

export type RestoreSelectionSpec = SelectionSpec & Pick<RestoreSpec, 'namespaceMapping' | 'restorePVs'>;

/** `<ns>/<name>` of a namespaced object, the key used by the volume plan. */
export function objectKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** `deployments.apps` → `{group: 'apps', resource: 'deployments'}`; `pods` → core group. */
export function splitGroupResource(groupResource: string): { group: string; resource: string } {
  const dot = groupResource.indexOf('.');
  return dot < 0 ? { group: '', resource: groupResource } : { group: groupResource.slice(dot + 1), resource: groupResource.slice(0, dot) };
}

/** The namespace an item of `namespace` is restored into. */
export function mapNamespace(namespace: string, mapping: Readonly<Record<string, string>>): string {
  return mapping[namespace] ?? namespace;
}

function isKind(item: Pick<BackedUpItemRef, 'group' | 'resource'>, group: string, resource: string): boolean {
  return item.group === group && item.resource === resource;
}

function isNamespaceObject(item: BackedUpItemRef): boolean {
  return isKind(item, '', 'namespaces');
}

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** `spec.<field>` of an object, when it is an object. */
function specOf(object: RestoreObject): Record<string, unknown> {
  return asRecord(object.spec) ?? {};
}

interface PodVolumeRef {
  name: string;
  claimName?: string;
}

function podVolumes(object: RestoreObject): PodVolumeRef[] {
  const volumes = specOf(object).volumes;
  if (!Array.isArray(volumes)) return [];
  return volumes.flatMap((volume) => {
    const record = asRecord(volume);
    if (!record || typeof record.name !== 'string') return [];
    const claimName = asRecord(record.persistentVolumeClaim)?.claimName;
    if (typeof claimName === 'string') return [{ name: record.name, claimName }];
    // a generic ephemeral volume's claim is `<pod>-<volume>` (created by Kubernetes, not restored)
    return [{ name: record.name }];
  });
}

/** The annotation the kubelet puts on a static pod's API mirror; the kubelet recreates it, not a restore. */
export const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

/** Why a pod or job is complete or not the restore's to create (so not restored), or null. */
function completionOf(item: BackedUpItem): { reason: RestoreSkipReason; message: string } | null {
  if (isKind(item, '', 'pods') && item.object.metadata.annotations?.[MIRROR_POD_ANNOTATION] !== undefined) {
    return { reason: 'mirror-pod', message: `pod ${item.namespace}/${item.name} is a mirror pod; its node's kubelet recreates it` };
  }
  const completed = completionMessage(item);
  return completed === null ? null : { reason: 'completed', message: completed };
}

function completionMessage(item: BackedUpItem): string | null {
  const status = asRecord(item.object.status);
  if (isKind(item, '', 'pods') && (status?.phase === 'Succeeded' || status?.phase === 'Failed')) {
    return `pod ${item.namespace}/${item.name} had ended (${status.phase}); it is not restored`;
  }
  if (isKind(item, 'batch', 'jobs') && typeof status?.completionTime === 'string' && status.completionTime !== '') {
    return `job ${item.namespace}/${item.name} had completed (${status.completionTime}); it is not restored`;
  }
  return null;
}

type SkipVerdict = { reason: RestoreSkipReason; message: string };

/** The exclusions an item's place (kind, namespace, name) decides alone, in explainExclusion's order. */
function placeExclusion(item: BackedUpItemRef, spec: RestoreSelectionSpec): SkipVerdict | null {
  const groupResource = groupResourceOf(item);
  // Messages name the rule, not the item, so the log says each rule once with a count (groupSkippedItems).
  if (NEVER_RESTORED_RESOURCES.includes(groupResource)) {
    return { reason: 'never-restored', message: `${groupResource} are never restored (cluster-specific or managed by Stowage itself)` };
  }
  if (!isResourceIncluded(item, spec))
    return { reason: 'resource-excluded', message: `${groupResource} is not among the restored resources` };
  if (item.namespace !== null) {
    if (!isNamespaceIncluded(item.namespace, spec))
      return { reason: 'namespace-excluded', message: `namespace ${item.namespace} is not restored` };
  } else if (isNamespaceObject(item)) {
    if (!isNamespaceIncluded(item.name, spec)) return { reason: 'namespace-excluded', message: `namespace ${item.name} is not restored` };
  }
  return null;
}

function explainExclusion(item: BackedUpItem, spec: RestoreSelectionSpec): SkippedRestoreItem | null {
  const place = placeExclusion(item, spec);
  if (place) return { item, ...place };
  if (!matchesBackupSelectors(item.object.metadata.labels, spec)) {
    return { item, reason: 'labels-not-matched', message: `${groupResourceOf(item)} not matching the label selector are not restored` };
  }
  return null;
}

/** includedResources names the item's resource itself (an alias or group-qualified name; `*` does not count). */
function namesResource(spec: RestoreSelectionSpec, item: BackedUpItemRef): boolean {
  return spec.includedResources.some((entry) => entry !== '*' && resourceEntryMatches(entry, item));
}

function clusterResourcesListed(spec: RestoreSelectionSpec): boolean {
  return spec.includeClusterResources === true || (spec.includeClusterResources === null && coversAllNamespaces(spec));
}

/** Whether a cluster-scoped item that is neither a namespace nor a PV, and passed the filters, is skipped: it depends on its kind alone. */
function clusterScopedSkip(item: BackedUpItemRef, spec: RestoreSelectionSpec, listsClusterResources: boolean): SkipVerdict | null {
  if (listsClusterResources && CLUSTER_RBAC_RESOURCES.includes(groupResourceOf(item)) && !namesResource(spec, item)) {
    return {
      reason: 'cluster-rbac-not-named',
      message: `${groupResourceOf(item)} ${item.name} is not restored: cluster-scoped RBAC objects are restored only when includedResources names ${item.resource} (it grants rights across the cluster)`,
    };
  }
  if (listsClusterResources) return null;
  return {
    reason: 'cluster-scoped-not-included',
    message: `${groupResourceOf(item)} ${item.name} is cluster-scoped and cluster resources are not restored${spec.includeClusterResources === null ? ' (set includeClusterResources: true, or restore all namespaces)' : ''}`,
  };
}

/**
 * Chooses the items to restore, says why each other one is not restored, and plans the volume
 * data: `volumeBackups` are the backup's PodVolumeBackups (only `Completed` ones with a
 * snapshotID restore data). Pure; the input is not changed.
 */
export function selectRestoreItems(
  items: readonly BackedUpItem[],
  spec: RestoreSelectionSpec,
  volumeBackups: readonly BackedUpPodVolume[],
): RestoreSelection {
  let selected: BackedUpItem[] = [];
  const skipped: SkippedRestoreItem[] = [];
  const pending: BackedUpItem[] = [];

  for (const item of items) {
    const exclusion = explainExclusion(item, spec);
    if (exclusion) {
      skipped.push(exclusion);
      continue;
    }
    const completion = completionOf(item);
    if (completion !== null) {
      skipped.push({ item, ...completion });
      continue;
    }
    // cluster-scoped items other than namespaces wait: PVs depend on the claims chosen
    if (item.namespace === null && !isNamespaceObject(item)) pending.push(item);
    else selected.push(item);
  }

  selected = dropTargetCollisions(selected, spec.namespaceMapping, skipped);
  selected = dropAutoCreatedTokens(selected, items, skipped);

  // Volume data: which pod volumes had a completed fs-backup, and which claims they mount.
  const completed = new Map<string, string>();
  for (const backup of volumeBackups) {
    if (backup.phase === 'Completed' && backup.snapshotID) {
      completed.set(`${objectKey(backup.podNamespace, backup.podName)}\u0000${backup.volume}`, backup.snapshotID);
    }
  }
  // A claim whose data was fs-backed up (by any backed-up pod, restored or not) is reprovisioned.
  const fsBackedClaims = new Set<string>();
  for (const backedUp of items) {
    if (!isKind(backedUp, '', 'pods') || backedUp.namespace === null) continue;
    const podKey = objectKey(backedUp.namespace, backedUp.name);
    for (const volume of podVolumes(backedUp.object)) {
      if (volume.claimName !== undefined && completed.has(`${podKey}\u0000${volume.name}`)) {
        fsBackedClaims.add(objectKey(backedUp.namespace, volume.claimName));
      }
    }
  }
  const podVolumesPlan: Record<string, RestoredPodVolume[]> = {};
  for (const item of selected) {
    if (!spec.restorePVs || !isKind(item, '', 'pods') || item.namespace === null) continue;
    const podKey = objectKey(item.namespace, item.name);
    for (const volume of podVolumes(item.object)) {
      const snapshotID = completed.get(`${podKey}\u0000${volume.name}`);
      if (snapshotID === undefined) continue;
      const planned = podVolumesPlan[podKey] ?? [];
      planned.push({ volume: volume.name, snapshotID });
      podVolumesPlan[podKey] = planned;
    }
  }

  const selectedClaims = new Map<string, BackedUpItem>();
  for (const item of selected) {
    if (isKind(item, '', 'persistentvolumeclaims') && item.namespace !== null)
      selectedClaims.set(objectKey(item.namespace, item.name), item);
  }
  const listsClusterResources = clusterResourcesListed(spec);
  const staticVolumes = new Set<string>();
  for (const item of pending) {
    if (isKind(item, '', 'persistentvolumes')) {
      const claimRef = asRecord(specOf(item.object).claimRef);
      const claimKey =
        typeof claimRef?.namespace === 'string' && typeof claimRef.name === 'string' ? objectKey(claimRef.namespace, claimRef.name) : null;
      if (claimKey !== null && fsBackedClaims.has(claimKey)) {
        skipped.push({
          item,
          reason: 'pv-reprovisioned',
          message: `persistentvolume ${item.name} is not restored: the data of claim ${claimKey} is restored by fs-backup into a newly provisioned volume`,
        });
        continue;
      }
      if (specOf(item.object).persistentVolumeReclaimPolicy === 'Delete') {
        skipped.push({
          item,
          reason: 'pv-reprovisioned',
          message: `persistentvolume ${item.name} is not restored: its reclaim policy is Delete and there is no snapshot, so its claim gets a newly provisioned volume`,
        });
        continue;
      }
      const claimSelected = claimKey !== null && selectedClaims.has(claimKey);
      if (listsClusterResources || (claimSelected && spec.includeClusterResources !== false)) {
        selected.push(item);
        staticVolumes.add(item.name);
      } else {
        skipped.push({
          item,
          reason: 'cluster-scoped-not-included',
          message: `persistentvolume ${item.name} is cluster-scoped and cluster resources are not restored`,
        });
      }
      continue;
    }
    const skip = clusterScopedSkip(item, spec, listsClusterResources);
    if (skip) skipped.push({ item, ...skip });
    else selected.push(item);
  }

  const reprovisionedClaims: string[] = [];
  for (const [key, claim] of selectedClaims) {
    const volumeName = specOf(claim.object).volumeName;
    if (typeof volumeName !== 'string' || volumeName === '' || !staticVolumes.has(volumeName)) reprovisionedClaims.push(key);
  }

  const result: RestoreItem[] = selected.map((item) => toRestoreItem(item, spec.namespaceMapping, 'selected'));
  // every namespace a restored item lives in, created first (from the backup when it has it)
  const namespaceObjects = new Map<string, BackedUpItem>();
  for (const item of items) if (isNamespaceObject(item)) namespaceObjects.set(item.name, item);
  const restoredNamespaces = new Set(result.filter((item) => isNamespaceObject(item)).map((item) => item.targetName));
  for (const item of selected) {
    if (item.namespace === null) continue;
    const target = mapNamespace(item.namespace, spec.namespaceMapping);
    if (restoredNamespaces.has(target)) continue;
    restoredNamespaces.add(target);
    const fromBackup = namespaceObjects.get(item.namespace);
    const namespaceItem: BackedUpItem = fromBackup ?? {
      group: '',
      resource: 'namespaces',
      namespace: null,
      name: item.namespace,
      object: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: item.namespace } },
    };
    result.push(toRestoreItem(namespaceItem, spec.namespaceMapping, 'target-namespace'));
    if (fromBackup) {
      const index = skipped.findIndex((entry) => entry.item === fromBackup);
      if (index >= 0) skipped.splice(index, 1);
    }
  }

  return { items: result, skipped, volumes: { podVolumes: podVolumesPlan, reprovisionedClaims: reprovisionedClaims.sort() } };
}

/** A streamed selection's outcome: selectRestoreItems' items and volumes, its skipped items as their log lines and count. */
export interface StreamedRestoreSelectionResult {
  items: RestoreItem[];
  volumes: RestoreVolumePlan;
  /** groupSkippedItems' lines of every skipped item (the lines of items passed over first). */
  skipped: SkippedRestoreGroup[];
  /** How many items are not restored. */
  skippedCount: number;
}

export interface StreamedRestoreSelection {
  /**
   * True when the item's place alone (kind, namespace, name: its tarball path) decides that it is
   * not restored and the selection needs nothing of it: it is counted under its skip line, and its
   * object need never be read. False: read its object and `add` it.
   */
  passOver(item: BackedUpItemRef): boolean;
  /** An item not passed over, with its object, in backup order. */
  add(item: BackedUpItem): void;
  result(): StreamedRestoreSelectionResult;
}

/**
 * selectRestoreItems for a backup read item by item (the restore plan streams the tarball, issue
 * #45): only what the selection can need is parsed and kept. Read in full: items that pass the
 * namespace and resource filters (except cluster-scoped kinds the spec does not restore, when no
 * label selector asks for their labels), plus what the rules look up in items they do not restore —
 * the namespace objects and service accounts of restored namespaces, PersistentVolumes (their
 * claim decides), and pods whose volume data was backed up (their claims are reprovisioned). An
 * item added that cannot be restored is kept as only the fields the rules read. The outcome is
 * selectRestoreItems' over the whole backup (restore-selection.test.ts checks it on generated backups).
 */
export function streamRestoreSelection(spec: RestoreSelectionSpec, volumeBackups: readonly BackedUpPodVolume[]): StreamedRestoreSelection {
  const fsBackedPods = new Set(
    volumeBackups.filter((b) => b.phase === 'Completed' && b.snapshotID).map((b) => objectKey(b.podNamespace, b.podName)),
  );
  const listsClusterResources = clusterResourcesListed(spec);
  const byLabels = Boolean(spec.labelSelector) || spec.orLabelSelectors.length > 0;
  const tally = new SkippedItemTally();
  const items: BackedUpItem[] = [];
  const isPv = (item: BackedUpItemRef) => isKind(item, '', 'persistentvolumes');
  /** A PV restored only with its claim, whose claim is not in a restored namespace. */
  const pvNeverRestored = (item: BackedUpItem): boolean => {
    if (listsClusterResources) return false;
    if (spec.includeClusterResources === false) return true;
    const claimNamespace = asRecord(specOf(item.object).claimRef)?.namespace;
    return typeof claimNamespace !== 'string' || !isNamespaceIncluded(claimNamespace, spec);
  };
  return {
    passOver(item) {
      if (isNamespaceObject(item) && isNamespaceIncluded(item.name, spec)) return false;
      if (item.namespace !== null) {
        if (isKind(item, '', 'serviceaccounts') && isNamespaceIncluded(item.namespace, spec)) return false;
        if (isKind(item, '', 'pods') && fsBackedPods.has(objectKey(item.namespace, item.name))) return false;
      }
      const place = placeExclusion(item, spec);
      if (place === null && (item.namespace !== null || isNamespaceObject(item) || isPv(item) || byLabels)) return false;
      const verdict = place ?? clusterScopedSkip(item, spec, listsClusterResources);
      if (verdict === null) return false;
      tally.add(item, verdict.reason, verdict.message);
      return true;
    },
    add(item) {
      const { object } = item;
      const name = object.metadata?.name;
      if (!isNamespaceObject(item) && placeExclusion(item, spec) !== null) {
        // Skipped by its place; a pod's volumes (fsBackedClaims) and a service account's name are read.
        const volumes = isKind(item, '', 'pods') ? { spec: { volumes: specOf(object).volumes } } : {};
        items.push({ ...item, object: { metadata: { name }, ...volumes } as RestoreObject });
      } else if (isPv(item) && pvNeverRestored(item)) {
        const claimRef = asRecord(specOf(object).claimRef);
        items.push({
          ...item,
          object: {
            metadata: { name, labels: object.metadata?.labels },
            spec: {
              claimRef: { namespace: claimRef?.namespace, name: claimRef?.name },
              persistentVolumeReclaimPolicy: specOf(object).persistentVolumeReclaimPolicy,
            },
          } as RestoreObject,
        });
      } else items.push(item);
    },
    result() {
      const selection = selectRestoreItems(items, spec, volumeBackups);
      for (const { item, reason, message } of selection.skipped) tally.add(item, reason, message);
      return { items: selection.items, volumes: selection.volumes, skipped: tally.groups(), skippedCount: tally.count };
    },
  };
}

export const SERVICE_ACCOUNT_TOKEN_SECRET_TYPE = 'kubernetes.io/service-account-token';

/**
 * A service-account token Secret named `<service account>-token-…` was made by the token
 * controller, which makes a new one for the restored account: it is not restored (Velero's
 * SecretAction, with the backup's service accounts of the namespace instead of the cluster's).
 */
function dropAutoCreatedTokens(
  selected: readonly BackedUpItem[],
  items: readonly BackedUpItem[],
  skipped: SkippedRestoreItem[],
): BackedUpItem[] {
  const accounts = new Map<string, string[]>();
  for (const item of items) {
    if (!isKind(item, '', 'serviceaccounts') || item.namespace === null) continue;
    accounts.set(item.namespace, [...(accounts.get(item.namespace) ?? []), item.name]);
  }
  return selected.filter((item) => {
    if (!isKind(item, '', 'secrets') || item.namespace === null || item.object.type !== SERVICE_ACCOUNT_TOKEN_SECRET_TYPE) return true;
    const owner = (accounts.get(item.namespace) ?? []).find((account) => item.name.startsWith(`${account}-token-`));
    if (owner === undefined) return true;
    skipped.push({
      item,
      reason: 'auto-created-token',
      message: `secret ${item.namespace}/${item.name} is the token controller's for service account ${owner}; it makes a new one`,
    });
    return false;
  });
}

/** Keeps the first of items that would be created at the same place; the others are skipped with why. */
function dropTargetCollisions(
  items: readonly BackedUpItem[],
  mapping: Readonly<Record<string, string>>,
  skipped: SkippedRestoreItem[],
): BackedUpItem[] {
  const kept: BackedUpItem[] = [];
  const targets = new Set<string>();
  for (const item of items) {
    const { targetNamespace, targetName } = toRestoreItem(item, mapping, 'selected');
    const target = `${groupResourceOf(item)}\u0000${targetNamespace ?? ''}\u0000${targetName}`;
    if (!targets.has(target)) {
      targets.add(target);
      kept.push(item);
      continue;
    }
    const where = targetNamespace === null ? targetName : `${targetNamespace}/${targetName}`;
    skipped.push({
      item,
      reason: 'target-collision',
      message: `${groupResourceOf(item)} ${where} is already restored from another namespace (namespaceMapping maps two namespaces onto one); this copy is not restored`,
    });
  }
  return kept;
}

function toRestoreItem(item: BackedUpItem, mapping: Readonly<Record<string, string>>, origin: RestoreItem['origin']): RestoreItem {
  if (item.namespace !== null) {
    return { ...item, targetNamespace: mapNamespace(item.namespace, mapping), targetName: item.name, origin };
  }
  return { ...item, targetNamespace: null, targetName: isNamespaceObject(item) ? mapNamespace(item.name, mapping) : item.name, origin };
}
