/**
 * RBAC authorization over the stored Roles, ClusterRoles and their bindings, with Kubernetes'
 * semantics (plus its privileged-group authorizer: `system:masters` may do anything).
 *
 * Speed: benchmarks push thousands of requests a second through the simulator, so bindings are
 * indexed by subject (a decision walks only the bindings that name the user, its groups or its
 * service account), and decisions are cached per (user, groups, verb, group, resource, subresource,
 * namespace, name). Both are rebuilt when any RBAC object changes (the store's generation of the
 * four RBAC buckets), never patched.
 */
import { isPlainObject, type KubeObject } from '../kube-object.js';
import type { ObjectStore } from '../object-store.js';
import { parseServiceAccountUsername, systemMasters, type UserInfo } from './identity.js';
import { type PolicyRule, type RequestAttributes, ruleAllows, rulesOf } from './rbac-rules.js';

export const rbacKeys = {
  roles: 'roles.rbac.authorization.k8s.io',
  roleBindings: 'rolebindings.rbac.authorization.k8s.io',
  clusterRoles: 'clusterroles.rbac.authorization.k8s.io',
  clusterRoleBindings: 'clusterrolebindings.rbac.authorization.k8s.io',
} as const;

export interface Decision {
  allowed: boolean;
  /** Why (RBAC's wording): the binding that allowed it, or the errors met while looking (missing roles). */
  reason: string;
}

export interface RoleRef {
  kind: string;
  name: string;
  apiGroup?: string;
}

interface IndexedBinding {
  binding: KubeObject;
  roleRef: RoleRef;
  /** How the matching subject is described in a reason: `Group "system:masters"`. */
  subject: string;
}

interface BindingIndex {
  cluster: Map<string, IndexedBinding[]>;
  /** namespace → subject key → bindings */
  namespaced: Map<string, Map<string, IndexedBinding[]>>;
}

type RoleRules = { rules: PolicyRule[] } | { error: string };

const decisionCacheLimit = 100_000;

function subjectKeysOf(user: UserInfo): string[] {
  const keys = [`User:${user.name}`];
  for (const group of user.groups) keys.push(`Group:${group}`);
  const sa = parseServiceAccountUsername(user.name);
  if (sa) keys.push(`ServiceAccount:${sa.namespace}/${sa.name}`);
  return keys;
}

function roleRefOf(binding: KubeObject): RoleRef | undefined {
  const ref = binding.roleRef;
  if (!isPlainObject(ref) || typeof ref.kind !== 'string' || typeof ref.name !== 'string') return undefined;
  return { kind: ref.kind, name: ref.name, ...(typeof ref.apiGroup === 'string' ? { apiGroup: ref.apiGroup } : {}) };
}

/** Index entries of one binding: a subject key and its description per subject that can ever match. */
function subjectEntries(binding: KubeObject, bindingNamespace: string): { key: string; description: string }[] {
  const subjects = Array.isArray(binding.subjects) ? binding.subjects : [];
  const entries: { key: string; description: string }[] = [];
  for (const subject of subjects) {
    if (!isPlainObject(subject) || typeof subject.name !== 'string') continue;
    switch (subject.kind) {
      case 'User':
      case 'Group':
        entries.push({ key: `${subject.kind}:${subject.name}`, description: `${subject.kind} ${JSON.stringify(subject.name)}` });
        break;
      case 'ServiceAccount': {
        // A RoleBinding's service account defaults to the binding's namespace; a ClusterRoleBinding's must name one.
        const namespace = typeof subject.namespace === 'string' && subject.namespace !== '' ? subject.namespace : bindingNamespace;
        if (namespace === '') break;
        entries.push({
          key: `ServiceAccount:${namespace}/${subject.name}`,
          description: `ServiceAccount ${JSON.stringify(`${subject.name}/${namespace}`)}`,
        });
        break;
      }
    }
  }
  return entries;
}

export class RbacAuthorizer {
  private generation = -1;
  private index: BindingIndex = { cluster: new Map(), namespaced: new Map() };
  private readonly decisions = new Map<string, Decision>();
  private readonly roleRules = new Map<string, RoleRules>();

  constructor(private readonly store: ObjectStore) {}

  /** Drops the index and caches when an RBAC object changed since they were built. */
  private refresh(): void {
    const generation = Math.max(
      this.store.generation(rbacKeys.roles),
      this.store.generation(rbacKeys.roleBindings),
      this.store.generation(rbacKeys.clusterRoles),
      this.store.generation(rbacKeys.clusterRoleBindings),
    );
    if (generation === this.generation) return;
    this.generation = generation;
    this.decisions.clear();
    this.roleRules.clear();
    const index: BindingIndex = { cluster: new Map(), namespaced: new Map() };
    const add = (map: Map<string, IndexedBinding[]>, key: string, entry: IndexedBinding) => {
      const list = map.get(key);
      if (list) list.push(entry);
      else map.set(key, [entry]);
    };
    for (const binding of this.store.list(rbacKeys.clusterRoleBindings, undefined)) {
      const roleRef = roleRefOf(binding);
      if (!roleRef) continue;
      for (const { key, description } of subjectEntries(binding, '')) add(index.cluster, key, { binding, roleRef, subject: description });
    }
    for (const binding of this.store.list(rbacKeys.roleBindings, undefined)) {
      const roleRef = roleRefOf(binding);
      const namespace = binding.metadata.namespace ?? '';
      if (!roleRef) continue;
      let byKey = index.namespaced.get(namespace);
      if (!byKey) {
        byKey = new Map();
        index.namespaced.set(namespace, byKey);
      }
      for (const { key, description } of subjectEntries(binding, namespace)) add(byKey, key, { binding, roleRef, subject: description });
    }
    this.index = index;
  }

  /** The rules a binding's roleRef grants (a Role in the binding's namespace, or a ClusterRole), or why none. */
  roleReferenceRules(roleRef: RoleRef, bindingNamespace: string): RoleRules {
    this.refresh();
    const cacheKey = `${roleRef.kind}/${bindingNamespace}/${roleRef.name}`;
    const cached = this.roleRules.get(cacheKey);
    if (cached) return cached;
    let result: RoleRules;
    if (roleRef.kind === 'ClusterRole') {
      const role = this.store.get(rbacKeys.clusterRoles, '', roleRef.name);
      result = role
        ? { rules: rulesOf(role) }
        : { error: `clusterrole.rbac.authorization.k8s.io ${JSON.stringify(roleRef.name)} not found` };
    } else if (roleRef.kind === 'Role') {
      const role = bindingNamespace === '' ? undefined : this.store.get(rbacKeys.roles, bindingNamespace, roleRef.name);
      result = role ? { rules: rulesOf(role) } : { error: `role.rbac.authorization.k8s.io ${JSON.stringify(roleRef.name)} not found` };
    } else {
      result = { error: `unsupported role reference kind: ${JSON.stringify(roleRef.kind)}` };
    }
    this.roleRules.set(cacheKey, result);
    return result;
  }

  /** Every binding that applies to `user` in `namespace` ('' = cluster bindings only), each once. */
  private bindingsFor(user: UserInfo, namespace: string): { binding: IndexedBinding; bindingNamespace: string }[] {
    this.refresh();
    const found: { binding: IndexedBinding; bindingNamespace: string }[] = [];
    const seen = new Set<KubeObject>();
    const keys = subjectKeysOf(user);
    for (const key of keys)
      for (const entry of this.index.cluster.get(key) ?? []) {
        if (seen.has(entry.binding)) continue;
        seen.add(entry.binding);
        found.push({ binding: entry, bindingNamespace: '' });
      }
    const byKey = namespace === '' ? undefined : this.index.namespaced.get(namespace);
    if (byKey)
      for (const key of keys)
        for (const entry of byKey.get(key) ?? []) {
          if (seen.has(entry.binding)) continue;
          seen.add(entry.binding);
          found.push({ binding: entry, bindingNamespace: namespace });
        }
    return found;
  }

  authorize(user: UserInfo, request: RequestAttributes): Decision {
    if (user.groups.includes(systemMasters)) return { allowed: true, reason: '' };
    this.refresh();
    const key = request.resourceRequest
      ? `r\0${request.verb}\0${request.apiGroup}\0${request.resource}\0${request.subresource}\0${request.namespace}\0${request.name}\0${user.name}\0${user.groups.join('\u0001')}`
      : `n\0${request.verb}\0${request.path}\0${user.name}\0${user.groups.join('\u0001')}`;
    const cached = this.decisions.get(key);
    if (cached) return cached;
    const decision = this.decide(user, request);
    if (this.decisions.size >= decisionCacheLimit) this.decisions.clear();
    this.decisions.set(key, decision);
    return decision;
  }

  private decide(user: UserInfo, request: RequestAttributes): Decision {
    const errors: string[] = [];
    for (const { binding, bindingNamespace } of this.bindingsFor(user, request.namespace)) {
      const granted = this.roleReferenceRules(binding.roleRef, bindingNamespace);
      if ('error' in granted) {
        errors.push(granted.error);
        continue;
      }
      if (granted.rules.some((rule) => ruleAllows(request, rule))) {
        const meta = binding.binding.metadata;
        const source =
          bindingNamespace === ''
            ? `ClusterRoleBinding ${JSON.stringify(meta.name)}`
            : `RoleBinding ${JSON.stringify(`${meta.name}/${meta.namespace}`)}`;
        return {
          allowed: true,
          reason: `RBAC: allowed by ${source} of ${binding.roleRef.kind} ${JSON.stringify(binding.roleRef.name)} to ${binding.subject}`,
        };
      }
    }
    if (errors.length === 0) return { allowed: false, reason: '' };
    return { allowed: false, reason: `RBAC: ${errors.length === 1 ? errors[0] : `[${errors.join(', ')}]`}` };
  }

  /** Every rule `user` holds in `namespace` (cluster-wide ones included), and the errors met resolving them. */
  rulesFor(user: UserInfo, namespace: string): { rules: PolicyRule[]; errors: string[] } {
    if (user.groups.includes(systemMasters))
      return {
        rules: [
          { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
          { nonResourceURLs: ['*'], verbs: ['*'] },
        ],
        errors: [],
      };
    const rules: PolicyRule[] = [];
    const errors: string[] = [];
    for (const { binding, bindingNamespace } of this.bindingsFor(user, namespace)) {
      const granted = this.roleReferenceRules(binding.roleRef, bindingNamespace);
      if ('error' in granted) errors.push(granted.error);
      else rules.push(...granted.rules);
    }
    return { rules, errors };
  }
}
