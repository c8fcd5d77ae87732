/**
 * Kubernetes' own RBAC cases, translated (facts carried over, our code): the rule-matching table and
 * the authorizer cases of plugin/pkg/auth/authorizer/rbac/rbac_test.go, the rule resolver and
 * subject cases of pkg/registry/rbac/validation/rule_test.go, and the escalation ("covers") cases of
 * policy_comparator_test.go. Each case keeps its upstream name.
 */
import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube-object.js';
import { ObjectStore } from '../object-store.js';
import { RbacAuthorizer, rbacKeys } from './authorizer.js';
import type { UserInfo } from './identity.js';
import {
  covers,
  nonResourceAttributes,
  nonResourceURLCovers,
  type PolicyRule,
  type RequestAttributes,
  resourceAttributes,
  ruleAllows,
} from './rbac-rules.js';

const rule = (verbs: string[], apiGroups: string[], resources: string[]): PolicyRule => ({ verbs, apiGroups, resources });
const urls = (verbs: string[], nonResourceURLs: string[]): PolicyRule => ({ verbs, nonResourceURLs });
const res = (verb: string, apiGroup: string, resource: string, subresource = '') =>
  resourceAttributes(verb, { apiGroup, resource, subresource });
const nonRes = (verb: string, path: string) => nonResourceAttributes(verb, path);

describe('TestRuleMatches (rbac_test.go)', () => {
  const cases: { name: string; rule: PolicyRule; expected: [RequestAttributes, boolean][] }[] = [
    {
      name: 'star verb, exact match other',
      rule: rule(['*'], ['group1'], ['resource1']),
      expected: [
        [res('verb1', 'group1', 'resource1'), true],
        [res('verb1', 'group2', 'resource1'), false],
        [res('verb1', 'group1', 'resource2'), false],
        [res('verb1', 'group2', 'resource2'), false],
        [res('verb2', 'group1', 'resource1'), true],
        [res('verb2', 'group2', 'resource1'), false],
        [res('verb2', 'group1', 'resource2'), false],
        [res('verb2', 'group2', 'resource2'), false],
      ],
    },
    {
      name: 'star group, exact match other',
      rule: rule(['verb1'], ['*'], ['resource1']),
      expected: [
        [res('verb1', 'group1', 'resource1'), true],
        [res('verb1', 'group2', 'resource1'), true],
        [res('verb1', 'group1', 'resource2'), false],
        [res('verb1', 'group2', 'resource2'), false],
        [res('verb2', 'group1', 'resource1'), false],
        [res('verb2', 'group2', 'resource1'), false],
        [res('verb2', 'group1', 'resource2'), false],
        [res('verb2', 'group2', 'resource2'), false],
      ],
    },
    {
      name: 'star resource, exact match other',
      rule: rule(['verb1'], ['group1'], ['*']),
      expected: [
        [res('verb1', 'group1', 'resource1'), true],
        [res('verb1', 'group2', 'resource1'), false],
        [res('verb1', 'group1', 'resource2'), true],
        [res('verb1', 'group2', 'resource2'), false],
        [res('verb2', 'group1', 'resource1'), false],
        [res('verb2', 'group2', 'resource1'), false],
        [res('verb2', 'group1', 'resource2'), false],
        [res('verb2', 'group2', 'resource2'), false],
      ],
    },
    {
      name: 'tuple expansion',
      rule: rule(['verb1', 'verb2'], ['group1', 'group2'], ['resource1', 'resource2']),
      expected: [
        [res('verb1', 'group1', 'resource1'), true],
        [res('verb1', 'group2', 'resource1'), true],
        [res('verb1', 'group1', 'resource2'), true],
        [res('verb1', 'group2', 'resource2'), true],
        [res('verb2', 'group1', 'resource1'), true],
        [res('verb2', 'group2', 'resource1'), true],
        [res('verb2', 'group1', 'resource2'), true],
        [res('verb2', 'group2', 'resource2'), true],
      ],
    },
    {
      name: 'subresource expansion',
      rule: rule(['*'], ['*'], ['resource1/subresource1']),
      expected: [
        [res('verb1', 'group1', 'resource1', 'subresource1'), true],
        [res('verb1', 'group2', 'resource1', 'subresource2'), false],
        [res('verb1', 'group1', 'resource2', 'subresource1'), false],
        [res('verb1', 'group2', 'resource2', 'subresource1'), false],
        [res('verb2', 'group1', 'resource1', 'subresource1'), true],
        [res('verb2', 'group2', 'resource1', 'subresource2'), false],
        [res('verb2', 'group1', 'resource2', 'subresource1'), false],
        [res('verb2', 'group2', 'resource2', 'subresource1'), false],
      ],
    },
    {
      name: 'star nonresource, exact match other',
      rule: urls(['verb1'], ['*']),
      expected: [
        [nonRes('verb1', '/foo'), true],
        [nonRes('verb1', '/foo/bar'), true],
        [nonRes('verb1', '/foo/baz'), true],
        [nonRes('verb1', '/foo/bar/one'), true],
        [nonRes('verb1', '/foo/baz/one'), true],
        [nonRes('verb2', '/foo'), false],
        [nonRes('verb2', '/foo/bar'), false],
        [nonRes('verb2', '/foo/baz'), false],
        [nonRes('verb2', '/foo/bar/one'), false],
        [nonRes('verb2', '/foo/baz/one'), false],
      ],
    },
    {
      name: 'star nonresource subpath',
      rule: urls(['verb1'], ['/foo/*']),
      expected: [
        [nonRes('verb1', '/foo'), false],
        [nonRes('verb1', '/foo/bar'), true],
        [nonRes('verb1', '/foo/baz'), true],
        [nonRes('verb1', '/foo/bar/one'), true],
        [nonRes('verb1', '/foo/baz/one'), true],
        [nonRes('verb1', '/notfoo'), false],
        [nonRes('verb1', '/notfoo/bar'), false],
        [nonRes('verb1', '/notfoo/baz'), false],
        [nonRes('verb1', '/notfoo/bar/one'), false],
        [nonRes('verb1', '/notfoo/baz/one'), false],
      ],
    },
    {
      name: 'star verb, exact nonresource',
      rule: urls(['*'], ['/foo', '/foo/bar/one']),
      expected: [
        [nonRes('verb1', '/foo'), true],
        [nonRes('verb1', '/foo/bar'), false],
        [nonRes('verb1', '/foo/baz'), false],
        [nonRes('verb1', '/foo/bar/one'), true],
        [nonRes('verb1', '/foo/baz/one'), false],
        [nonRes('verb2', '/foo'), true],
        [nonRes('verb2', '/foo/bar'), false],
        [nonRes('verb2', '/foo/baz'), false],
        [nonRes('verb2', '/foo/bar/one'), true],
        [nonRes('verb2', '/foo/baz/one'), false],
      ],
    },
  ];
  for (const c of cases)
    it(c.name, () => {
      for (const [request, expected] of c.expected)
        expect({ request, allowed: ruleAllows(request, c.rule) }).toEqual({ request, allowed: expected });
    });
});

// --- A store holding RBAC objects, as the authorizer reads them ---

type Subject = { kind: string; name: string; namespace?: string };
const subjectsOf = (list: string[]): Subject[] =>
  list.map((s) => {
    const [kind, name] = [s.slice(0, s.indexOf(':')), s.slice(s.indexOf(':') + 1)];
    return { kind, name, ...(kind === 'User' || kind === 'Group' ? { apiGroup: 'rbac.authorization.k8s.io' } : {}) } as Subject;
  });

function object(kind: string, name: string, namespace: string, body: Record<string, unknown>): KubeObject {
  const metadata: KubeObject['metadata'] = { name, resourceVersion: '1', uid: `${kind}-${namespace}-${name}` };
  if (namespace) metadata.namespace = namespace;
  return { apiVersion: 'rbac.authorization.k8s.io/v1', kind, metadata, ...body };
}

function authorizerWith(objects: {
  roles?: KubeObject[];
  roleBindings?: KubeObject[];
  clusterRoles?: KubeObject[];
  clusterRoleBindings?: KubeObject[];
}): RbacAuthorizer {
  const store = new ObjectStore(100);
  for (const o of objects.roles ?? []) store.put(rbacKeys.roles, o);
  for (const o of objects.roleBindings ?? []) store.put(rbacKeys.roleBindings, o);
  for (const o of objects.clusterRoles ?? []) store.put(rbacKeys.clusterRoles, o);
  for (const o of objects.clusterRoleBindings ?? []) store.put(rbacKeys.clusterRoleBindings, o);
  return new RbacAuthorizer(store);
}

let bindingCount = 0;
const clusterRole = (name: string, ...rules: PolicyRule[]) => object('ClusterRole', name, '', { rules });
const role = (name: string, namespace: string, ...rules: PolicyRule[]) => object('Role', name, namespace, { rules });
const clusterRoleBinding = (roleName: string, ...subjects: string[]) =>
  object('ClusterRoleBinding', `binding-${++bindingCount}`, '', {
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
    subjects: subjectsOf(subjects),
  });
const roleBinding = (namespace: string, roleName: string, kind: 'Role' | 'ClusterRole', ...subjects: string[]) =>
  object('RoleBinding', `binding-${++bindingCount}`, namespace, {
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind, name: roleName },
    subjects: subjectsOf(subjects),
  });
/** newRule(verbs, apiGroups, resources, nonResourceURLs) of rbac_test.go: each field split on commas. */
const newRule = (verbs: string, apiGroups: string, resources: string, nonResourceURLs: string): PolicyRule => ({
  verbs: verbs.split(','),
  apiGroups: apiGroups.split(','),
  resources: resources.split(','),
  nonResourceURLs: nonResourceURLs.split(','),
});
const user = (name: string, groups = ''): UserInfo => ({ name, groups: groups === '' ? [''] : groups.split(',') });
const attrs = (verb: string, resource: string, subresource: string, namespace: string) =>
  resourceAttributes(verb, { resource, subresource, namespace });

describe('TestAuthorizer (rbac_test.go)', () => {
  it('case 0: a namespaced binding of a *,*,* role', () => {
    const a = authorizerWith({
      clusterRoles: [clusterRole('admin', newRule('*', '*', '*', '*'))],
      roleBindings: [roleBinding('ns1', 'admin', 'ClusterRole', 'User:admin', 'Group:admins')],
    });
    const pass: [UserInfo, RequestAttributes][] = [
      [user('admin'), attrs('get', 'Pods', '', 'ns1')],
      [user('admin'), attrs('watch', 'Pods', '', 'ns1')],
      [user('admin', 'group1'), attrs('watch', 'Foobar', '', 'ns1')],
      [user('joe', 'admins'), attrs('watch', 'Foobar', '', 'ns1')],
      [user('joe', 'group1,admins'), attrs('watch', 'Foobar', '', 'ns1')],
    ];
    const fail: [UserInfo, RequestAttributes][] = [
      [user('admin'), attrs('GET', 'Pods', '', 'ns2')],
      [user('admin'), attrs('GET', 'Nodes', '', '')],
      [user('admin', 'admins'), attrs('GET', 'Pods', '', 'ns2')],
      [user('admin', 'admins'), attrs('GET', 'Nodes', '', '')],
    ];
    for (const [u, r] of pass) expect(a.authorize(u, r).allowed, JSON.stringify([u, r])).toBe(true);
    for (const [u, r] of fail) expect(a.authorize(u, r).allowed, JSON.stringify([u, r])).toBe(false);
  });

  it('case 1: non-resource URLs', () => {
    const a = authorizerWith({
      clusterRoles: [
        clusterRole('non-resource-url-getter', urls(['get'], ['/apis'])),
        clusterRole('non-resource-url', urls(['*'], ['/apis'])),
        clusterRole('non-resource-url-prefix', urls(['get'], ['/apis/*'])),
      ],
      clusterRoleBindings: [
        clusterRoleBinding('non-resource-url-getter', 'User:foo', 'Group:bar'),
        clusterRoleBinding('non-resource-url', 'User:admin', 'Group:admin'),
        clusterRoleBinding('non-resource-url-prefix', 'User:prefixed', 'Group:prefixed'),
      ],
    });
    const named = (name: string): UserInfo => ({ name, groups: [] });
    const grouped = (group: string): UserInfo => ({ name: '', groups: [group] });
    const pass: [UserInfo, RequestAttributes][] = [
      [named('foo'), nonRes('get', '/apis')],
      [grouped('bar'), nonRes('get', '/apis')],
      [named('admin'), nonRes('get', '/apis')],
      [grouped('admin'), nonRes('get', '/apis')],
      [named('admin'), nonRes('watch', '/apis')],
      [grouped('admin'), nonRes('watch', '/apis')],
      [named('prefixed'), nonRes('get', '/apis/v1')],
      [grouped('prefixed'), nonRes('get', '/apis/v1')],
      [named('prefixed'), nonRes('get', '/apis/v1/foobar')],
      [grouped('prefixed'), nonRes('get', '/apis/v1/foorbar')],
    ];
    const fail: [UserInfo, RequestAttributes][] = [
      // wrong verb
      [named('foo'), nonRes('watch', '/apis')],
      [grouped('bar'), nonRes('watch', '/apis')],
      // wrong path
      [named('foo'), nonRes('get', '/api/v1')],
      [grouped('bar'), nonRes('get', '/api/v1')],
      [named('admin'), nonRes('get', '/api/v1')],
      [grouped('admin'), nonRes('get', '/api/v1')],
      // not covered by prefix
      [named('prefixed'), nonRes('get', '/api/v1')],
      [grouped('prefixed'), nonRes('get', '/api/v1')],
    ];
    for (const [u, r] of pass) expect(a.authorize(u, r).allowed, JSON.stringify([u, r])).toBe(true);
    for (const [u, r] of fail) expect(a.authorize(u, r).allowed, JSON.stringify([u, r])).toBe(false);
  });

  it('case 2: a rule on pods does not cover pods/status', () => {
    const a = authorizerWith({
      clusterRoles: [clusterRole('admin', newRule('*', '*', 'pods', '*'))],
      roleBindings: [roleBinding('ns1', 'admin', 'ClusterRole', 'User:admin', 'Group:admins')],
    });
    expect(a.authorize(user('admin'), attrs('get', 'pods', '', 'ns1')).allowed).toBe(true);
    expect(a.authorize(user('admin'), attrs('get', 'pods', 'status', 'ns1')).allowed).toBe(false);
  });

  it('case 3: pods/status and */scale rules', () => {
    const a = authorizerWith({
      clusterRoles: [clusterRole('admin', newRule('*', '*', 'pods/status', '*'), newRule('*', '*', '*/scale', '*'))],
      roleBindings: [roleBinding('ns1', 'admin', 'ClusterRole', 'User:admin', 'Group:admins')],
    });
    for (const [resource, subresource] of [
      ['pods', 'status'],
      ['pods', 'scale'],
      ['deployments', 'scale'],
      ['anything', 'scale'],
    ] as const)
      expect(a.authorize(user('admin'), attrs('get', resource, subresource, 'ns1')).allowed).toBe(true);
    expect(a.authorize(user('admin'), attrs('get', 'pods', '', 'ns1')).allowed).toBe(false);
  });
});

describe('TestDefaultRuleResolver (rule_test.go)', () => {
  const ruleReadPods = rule(['GET', 'WATCH'], ['v1'], ['pods']);
  const ruleReadServices = rule(['GET', 'WATCH'], ['v1'], ['services']);
  const ruleWriteNodes = rule(['PUT', 'CREATE', 'UPDATE'], ['v1'], ['nodes']);
  const ruleAdmin = rule(['*'], ['*'], ['*']);
  const a = authorizerWith({
    roles: [role('readthings', 'namespace1', ruleReadPods, ruleReadServices)],
    clusterRoles: [clusterRole('cluster-admin', ruleAdmin), clusterRole('write-nodes', ruleWriteNodes)],
    roleBindings: [roleBinding('namespace1', 'readthings', 'Role', 'User:foobar', 'Group:group1')],
    clusterRoleBindings: [clusterRoleBinding('cluster-admin', 'User:admin', 'Group:admin')],
  });
  const sorted = (rules: PolicyRule[]) => [...rules].map((r) => JSON.stringify(r)).sort();
  it.each([
    { user: { name: 'foobar', groups: [] }, namespace: 'namespace1', effective: [ruleReadPods, ruleReadServices] },
    { user: { name: 'foobar', groups: [] }, namespace: 'namespace2', effective: [] },
    // Same as above but without a namespace. Only cluster rules should apply.
    { user: { name: 'foobar', groups: ['admin'] }, namespace: '', effective: [ruleAdmin] },
    { user: { name: '', groups: [] }, namespace: '', effective: [] },
  ])('rules of $user.name $user.groups in "$namespace"', ({ user: u, namespace, effective }) => {
    const { rules, errors } = a.rulesFor(u, namespace);
    expect(errors).toEqual([]);
    expect(sorted(rules)).toEqual(sorted(effective));
  });
});

describe('TestAppliesTo (rule_test.go)', () => {
  const cases: { testCase: string; subjects: Subject[]; user: UserInfo; namespace: string; appliesTo: boolean }[] = [
    {
      testCase: 'single subject that matches username',
      subjects: subjectsOf(['User:foobar']),
      user: { name: 'foobar', groups: [] },
      namespace: '',
      appliesTo: true,
    },
    {
      testCase: 'multiple subjects, one that matches username',
      subjects: subjectsOf(['User:barfoo', 'User:foobar']),
      user: { name: 'foobar', groups: [] },
      namespace: '',
      appliesTo: true,
    },
    {
      testCase: 'multiple subjects, none that match username',
      subjects: subjectsOf(['User:barfoo', 'User:foobar']),
      user: { name: 'zimzam', groups: [] },
      namespace: '',
      appliesTo: false,
    },
    {
      testCase: 'multiple subjects, one that match group',
      subjects: subjectsOf(['User:barfoo', 'Group:foobar']),
      user: { name: 'zimzam', groups: ['foobar'] },
      namespace: '',
      appliesTo: true,
    },
    {
      testCase: 'multiple subjects, one that match group, should ignore namespace',
      subjects: subjectsOf(['User:barfoo', 'Group:foobar']),
      user: { name: 'zimzam', groups: ['foobar'] },
      namespace: 'namespace1',
      appliesTo: true,
    },
    {
      testCase: 'multiple subjects with a service account that matches',
      subjects: [...subjectsOf(['User:barfoo', 'Group:foobar']), { kind: 'ServiceAccount', namespace: 'kube-system', name: 'default' }],
      user: { name: 'system:serviceaccount:kube-system:default', groups: [] },
      namespace: 'default',
      appliesTo: true,
    },
    {
      testCase: "* user subject name doesn't match all users",
      subjects: subjectsOf(['User:*']),
      user: { name: 'foobar', groups: [] },
      namespace: 'default',
      appliesTo: false,
    },
    {
      testCase: 'binding to all authenticated and unauthenticated subjects matches authenticated user',
      subjects: subjectsOf(['Group:system:authenticated', 'Group:system:unauthenticated']),
      user: { name: 'foobar', groups: ['system:authenticated'] },
      namespace: 'default',
      appliesTo: true,
    },
    {
      testCase: 'binding to all authenticated and unauthenticated subjects matches anonymous user',
      subjects: subjectsOf(['Group:system:authenticated', 'Group:system:unauthenticated']),
      user: { name: 'system:anonymous', groups: ['system:unauthenticated'] },
      namespace: 'default',
      appliesTo: true,
    },
  ];
  for (const c of cases)
    it(c.testCase, () => {
      // The subjects in a binding of a role that allows everything: the binding applies iff the request is allowed.
      const everything = clusterRole('everything', rule(['*'], ['*'], ['*']));
      const binding = object(c.namespace ? 'RoleBinding' : 'ClusterRoleBinding', 'b', c.namespace, {
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'everything' },
        subjects: c.subjects,
      });
      const a = c.namespace
        ? authorizerWith({ clusterRoles: [everything], roleBindings: [binding] })
        : authorizerWith({ clusterRoles: [everything], clusterRoleBindings: [binding] });
      expect(a.authorize(c.user, resourceAttributes('get', { resource: 'pods', namespace: c.namespace })).allowed).toBe(c.appliesTo);
    });
});

describe('escalation: Covers (policy_comparator_test.go)', () => {
  const cases: { name: string; owner: PolicyRule[]; servant: PolicyRule[]; covered: boolean; uncovered: PolicyRule[] }[] = [
    {
      name: 'TestCoversExactMatch',
      owner: [rule(['get'], ['v1'], ['builds'])],
      servant: [rule(['get'], ['v1'], ['builds'])],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversSubresourceWildcard',
      owner: [rule(['get'], ['v1'], ['*/scale'])],
      servant: [rule(['get'], ['v1'], ['foo/scale'])],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversMultipleRulesCoveringSingleRule',
      owner: [
        rule(['delete'], ['v1'], ['deployments']),
        rule(['delete'], ['v1'], ['builds']),
        rule(['update'], ['v1'], ['builds', 'deployments']),
      ],
      servant: [rule(['delete', 'update'], ['v1'], ['builds', 'deployments'])],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversMultipleAPIGroupsCoveringSingleRule',
      owner: [
        rule(['delete'], ['group1'], ['deployments']),
        rule(['delete'], ['group1'], ['builds']),
        rule(['update'], ['group1'], ['builds', 'deployments']),
        rule(['delete'], ['group2'], ['deployments']),
        rule(['delete'], ['group2'], ['builds']),
        rule(['update'], ['group2'], ['builds', 'deployments']),
      ],
      servant: [rule(['delete', 'update'], ['group1', 'group2'], ['builds', 'deployments'])],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversSingleAPIGroupsCoveringMultiple',
      owner: [rule(['delete', 'update'], ['group1', 'group2'], ['builds', 'deployments'])],
      servant: [
        rule(['delete'], ['group1'], ['deployments']),
        rule(['delete'], ['group1'], ['builds']),
        rule(['update'], ['group1'], ['builds', 'deployments']),
        rule(['delete'], ['group2'], ['deployments']),
        rule(['delete'], ['group2'], ['builds']),
        rule(['update'], ['group2'], ['builds', 'deployments']),
      ],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversMultipleRulesMissingSingleVerbResourceCombination',
      owner: [rule(['delete', 'update'], ['v1'], ['builds', 'deployments']), rule(['delete'], ['v1'], ['pods'])],
      servant: [rule(['delete', 'update'], ['v1'], ['builds', 'deployments', 'pods'])],
      covered: false,
      uncovered: [rule(['update'], ['v1'], ['pods'])],
    },
    {
      name: 'TestCoversAPIGroupStarCoveringMultiple',
      owner: [rule(['get'], ['*'], ['roles'])],
      servant: [rule(['get'], ['group1', 'group2'], ['roles'])],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversEnumerationNotCoveringAPIGroupStar',
      owner: [rule(['get'], ['dummy-group'], ['roles'])],
      servant: [rule(['get'], ['*'], ['roles'])],
      covered: false,
      uncovered: [rule(['get'], ['*'], ['roles'])],
    },
    {
      name: 'TestCoversAPIGroupStarCoveringStar',
      owner: [rule(['get'], ['*'], ['roles'])],
      servant: [rule(['get'], ['*'], ['roles'])],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversVerbStarCoveringMultiple',
      owner: [rule(['*'], ['v1'], ['roles'])],
      servant: [rule(['watch', 'list'], ['v1'], ['roles'])],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversEnumerationNotCoveringVerbStar',
      owner: [rule(['get', 'list', 'watch', 'create', 'update', 'delete', 'exec'], ['v1'], ['roles'])],
      servant: [rule(['*'], ['v1'], ['roles'])],
      covered: false,
      uncovered: [rule(['*'], ['v1'], ['roles'])],
    },
    {
      name: 'TestCoversVerbStarCoveringStar',
      owner: [rule(['*'], ['v1'], ['roles'])],
      servant: [rule(['*'], ['v1'], ['roles'])],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversResourceStarCoveringMultiple',
      owner: [rule(['get'], ['v1'], ['*'])],
      servant: [rule(['get'], ['v1'], ['resourcegroup:deployments'])],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversEnumerationNotCoveringResourceStar',
      owner: [rule(['get'], ['v1'], ['roles', 'resourcegroup:deployments'])],
      servant: [rule(['get'], ['v1'], ['*'])],
      covered: false,
      uncovered: [rule(['get'], ['v1'], ['*'])],
    },
    {
      name: 'TestCoversResourceStarCoveringStar',
      owner: [rule(['get'], ['v1'], ['*'])],
      servant: [rule(['get'], ['v1'], ['*'])],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversResourceNameEmptyCoveringMultiple',
      owner: [rule(['get'], ['v1'], ['pods'])],
      servant: [{ ...rule(['get'], ['v1'], ['pods']), resourceNames: ['foo', 'bar'] }],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversEnumerationNotCoveringResourceNameEmpty',
      owner: [{ ...rule(['get'], ['v1'], ['pods']), resourceNames: ['foo', 'bar'] }],
      servant: [rule(['get'], ['v1'], ['pods'])],
      covered: false,
      uncovered: [rule(['get'], ['v1'], ['pods'])],
    },
    { name: 'TestCoversNonResourceURLs', owner: [urls(['*'], ['/apis'])], servant: [urls(['*'], ['/apis'])], covered: true, uncovered: [] },
    {
      name: 'TestCoversNonResourceURLsStar',
      owner: [urls(['*'], ['*'])],
      servant: [urls(['*'], ['/apis', '/apis/v1', '/'])],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversNonResourceURLsStarAfterPrefixDoesntCover',
      owner: [urls(['*'], ['/apis/*'])],
      servant: [urls(['get'], ['/apis', '/apis/v1'])],
      covered: false,
      uncovered: [urls(['get'], ['/apis'])],
    },
    {
      name: 'TestCoversNonResourceURLsStarAfterPrefix',
      owner: [urls(['*'], ['/apis/*'])],
      servant: [urls(['get'], ['/apis/v1/foo', '/apis/v1'])],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversNonResourceURLsWithOtherFields',
      owner: [{ ...rule(['get'], ['v1'], ['builds']), nonResourceURLs: ['/apis'] }],
      servant: [{ ...rule(['get'], ['v1'], ['builds']), nonResourceURLs: ['/apis'] }],
      covered: true,
      uncovered: [],
    },
    {
      name: 'TestCoversNonResourceURLsWithOtherFieldsFailure',
      owner: [rule(['get'], ['v1'], ['builds'])],
      servant: [{ ...rule(['get'], ['v1'], ['builds']), nonResourceURLs: ['/apis'] }],
      covered: false,
      uncovered: [urls(['get'], ['/apis'])],
    },
  ];
  const normalised = (rules: PolicyRule[]) => rules.map((r) => JSON.stringify(r, Object.keys(r).sort())).sort();
  for (const c of cases)
    it(c.name, () => {
      const result = covers(c.owner, c.servant);
      expect(result.covered).toBe(c.covered);
      expect(normalised(result.uncovered)).toEqual(normalised(c.uncovered));
    });

  it.each([
    ['*', '/api', true],
    ['/api', '/api', true],
    ['/apis', '/api', false],
    ['/api/v1', '/api', false],
    ['/api/v1', '/api/v1', true],
    ['/api/*', '/api/v1', true],
    ['/api/*', '/api', false],
    ['/api/*/*', '/api/v1', false],
    ['/*/v1/*', '/api/v1', false],
  ])('TestNonResourceURLCovers: %s covers %s: %s', (owner, requested, want) => {
    expect(nonResourceURLCovers(owner, requested)).toBe(want);
  });
});
