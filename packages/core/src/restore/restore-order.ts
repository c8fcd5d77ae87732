/*
 * The order a restore creates things in (Velero's restore priorities): each resource of the
 * high-priority list is a tier of its own, in list order; every other resource follows in one
 * tier (sorted alphabetically, so the order is stable and matches Velero's); the low-priority
 * tail (Cluster API / Carvel kinds, which reconcile what was restored before them) comes last,
 * one tier each. Within a tier items do not depend on each other, so they are created at once.
 *
 * The CRD tier waits until its CRDs are Established (their custom resources are served); the
 * namespaces tier until its namespaces are Active.
 */
import { groupResourceOf, resourceEntryMatches } from '../resource-selection.js';
import type { RestoreItem } from './types.js';

/** Velero's default high priorities (`--restore-resource-priorities`), in order. */
export const DEFAULT_RESTORE_HIGH_PRIORITIES: readonly string[] = [
  'customresourcedefinitions',
  'namespaces',
  'storageclasses',
  'volumesnapshotclass.snapshot.storage.k8s.io',
  'volumesnapshotcontents.snapshot.storage.k8s.io',
  'volumesnapshots.snapshot.storage.k8s.io',
  'datauploads.velero.io',
  'persistentvolumes',
  'persistentvolumeclaims',
  'clusterroles',
  'roles',
  'serviceaccounts',
  'clusterrolebindings',
  'rolebindings',
  'secrets',
  'configmaps',
  'limitranges',
  'priorityclasses',
  'pods',
  'replicasets.apps',
  'clusterclasses.cluster.x-k8s.io',
  'endpoints',
  'services',
];

/** Velero's default low priorities: restored after everything else, in order. */
export const DEFAULT_RESTORE_LOW_PRIORITIES: readonly string[] = [
  'clusterbootstraps.run.tanzu.vmware.com',
  'clusters.cluster.x-k8s.io',
  'clusterresourcesets.addons.cluster.x-k8s.io',
];

export interface RestorePriorities {
  high: readonly string[];
  low: readonly string[];
}

export const DEFAULT_RESTORE_PRIORITIES: RestorePriorities = {
  high: DEFAULT_RESTORE_HIGH_PRIORITIES,
  low: DEFAULT_RESTORE_LOW_PRIORITIES,
};

/** What a tier waits for after its items are created, before the next tier starts. */
export type RestoreTierWait = 'crds-established' | 'namespaces-active' | null;

export interface RestoreTier {
  /** 0-based position; tiers with no items are left out, so indexes are dense. */
  index: number;
  /** The group-resources in this tier (`pods`, `deployments.apps`), sorted. */
  groupResources: string[];
  items: RestoreItem[];
  waitUntil: RestoreTierWait;
}

function tierWait(groupResources: readonly string[]): RestoreTierWait {
  if (groupResources.includes('customresourcedefinitions.apiextensions.k8s.io')) return 'crds-established';
  if (groupResources.includes('namespaces')) return 'namespaces-active';
  return null;
}

function compareItems(a: RestoreItem, b: RestoreItem): number {
  const ga = groupResourceOf(a);
  const gb = groupResourceOf(b);
  if (ga !== gb) return ga < gb ? -1 : 1;
  const na = a.targetNamespace ?? '';
  const nb = b.targetNamespace ?? '';
  if (na !== nb) return na < nb ? -1 : 1;
  return a.targetName < b.targetName ? -1 : a.targetName > b.targetName ? 1 : 0;
}

/**
 * Orders items into tiers: tier k+1 starts only when tier k is done. Items inside a tier are
 * sorted by resource, namespace and name (deterministic batches, so a re-run plans the same).
 */
export function restoreTiers(items: readonly RestoreItem[], priorities: RestorePriorities = DEFAULT_RESTORE_PRIORITIES): RestoreTier[] {
  const high: RestoreItem[][] = priorities.high.map(() => []);
  const low: RestoreItem[][] = priorities.low.map(() => []);
  const rest: RestoreItem[] = [];
  for (const item of items) {
    const highIndex = priorities.high.findIndex((entry) => resourceEntryMatches(entry, item));
    if (highIndex >= 0) {
      high[highIndex]?.push(item);
      continue;
    }
    const lowIndex = priorities.low.findIndex((entry) => resourceEntryMatches(entry, item));
    if (lowIndex >= 0) low[lowIndex]?.push(item);
    else rest.push(item);
  }
  const tiers: RestoreTier[] = [];
  for (const group of [...high, rest, ...low]) {
    if (group.length === 0) continue;
    const sorted = [...group].sort(compareItems);
    const groupResources = [...new Set(sorted.map((item) => groupResourceOf(item)))].sort();
    tiers.push({ index: tiers.length, groupResources, items: sorted, waitUntil: tierWait(groupResources) });
  }
  return tiers;
}
