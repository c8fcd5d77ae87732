/*
 * Which items belong in a backup (Velero semantics, decided here):
 *
 * - Namespaces: `excludedNamespaces` wins; empty `includedNamespaces` or `*` means all; entries
 *   are globs (`*`, `?`, `[...]`).
 * - Resources: `excludedResources` wins; empty `includedResources` or `*` means all. Entries are
 *   `resource[.group]` (`pods`, `deployments.apps`); common short names and kinds are accepted
 *   (`po`, `pvc`, `deploy`, `deployment` …). An entry without a group matches that resource in
 *   any group (core has no discovery; `deployments` is resolved to `deployments.apps`).
 * - Label selection: `labelSelector` or any of `orLabelSelectors` must match. It applies to the
 *   items listed for the backup, NOT to items pulled in by a relation (a pod's PVC, a PVC's PV),
 *   as in Velero, where related items only pass the namespace/resource checks.
 * - `velero.io/exclude-from-backup=true` on an item always excludes it; so does
 *   `stowage.dev/never-backup=true`, which the deployment puts on Stowage's own key and credential
 *   Secrets: a backup never holds the key to its own repository (SECURITY.md). Grouping records
 *   each such item as a warning, never silently.
 * - Cluster-scoped items (`includeClusterResources`):
 *     true  → listed like any other item;
 *     null  → listed only when the backup covers every namespace (no include restriction, no
 *             excludes); otherwise only pulled in by a relation — so the PVs of backed-up PVCs
 *             are still backed up (what a restore needs);
 *     false → never, not even a PV pulled in by its PVC (Velero's item backupper does the same).
 *   `namespaces` objects are the exception: a namespace is included when its name passes the
 *   namespace filter, whatever `includeClusterResources` says (as Velero).
 * - Scoped resource filters (Velero's "new" filters, never mixed with the old ones above):
 *   namespace-scoped resources: `excludedNamespaceScopedResources` wins; empty or `*` includes
 *   all. Cluster-scoped resources: `excludedClusterScopedResources` wins; listed only when named
 *   in `includedClusterScopedResources` (or it is `*`), or — with both cluster lists empty — when
 *   the backup covers every namespace and every namespace-scoped resource. Cluster-scoped items
 *   pulled in by a relation (a PVC's PV) are kept unless the cluster excludes name them.
 */
import type { BackupSpec } from './backup-spec.js';
import { globListMatcher, isGlob } from './glob.js';
import { matchesLabelSelector } from './label-selector.js';

export interface SelectableItem {
  /** API group, `''` for the core group. */
  group: string;
  /** Plural resource name, e.g. `pods`. */
  resource: string;
  namespaced: boolean;
  namespace?: string | null;
  name?: string;
  labels?: Readonly<Record<string, string>>;
}

export type NamespaceFilter = Pick<BackupSpec, 'includedNamespaces' | 'excludedNamespaces'>;
export type ScopedResourceFilter = Partial<
  Pick<
    BackupSpec,
    | 'includedClusterScopedResources'
    | 'excludedClusterScopedResources'
    | 'includedNamespaceScopedResources'
    | 'excludedNamespaceScopedResources'
  >
>;
export type ResourceFilter = Pick<BackupSpec, 'includedResources' | 'excludedResources'> & ScopedResourceFilter;
export type SelectionSpec = NamespaceFilter &
  ResourceFilter &
  Pick<BackupSpec, 'includeClusterResources' | 'labelSelector' | 'orLabelSelectors'>;

export const EXCLUDE_FROM_BACKUP_LABEL = 'velero.io/exclude-from-backup';
/** On Stowage's key and credential Secrets: left out of every backup, whatever its filters (SECURITY.md). */
export const NEVER_BACKUP_LABEL = 'stowage.dev/never-backup';

export type ExclusionReason =
  | 'exclude-label'
  | 'never-backup-label'
  | 'resource-excluded'
  | 'namespace-excluded'
  | 'cluster-scoped-not-included'
  | 'labels-not-matched';

/** `resource.group`, or just `resource` for the core group (Velero's group-resource string). */
export function groupResourceOf(item: Pick<SelectableItem, 'group' | 'resource'>): string {
  return item.group ? `${item.resource}.${item.group}` : item.resource;
}

const RESOURCE_ALIASES: Record<string, string> = {
  po: 'pods',
  pod: 'pods',
  pvc: 'persistentvolumeclaims',
  persistentvolumeclaim: 'persistentvolumeclaims',
  pv: 'persistentvolumes',
  persistentvolume: 'persistentvolumes',
  ns: 'namespaces',
  namespace: 'namespaces',
  svc: 'services',
  service: 'services',
  cm: 'configmaps',
  configmap: 'configmaps',
  secret: 'secrets',
  sa: 'serviceaccounts',
  serviceaccount: 'serviceaccounts',
  ep: 'endpoints',
  ev: 'events',
  event: 'events',
  limits: 'limitranges',
  limitrange: 'limitranges',
  quota: 'resourcequotas',
  resourcequota: 'resourcequotas',
  deploy: 'deployments.apps',
  deployment: 'deployments.apps',
  deployments: 'deployments.apps',
  sts: 'statefulsets.apps',
  statefulset: 'statefulsets.apps',
  statefulsets: 'statefulsets.apps',
  ds: 'daemonsets.apps',
  daemonset: 'daemonsets.apps',
  daemonsets: 'daemonsets.apps',
  rs: 'replicasets.apps',
  replicaset: 'replicasets.apps',
  replicasets: 'replicasets.apps',
  job: 'jobs.batch',
  jobs: 'jobs.batch',
  cj: 'cronjobs.batch',
  cronjob: 'cronjobs.batch',
  cronjobs: 'cronjobs.batch',
  ing: 'ingresses.networking.k8s.io',
  ingress: 'ingresses.networking.k8s.io',
  ingresses: 'ingresses.networking.k8s.io',
  netpol: 'networkpolicies.networking.k8s.io',
  networkpolicy: 'networkpolicies.networking.k8s.io',
  networkpolicies: 'networkpolicies.networking.k8s.io',
  sc: 'storageclasses.storage.k8s.io',
  storageclass: 'storageclasses.storage.k8s.io',
  storageclasses: 'storageclasses.storage.k8s.io',
  crd: 'customresourcedefinitions.apiextensions.k8s.io',
  crds: 'customresourcedefinitions.apiextensions.k8s.io',
  customresourcedefinition: 'customresourcedefinitions.apiextensions.k8s.io',
  customresourcedefinitions: 'customresourcedefinitions.apiextensions.k8s.io',
  pdb: 'poddisruptionbudgets.policy',
  poddisruptionbudget: 'poddisruptionbudgets.policy',
  poddisruptionbudgets: 'poddisruptionbudgets.policy',
  hpa: 'horizontalpodautoscalers.autoscaling',
  horizontalpodautoscaler: 'horizontalpodautoscalers.autoscaling',
  horizontalpodautoscalers: 'horizontalpodautoscalers.autoscaling',
  role: 'roles.rbac.authorization.k8s.io',
  roles: 'roles.rbac.authorization.k8s.io',
  rolebinding: 'rolebindings.rbac.authorization.k8s.io',
  rolebindings: 'rolebindings.rbac.authorization.k8s.io',
  clusterrole: 'clusterroles.rbac.authorization.k8s.io',
  clusterroles: 'clusterroles.rbac.authorization.k8s.io',
  clusterrolebinding: 'clusterrolebindings.rbac.authorization.k8s.io',
  clusterrolebindings: 'clusterrolebindings.rbac.authorization.k8s.io',
  pc: 'priorityclasses.scheduling.k8s.io',
  priorityclass: 'priorityclasses.scheduling.k8s.io',
  priorityclasses: 'priorityclasses.scheduling.k8s.io',
};

/** The canonical `resource[.group]` an include/exclude entry stands for. */
export function canonicalResourceEntry(entry: string): string {
  return RESOURCE_ALIASES[entry.toLowerCase()] ?? entry.toLowerCase();
}

/** True when one include/exclude entry names the item's resource. */
export function resourceEntryMatches(entry: string, item: Pick<SelectableItem, 'group' | 'resource'>): boolean {
  if (entry === '*') return true;
  const canonical = canonicalResourceEntry(entry);
  if (canonical.includes('.')) return canonical === groupResourceOf(item);
  return canonical === item.resource;
}

function includesEverything(includes: readonly string[]): boolean {
  return includes.length === 0 || includes.includes('*');
}

/**
 * Each filter's decisions, by the identity of its two lists (a spec's lists are never changed in
 * place). A plan asks once per listed item: 300k items against a backup naming 1,000 namespaces
 * were 150 M pattern tests, seconds in one event-loop turn of the process planning (issue #23).
 */
const namespaceDecisions = new WeakMap<readonly string[], WeakMap<readonly string[], Map<string, boolean>>>();

export function isNamespaceIncluded(namespace: string, filter: NamespaceFilter): boolean {
  let byExcludes = namespaceDecisions.get(filter.includedNamespaces);
  if (!byExcludes) {
    byExcludes = new WeakMap();
    namespaceDecisions.set(filter.includedNamespaces, byExcludes);
  }
  let decided = byExcludes.get(filter.excludedNamespaces);
  if (!decided) {
    decided = new Map();
    byExcludes.set(filter.excludedNamespaces, decided);
  }
  let included = decided.get(namespace);
  if (included === undefined) {
    included = decideNamespace(namespace, filter);
    decided.set(namespace, included);
  }
  return included;
}

/** Each namespace list's matcher, by the list's identity (as namespaceDecisions). */
const namespaceListMatchers = new WeakMap<readonly string[], (namespace: string) => boolean>();

function anyPatternMatches(patterns: readonly string[], namespace: string): boolean {
  let matcher = namespaceListMatchers.get(patterns);
  if (!matcher) {
    matcher = globListMatcher(patterns);
    namespaceListMatchers.set(patterns, matcher);
  }
  return matcher(namespace);
}

function decideNamespace(namespace: string, filter: NamespaceFilter): boolean {
  if (anyPatternMatches(filter.excludedNamespaces, namespace)) return false;
  if (includesEverything(filter.includedNamespaces)) return true;
  return anyPatternMatches(filter.includedNamespaces, namespace);
}

/** True when the backup covers every namespace (Velero's `IncludeEverything`). */
export function coversAllNamespaces(filter: NamespaceFilter): boolean {
  return includesEverything(filter.includedNamespaces) && filter.excludedNamespaces.length === 0;
}

/**
 * The namespaces a plan lists one by one, or undefined when it lists each type across the whole
 * cluster: every `includedNamespaces` entry is a name (no glob, no `*`) and at most `max` of them
 * pass the excludes. A backup of a few named namespaces then reads only their objects (one
 * namespace of a 100k-pod cluster: a page of pods, not 200); a backup of many namespaces lists
 * each type once for all of them (Velero, listing per namespace, made ~35,000 LISTs for 178
 * namespaces: #9869). Sorted and without repeats: the same plan whatever order the spec names them in.
 */
export function namespacesListedOneByOne(filter: NamespaceFilter, max: number): string[] | undefined {
  const includes = filter.includedNamespaces;
  if (includesEverything(includes) || includes.some(isGlob)) return undefined;
  const names = [...new Set(includes)].filter((name) => isNamespaceIncluded(name, filter)).sort();
  return names.length <= max ? names : undefined;
}

/** True when the spec uses the scoped resource filters (then the old include/exclude lists are empty). */
export function usesScopedResourceFilters(filter: ScopedResourceFilter): boolean {
  return [
    filter.includedClusterScopedResources,
    filter.excludedClusterScopedResources,
    filter.includedNamespaceScopedResources,
    filter.excludedNamespaceScopedResources,
  ].some((list) => list !== undefined && list.length > 0);
}

const named = (list: readonly string[] | undefined, item: Pick<SelectableItem, 'group' | 'resource'>) =>
  (list ?? []).some((entry) => resourceEntryMatches(entry, item));

/**
 * Whether the resource filters let the item's resource in. With scoped filters this needs to know
 * the scope (`namespaced`); for a cluster-scoped resource it answers "not excluded" — whether it
 * is also listed is clusterScopedListed's question.
 */
export function isResourceIncluded(
  item: Pick<SelectableItem, 'group' | 'resource'> & { namespaced?: boolean },
  filter: ResourceFilter,
): boolean {
  if (item.namespaced !== undefined && usesScopedResourceFilters(filter)) {
    if (item.namespaced) {
      if (named(filter.excludedNamespaceScopedResources, item)) return false;
      return includesEverything(filter.includedNamespaceScopedResources ?? []) || named(filter.includedNamespaceScopedResources, item);
    }
    return !named(filter.excludedClusterScopedResources, item);
  }
  if (filter.excludedResources.some((entry) => entry !== '*' && resourceEntryMatches(entry, item))) return false;
  if (includesEverything(filter.includedResources)) return true;
  return filter.includedResources.some((entry) => resourceEntryMatches(entry, item));
}

/** True when the item's labels satisfy `labelSelector`, or any of `orLabelSelectors`; no selector = all. */
export function matchesBackupSelectors(
  labels: Readonly<Record<string, string>> | undefined,
  spec: Pick<BackupSpec, 'labelSelector' | 'orLabelSelectors'>,
): boolean {
  if (spec.labelSelector) return matchesLabelSelector(spec.labelSelector, labels);
  if (spec.orLabelSelectors.length > 0) return spec.orLabelSelectors.some((selector) => matchesLabelSelector(selector, labels));
  return true;
}

function isNamespaceObject(item: SelectableItem): boolean {
  return item.group === '' && item.resource === 'namespaces';
}

/** Filters shared by listed and related items: the exclude label, resources, namespaces. */
function scopeExclusion(item: SelectableItem, spec: SelectionSpec): ExclusionReason | null {
  if (item.labels?.[NEVER_BACKUP_LABEL] === 'true') return 'never-backup-label';
  if (item.labels?.[EXCLUDE_FROM_BACKUP_LABEL] === 'true') return 'exclude-label';
  if (!isResourceIncluded(item, spec)) return 'resource-excluded';
  if (item.namespaced) {
    if (!isNamespaceIncluded(item.namespace ?? '', spec)) return 'namespace-excluded';
  } else if (isNamespaceObject(item) && item.name !== undefined) {
    if (!isNamespaceIncluded(item.name, spec)) return 'namespace-excluded';
  }
  return null;
}

/** Why a listed item is not in the backup, or null when it is. */
export function explainItemExclusion(item: SelectableItem, spec: SelectionSpec): ExclusionReason | null {
  const scoped = scopeExclusion(item, spec);
  if (scoped) return scoped;
  if (!item.namespaced && !isNamespaceObject(item) && !clusterScopedListed(item, spec)) return 'cluster-scoped-not-included';
  if (!matchesBackupSelectors(item.labels, spec)) return 'labels-not-matched';
  return null;
}

/**
 * Whether items of a cluster-scoped resource are listed for the backup (not only pulled in by a
 * relation): `includeClusterResources` with the old filters, the cluster include list with the
 * scoped ones (see the header). The resource filters' own verdict is isResourceIncluded's.
 */
export function clusterScopedListed(resource: Pick<SelectableItem, 'group' | 'resource'>, spec: SelectionSpec): boolean {
  if (!usesScopedResourceFilters(spec)) {
    return spec.includeClusterResources === true || (spec.includeClusterResources === null && coversAllNamespaces(spec));
  }
  const includes = spec.includedClusterScopedResources ?? [];
  const excludes = spec.excludedClusterScopedResources ?? [];
  if (includes.length === 0 && excludes.length === 0) {
    const everyNamespacedResource =
      includesEverything(spec.includedNamespaceScopedResources ?? []) && (spec.excludedNamespaceScopedResources ?? []).length === 0;
    return coversAllNamespaces(spec) && everyNamespacedResource;
  }
  return includes.includes('*') || named(includes, resource);
}

/** Is a listed item (one found by listing the cluster, not pulled in by a relation) in the backup? */
export function isItemIncluded(item: SelectableItem, spec: SelectionSpec): boolean {
  return explainItemExclusion(item, spec) === null;
}

/** Why an item pulled in by a relation (a pod's PVC, a PVC's PV or pods) is kept out, or null. */
export function explainRelatedItemExclusion(item: SelectableItem, spec: SelectionSpec): ExclusionReason | null {
  const scoped = scopeExclusion(item, spec);
  if (scoped) return scoped;
  if (!item.namespaced && !isNamespaceObject(item) && spec.includeClusterResources === false) return 'cluster-scoped-not-included';
  return null;
}

/**
 * True when the spec has no namespace, resource or label filter and lists cluster-scoped items:
 * then a listed item is in the backup unless it carries the exclude label, and an item with it is
 * kept out even when related (what isItemIncluded and isRelatedItemIncluded return for any item).
 */
export function selectsEverything(spec: SelectionSpec): boolean {
  return (
    coversAllNamespaces(spec) &&
    includesEverything(spec.includedResources) &&
    spec.excludedResources.length === 0 &&
    !spec.labelSelector &&
    spec.orLabelSelectors.length === 0 &&
    !usesScopedResourceFilters(spec) &&
    (spec.includeClusterResources === true || spec.includeClusterResources === null)
  );
}

/** Is an item pulled in by a relation allowed into the backup? (No label selector, see above.) */
export function isRelatedItemIncluded(item: SelectableItem, spec: SelectionSpec): boolean {
  return explainRelatedItemExclusion(item, spec) === null;
}
