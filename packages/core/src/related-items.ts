/*
 * Items a backup needs beyond what its filters list, as Velero adds them, and which namespaces a
 * backup keeps:
 *
 * - a pod pulls in its PriorityClass (Velero's pod ItemBlockAction);
 * - a ServiceAccount pulls in every ClusterRoleBinding with it as a subject (kind ServiceAccount,
 *   same namespace and name) and those bindings' ClusterRoles (ServiceAccount ItemBlockAction);
 * - a custom resource pulls in its CustomResourceDefinition (Velero's backupCRD, also in a
 *   namespace-scoped backup) — when CRDs are neither listed by the backup nor excluded by it;
 * - these cluster-scoped items pass only the checks Velero makes for additional items: the exclude
 *   label, the resource excludes (and, with includeClusterResources unset, the resource includes),
 *   and includeClusterResources: false (isRelatedItemIncluded);
 * - a Namespace object is kept when its labels match the backup's label selectors (even when the
 *   namespace filter excludes it, as Velero's nsTracker does), when its name passes a namespace
 *   filter that is not "everything" (with no selector, any filter), or when it holds an item the
 *   backup selected: a label-selected backup restores into its namespaces. A namespace not Active,
 *   or carrying the exclude label, or with `namespaces` excluded as a resource, is never kept.
 */

import { hashParts } from './hash.js';
import type { ItemBlock } from './item-blocks.js';
import { type ClusterItem, itemKey } from './item-blocks.js';
import type { KubeObject, Pod } from './kube-types.js';
import {
  clusterScopedListed,
  coversAllNamespaces,
  EXCLUDE_FROM_BACKUP_LABEL,
  explainRelatedItemExclusion,
  isNamespaceIncluded,
  isResourceIncluded,
  matchesBackupSelectors,
  type SelectionSpec,
} from './resource-selection.js';

/** A cluster-scoped item named by a relation. */
export interface ClusterItemRef {
  group: string;
  resource: string;
  name: string;
  /** Why it is needed, for the backup log: `priority class of pod ns/name`. */
  because: string;
}

export const PRIORITY_CLASSES = { group: 'scheduling.k8s.io', resource: 'priorityclasses' } as const;
export const CLUSTER_ROLE_BINDINGS = { group: 'rbac.authorization.k8s.io', resource: 'clusterrolebindings' } as const;
export const CLUSTER_ROLES = { group: 'rbac.authorization.k8s.io', resource: 'clusterroles' } as const;
export const CUSTOM_RESOURCE_DEFINITIONS = { group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions' } as const;

/** A ClusterRoleBinding as far as the relation reads it. */
export interface ClusterRoleBindingLike extends KubeObject {
  subjects?: { kind?: string; namespace?: string; name?: string }[] | null;
  roleRef?: { kind?: string; name?: string } | null;
}

/** The cluster-scoped items one backed-up item pulls in (a pod's PriorityClass; a ServiceAccount's bindings and roles). */
export function relatedClusterItems(item: ClusterItem, clusterRoleBindings: readonly ClusterRoleBindingLike[]): ClusterItemRef[] {
  const meta = item.object.metadata;
  if (item.group === '' && item.resource === 'pods') {
    const priorityClass = (item.object as Pod & { spec: { priorityClassName?: string } }).spec?.priorityClassName;
    return priorityClass
      ? [{ ...PRIORITY_CLASSES, name: priorityClass, because: `priority class of pod ${meta.namespace}/${meta.name}` }]
      : [];
  }
  if (item.group === '' && item.resource === 'serviceaccounts') {
    const bindings = new Set<string>();
    const roles = new Set<string>();
    for (const binding of clusterRoleBindings) {
      const names = (binding.subjects ?? []).some(
        (s) => s.kind === 'ServiceAccount' && s.namespace === meta.namespace && s.name === meta.name,
      );
      if (!names) continue;
      bindings.add(binding.metadata.name);
      if (binding.roleRef?.name) roles.add(binding.roleRef.name);
    }
    const because = `binds service account ${meta.namespace}/${meta.name}`;
    return [
      ...[...bindings].sort().map((name) => ({ ...CLUSTER_ROLE_BINDINGS, name, because })),
      ...[...roles]
        .sort()
        .map((name) => ({ ...CLUSTER_ROLES, name, because: `role of a binding of service account ${meta.namespace}/${meta.name}` })),
    ];
  }
  return [];
}

/** The name of the CRD that would define a resource (`<plural>.<group>`); the core group has none. */
export function crdNameOf(resource: { group: string; resource: string }): string | undefined {
  return resource.group === '' ? undefined : `${resource.resource}.${resource.group}`;
}

/**
 * Whether the CRDs of backed-up custom resources are added: only when the backup neither lists
 * CRDs itself (then they are in it already) nor excludes them (Velero's backupCRD condition).
 */
export function addsCrdsOfCustomResources(spec: SelectionSpec): boolean {
  const crds = { ...CUSTOM_RESOURCE_DEFINITIONS, namespaced: false };
  if (explainRelatedItemExclusion(crds, spec) !== null) return false;
  return !(clusterScopedListed(crds, spec) && isResourceIncluded(crds, spec));
}

/** One block per added item, with the id grouping would give it (the hash of its key). */
export function blocksOfAddedItems<T extends ClusterItem>(items: readonly T[]): ItemBlock<T>[] {
  return items.map((item) => {
    const key = itemKey(item);
    return { id: `blk-${hashParts('block', key)}`, items: [item], keys: [key], pods: [] };
  });
}

export interface NamespaceObject {
  name: string;
  labels?: Readonly<Record<string, string>>;
  /** `status.phase`; absent counts as Active. */
  phase?: string;
}

/** Whether the backup keeps a Namespace object (see the header), and why, or why not. */
export function decideNamespace(
  namespace: NamespaceObject,
  spec: SelectionSpec,
  namespacesWithSelectedItems: ReadonlySet<string>,
): { kept: true; why: 'labels' | 'filter' | 'holds-items' } | { kept: false; why: string } {
  if (namespace.phase !== undefined && namespace.phase !== 'Active') return { kept: false, why: `namespace is ${namespace.phase}` };
  if (namespace.labels?.[EXCLUDE_FROM_BACKUP_LABEL] === 'true') return { kept: false, why: 'exclude-label' };
  if (!isResourceIncluded({ group: '', resource: 'namespaces', namespaced: false }, spec)) return { kept: false, why: 'resource-excluded' };
  const selectors = spec.labelSelector !== null || spec.orLabelSelectors.length > 0;
  if (selectors && matchesBackupSelectors(namespace.labels, spec)) return { kept: true, why: 'labels' };
  // With a selector, a filter that takes every namespace keeps none by name (Velero #7105).
  if (!(coversAllNamespaces(spec) && selectors) && isNamespaceIncluded(namespace.name, spec)) return { kept: true, why: 'filter' };
  if (namespacesWithSelectedItems.has(namespace.name)) return { kept: true, why: 'holds-items' };
  return { kept: false, why: 'labels-not-matched' };
}
