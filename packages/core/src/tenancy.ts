/*
 * Tenants: who a backup, restore or schedule acts for (its requester), where it lives (a namespace,
 * or the cluster), and what a namespaced one may select. Kubernetes RBAC decides what a requester
 * may do (the callers ask the API server with a SubjectAccessReview); this module only says what
 * to ask and what a namespaced spec may name at all. See docs/tenancy.md.
 */
import type { BackupSpec } from './backup-spec.js';
import { hashParts } from './hash.js';
import { DNS1123_LABEL_MAX_LENGTH, isDns1123Label } from './names.js';
import { isNamespaceIncluded, isResourceIncluded, namespacesListedOneByOne, type ResourceFilter } from './resource-selection.js';
import type { RestoreSpec } from './restore/restore-spec.schema.js';
import type { ValidationProblem } from './spec-validation.js';

/**
 * Whose rights a run is checked against before Stowage uses its own for it (a spec hook's exec, a
 * restore into a mapped namespace):
 * - `user`: a Kubernetes identity (a REST caller's token as TokenReview named it, or the service
 *   account a namespaced resource names) — every such action is first asked of the API server as it.
 * - `stowage`: Stowage's own rights, unchecked — the static API tokens, an API without auth, and
 *   cluster-scoped resources applied with kubectl (`create clusterbackups` is a cluster-admin
 *   right). Runs recorded before requesters existed read as this.
 */
export type Requester =
  | { kind: 'user'; username: string; uid?: string; groups: string[]; extra?: Record<string, string[]> }
  | { kind: 'stowage'; via: 'static-token' | 'auth-disabled' | 'cluster-resource' | 'unrecorded' };

/** The identity a ServiceAccount authenticates as (its username and the groups the API server adds). */
export function serviceAccountRequester(namespace: string, name: string): Requester {
  return {
    kind: 'user',
    username: `system:serviceaccount:${namespace}:${name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
  };
}

/** The account a namespaced resource acts as when its spec names none (as a pod's). */
export const DEFAULT_SERVICE_ACCOUNT = 'default';

/** `User "alice"`, `ServiceAccount "a/default"`, or what Stowage's own rights came from; for messages. */
export function describeRequester(requester: Requester | undefined): string {
  if (requester === undefined || requester.kind === 'stowage') {
    switch (requester?.via) {
      case 'static-token':
        return 'a static API token (cluster-admin equivalent)';
      case 'auth-disabled':
        return 'the API with authentication disabled';
      case 'cluster-resource':
        return 'a cluster-scoped resource (Stowage’s own rights)';
      default:
        return 'Stowage (no requester recorded)';
    }
  }
  const sa = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(requester.username);
  return sa ? `ServiceAccount "${sa[1]}/${sa[2]}"` : `User "${requester.username}"`;
}

/** Whether Stowage must ask the API server before acting for this requester. */
export function isCheckedRequester(requester: Requester | undefined): requester is Extract<Requester, { kind: 'user' }> {
  return requester?.kind === 'user';
}

/** The attributes of a SubjectAccessReview (Kubernetes' `ResourceAttributes`). */
export interface AccessAttributes {
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  /** Absent: cluster-scoped (or every namespace, for a list). */
  namespace?: string;
  name?: string;
}

/** `create pods/exec` on one pod: what a spec hook's requester must hold before the exec. */
export function podExecAttributes(namespace: string, pod?: string): AccessAttributes {
  return { verb: 'create', group: '', resource: 'pods', subresource: 'exec', namespace, ...(pod !== undefined ? { name: pod } : {}) };
}

/** kube-apiserver's wording of a refusal: `User "x" cannot create resource "pods/exec" in API group "" in the namespace "kube-system"`. */
export function describeRefusal(requester: Requester | undefined, attrs: AccessAttributes): string {
  const who = requester?.kind === 'user' ? `User "${requester.username}"` : describeRequester(requester);
  const resource = attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
  const where = attrs.namespace ? `in the namespace "${attrs.namespace}"` : 'at the cluster scope';
  return `${who} cannot ${attrs.verb} resource "${resource}" in API group "${attrs.group}" ${where}`;
}

/**
 * The pipeline's name of a run (a key in Redis, a directory in storage, a prefix of job and PVB
 * names; a DNS-1123 label): a cluster-scoped run's own name; a namespaced one's
 * `<namespace>-<name>` (cut to fit) with 8 hex of a hash of both, so `a/b-c` and `a-b/c` never
 * meet. The record keeps namespace and name; this is only where they are stored.
 */
export function runKey(namespace: string | null | undefined, name: string): string {
  if (namespace === null || namespace === undefined || namespace === '') return name;
  const hash = hashParts('run', namespace, name).slice(0, 8);
  const prefix = `${namespace}-${name}`.slice(0, DNS1123_LABEL_MAX_LENGTH - hash.length - 1).replace(/-+$/, '');
  return `${prefix}-${hash}`;
}

/**
 * The label a namespaced backup's archived metadata (`velero-backup.json`) carries, naming its
 * namespace: a backup read back from storage (backup sync, a fresh install on the same bucket) keeps
 * its scope, and with it who may see, restore and delete it.
 */
export const RUN_NAMESPACE_LABEL = 'stowage.dev/namespace';

/** Where a run of a given name may live: a namespace, or undefined for a cluster-scoped run. */
export type RunScope = string | undefined;

/**
 * The scopes a run's name in the API may stand for, read from the name alone, so that a caller is
 * authorized before the run is looked up (as kube-apiserver authorizes the namespace in a URL
 * before it reads the object) and a refusal tells nothing of what exists where the caller may not
 * look. In order: each namespace `ns` for which a split `<ns>-<name>-<hash>` of the name re-derives
 * it (runKey), then the cluster (any name may be a cluster-scoped run's). When no split re-derives
 * it — a namespaced key whose `<ns>-<name>` runKey cut to fit, or a cluster-scoped name — the
 * cluster comes first, then each namespace the name begins with (`<ns>-`). At most 32 scopes.
 */
export function runKeyScopes(key: string): RunScope[] {
  const m = /^(.+)-[0-9a-f]{8}$/.exec(key);
  if (!m || key.length > DNS1123_LABEL_MAX_LENGTH) return [undefined];
  const joined = m[1] as string;
  const exact: string[] = [];
  const prefixes: string[] = [];
  for (let dash = joined.indexOf('-'); dash > 0; dash = joined.indexOf('-', dash + 1)) {
    const namespace = joined.slice(0, dash);
    if (!isDns1123Label(namespace)) continue;
    const name = joined.slice(dash + 1);
    if (name !== '' && runKey(namespace, name) === key) exact.push(namespace);
    else prefixes.push(namespace);
  }
  return exact.length > 0 ? [...exact, undefined] : [undefined, ...prefixes];
}

const outside = (what: string, namespace: string, hint: string) =>
  `${what} is outside this resource's namespace "${namespace}": a namespaced ${hint}`;

/**
 * What a Backup created in `namespace` may not select: it acts only on its own namespace (its
 * selection is narrowed to it by `confineBackupSpec`), so naming another namespace, cluster-scoped
 * resources, or a volume-policy ConfigMap (which lives in Stowage's namespace) is a problem with
 * its path. Hooks are not limited here: each exec is authorized as the requester.
 */
export function namespacedBackupProblems(spec: BackupSpec, namespace: string, prefix = 'spec'): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  spec.includedNamespaces.forEach((pattern, i) => {
    if (pattern !== '*' && pattern !== namespace)
      problems.push({
        path: `${prefix}.includedNamespaces[${i}]`,
        message: outside(JSON.stringify(pattern), namespace, 'Backup backs up only its own namespace (a ClusterBackup backs up others)'),
      });
  });
  spec.excludedNamespaces.forEach((pattern, i) => {
    if (pattern === namespace || pattern === '*')
      problems.push({
        path: `${prefix}.excludedNamespaces[${i}]`,
        message: `excludes the resource's own namespace "${namespace}": nothing would be backed up`,
      });
  });
  if (spec.includeClusterResources === true)
    problems.push({
      path: `${prefix}.includeClusterResources`,
      message: 'a namespaced Backup cannot include cluster-scoped resources (a ClusterBackup can); leave it unset or false',
    });
  (spec.includedClusterScopedResources ?? []).forEach((resource, i) => {
    problems.push({
      path: `${prefix}.includedClusterScopedResources[${i}]`,
      message: `${JSON.stringify(resource)}: a namespaced Backup cannot include cluster-scoped resources (a ClusterBackup can)`,
    });
  });
  if (spec.resourcePolicy?.kind === 'ConfigMap')
    problems.push({
      path: `${prefix}.resourcePolicy`,
      message:
        'a namespaced Backup takes its volume policies inline (volumePolicies); a ConfigMap reference names one in Stowage’s namespace',
    });
  return problems;
}

/** A namespaced Backup's spec narrowed to its namespace (call after `namespacedBackupProblems` found none). */
export function confineBackupSpec(spec: BackupSpec, namespace: string): BackupSpec {
  return { ...spec, includedNamespaces: [namespace], excludedNamespaces: [] };
}

/**
 * What a Restore created in `namespace` may not ask for: it restores a Backup of its own
 * namespace, only namespaced items, from that namespace; `namespaceMapping` may send them to
 * another namespace, which the requester must be allowed to write in (asked of the API server by
 * the caller, per kind: `restoreTargetNamespaces`).
 */
export function namespacedRestoreProblems(spec: RestoreSpec, namespace: string, prefix = 'spec'): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  spec.includedNamespaces.forEach((pattern, i) => {
    if (pattern !== '*' && pattern !== namespace)
      problems.push({
        path: `${prefix}.includedNamespaces[${i}]`,
        message: outside(JSON.stringify(pattern), namespace, 'Restore restores its namespace’s backups only'),
      });
  });
  if (spec.includeClusterResources === true)
    problems.push({
      path: `${prefix}.includeClusterResources`,
      message: 'cluster-scoped items are restored only by a ClusterRestore (create clusterrestores); leave it unset or false',
    });
  for (const source of Object.keys(spec.namespaceMapping)) {
    if (source !== namespace)
      problems.push({
        path: `${prefix}.namespaceMapping[${JSON.stringify(source)}]`,
        message: outside(`namespace ${JSON.stringify(source)}`, namespace, 'Restore holds only its own namespace’s items'),
      });
  }
  return problems;
}

/** A namespaced Restore's spec narrowed to its namespace, without cluster-scoped items. */
export function confineRestoreSpec(spec: RestoreSpec, namespace: string): RestoreSpec {
  return { ...spec, includedNamespaces: [namespace], excludedNamespaces: [], includeClusterResources: false };
}

/** The namespaces a restore writes into other than where the items came from (each needs the requester's rights). */
export function mappedTargetNamespaces(spec: Pick<RestoreSpec, 'namespaceMapping'>): string[] {
  return [...new Set(Object.entries(spec.namespaceMapping).flatMap(([from, to]) => (from !== to ? [to] : [])))].sort();
}

/**
 * Where a backup's spec hooks would exec, as far as the spec names it: every backup-level hook's
 * namespace, and each hook set's namespaces where it or the backup names them one by one. The
 * requester needs `create pods/exec` in each before the backup starts. `open` when a hook set
 * reaches namespaces only the plan will know (globs, every namespace): each exec there is checked
 * as the requester first, at the exec. Annotation hooks are not spec hooks (they run in their own pod).
 */
export function specHookNamespaces(spec: BackupSpec): { named: string[]; open: boolean } {
  const names = new Set<string>();
  let open = false;
  for (const hook of [...(spec.hooks.backup?.pre ?? []), ...(spec.hooks.backup?.post ?? [])]) names.add(hook.namespace);
  const backupNamed = namespacesListedOneByOne(spec, Number.POSITIVE_INFINITY);
  for (const set of spec.hooks.resources) {
    if (set.pre.length + set.post.length === 0) continue;
    const setNamed = namespacesListedOneByOne(set, Number.POSITIVE_INFINITY);
    if (setNamed) for (const ns of setNamed) if (isNamespaceIncluded(ns, spec)) names.add(ns);
    if (backupNamed) for (const ns of backupNamed) if (isNamespaceIncluded(ns, set)) names.add(ns);
    if (!setNamed && !backupNamed) open = true;
  }
  return { named: [...names].sort(), open };
}

/** A kind of a backup's resource list (`<apiVersion>/<Kind>`) as RBAC names it, or undefined when the cluster does not serve it. */
export type ResourceOfKind = (apiVersionKind: string) => { group: string; resource: string } | undefined;

/**
 * What a restore's requester must be allowed before Stowage writes into a mapped namespace with its
 * own rights: `create <resource>` in each target namespace for every kind the backup holds in the
 * source namespace that the restore's resource filters let in (from the backup's resource list,
 * `<apiVersion>/<Kind>` → `namespace/name` items). Kinds the cluster does not serve are returned
 * apart (the caller refuses: it cannot ask about them).
 */
export function mappedRestoreAttributes(
  spec: Pick<RestoreSpec, 'namespaceMapping'> & ResourceFilter,
  resourceList: Readonly<Record<string, readonly string[]>>,
  resourceOf: ResourceOfKind,
): { attributes: AccessAttributes[]; unknownKinds: string[] } {
  const attributes = new Map<string, AccessAttributes>();
  const unknownKinds = new Set<string>();
  for (const [from, to] of Object.entries(spec.namespaceMapping)) {
    if (from === to) continue;
    for (const [kind, items] of Object.entries(resourceList)) {
      if (!items.some((item) => item.startsWith(`${from}/`))) continue;
      const r = resourceOf(kind);
      if (!r) {
        unknownKinds.add(kind);
        continue;
      }
      if (!isResourceIncluded({ group: r.group, resource: r.resource, namespaced: true }, spec)) continue;
      const attrs: AccessAttributes = { verb: 'create', group: r.group, resource: r.resource, namespace: to };
      attributes.set(`${to}\0${r.group}\0${r.resource}`, attrs);
    }
  }
  return { attributes: [...attributes.values()], unknownKinds: [...unknownKinds].sort() };
}
