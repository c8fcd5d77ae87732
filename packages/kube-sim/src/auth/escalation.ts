/**
 * RBAC's escalation prevention on writes of Roles, ClusterRoles and their bindings (kube-apiserver's
 * policy-based RBAC storage): a role may grant only what its writer holds, unless the writer may
 * `escalate` it; a binding may reference only a role whose rules its writer holds, unless the writer
 * may `bind` it; an aggregationRule needs cluster-admin's rights. `system:masters` is exempt.
 */
import { forbidden, notFound } from '../api-status.js';
import { deepEqual, isPlainObject, type KubeObject } from '../kube-object.js';
import type { ResourceType } from '../resource-registry.js';
import type { RbacAuthorizer, RoleRef } from './authorizer.js';
import type { UserInfo } from './identity.js';
import { compactRules, compactString, covers, goQuotedList, type PolicyRule, resourceAttributes, rulesOf } from './rbac-rules.js';

const rbacGroup = 'rbac.authorization.k8s.io';
const fullAuthority: PolicyRule[] = [
  { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
  { nonResourceURLs: ['*'], verbs: ['*'] },
];

function hasAggregationRule(role: KubeObject | undefined): boolean {
  const rule = role?.aggregationRule;
  return isPlainObject(rule) && Array.isArray(rule.clusterRoleSelectors) && rule.clusterRoleSelectors.length > 0;
}

/** True when an update changes nothing but what garbage collection needs (owner references, finalizers). */
function onlyGcFieldsChanged(object: KubeObject, previous: KubeObject): boolean {
  const strip = (o: KubeObject) => {
    const { ownerReferences: _o, finalizers: _f, resourceVersion: _r, managedFields: _m, generation: _g, ...metadata } = o.metadata;
    return { ...o, metadata };
  };
  return deepEqual(strip(object), strip(previous));
}

/** The writer's rules must cover `rules`: else kube-apiserver's "attempting to grant RBAC permissions not currently held". */
function confirmNoEscalation(
  authorizer: RbacAuthorizer,
  user: UserInfo,
  namespace: string,
  rules: PolicyRule[],
): { ok: true } | { ok: false; message: string } {
  const owner = authorizer.rulesFor(user, namespace);
  const { covered, uncovered } = covers(owner.rules, rules);
  if (covered) return { ok: true };
  const missing = [...new Set(compactRules(uncovered).map(compactString))].sort();
  let message = `user ${JSON.stringify(user.name)} (groups=${goQuotedList(user.groups)}) is attempting to grant RBAC permissions not currently held:\n${missing.join('\n')}`;
  if (owner.errors.length > 0) message += `; resolution errors: [${owner.errors.join(' ')}]`;
  return { ok: false, message };
}

/** Checks a create or update of an RBAC object by `user`; throws kube-apiserver's 403 (or 404 for a missing role). */
export function checkRbacWrite(
  authorizer: RbacAuthorizer,
  user: UserInfo,
  type: ResourceType,
  object: KubeObject,
  previous: KubeObject | undefined,
  /** The name in the request's URL ('' on a create): what the `escalate` check is asked about. */
  requestName: string,
): void {
  if (type.group !== rbacGroup || user.groups.includes('system:masters')) return;
  const name = object.metadata.name ?? '';
  const namespace = type.namespaced ? (object.metadata.namespace ?? '') : '';
  if (previous && onlyGcFieldsChanged(object, previous)) return;
  if (type.plural === 'roles' || type.plural === 'clusterroles') {
    // The `escalate` check uses the request's name (none on a create), as kube-apiserver's.
    const escalate = resourceAttributes('escalate', {
      apiGroup: rbacGroup,
      apiVersion: '*',
      resource: type.plural,
      namespace,
      name: requestName,
    });
    if (authorizer.authorize(user, escalate).allowed) return;
    const confirmed = confirmNoEscalation(authorizer, user, namespace, rulesOf(object));
    if (!confirmed.ok) throw forbidden(type.plural, rbacGroup, name, confirmed.message);
    if (type.plural === 'clusterroles' && (hasAggregationRule(object) || hasAggregationRule(previous))) {
      if (!confirmNoEscalation(authorizer, user, '', fullAuthority).ok)
        throw forbidden(type.plural, rbacGroup, name, 'must have cluster-admin privileges to use the aggregationRule');
    }
    return;
  }
  if (type.plural === 'rolebindings' || type.plural === 'clusterrolebindings') {
    const ref = isPlainObject(object.roleRef) ? object.roleRef : {};
    const roleRef: RoleRef = { kind: String(ref.kind ?? ''), name: String(ref.name ?? ''), apiGroup: String(ref.apiGroup ?? '') };
    const bind = resourceAttributes('bind', {
      apiGroup: roleRef.apiGroup ?? '',
      apiVersion: '*',
      resource: roleRef.kind === 'ClusterRole' ? 'clusterroles' : 'roles',
      namespace,
      name: roleRef.name,
    });
    if ((roleRef.kind === 'ClusterRole' || roleRef.kind === 'Role') && authorizer.authorize(user, bind).allowed) return;
    const granted = authorizer.roleReferenceRules(roleRef, namespace);
    if ('error' in granted) throw notFound(roleRef.kind === 'ClusterRole' ? 'clusterroles' : 'roles', rbacGroup, roleRef.name);
    const confirmed = confirmNoEscalation(authorizer, user, namespace, granted.rules);
    if (!confirmed.ok) throw forbidden(type.plural, rbacGroup, name, confirmed.message);
  }
}
