/**
 * The default ClusterRoles and ClusterRoleBindings a Kubernetes API server bootstraps (facts of its
 * bootstrap policy, as of 1.32), limited to the user-facing ones: `cluster-admin`, the aggregated
 * `admin`/`edit`/`view` with the `system:aggregate-to-*` roles that fill them, self-review rights for
 * everyone authenticated (`system:basic-user`), discovery, public info, and `system:auth-delegator`
 * (TokenReview/SubjectAccessReview for services that authenticate their own users).
 */
import type { KubeObject } from '../kube-object.js';
import { allAuthenticated, allUnauthenticated, systemMasters } from './identity.js';
import type { PolicyRule } from './rbac-rules.js';

const rbacGroup = 'rbac.authorization.k8s.io';
const read = ['get', 'list', 'watch'];
const write = ['create', 'delete', 'deletecollection', 'patch', 'update'];
const readWrite = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

const meta = (name: string, labels: Record<string, string> = {}) => ({
  name,
  labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults', ...labels },
  annotations: { 'rbac.authorization.kubernetes.io/autoupdate': 'true' },
});

function clusterRole(
  name: string,
  rules: PolicyRule[],
  options: { labels?: Record<string, string>; aggregateFrom?: string } = {},
): KubeObject {
  const role: KubeObject = { apiVersion: `${rbacGroup}/v1`, kind: 'ClusterRole', metadata: meta(name, options.labels), rules };
  if (options.aggregateFrom)
    role.aggregationRule = { clusterRoleSelectors: [{ matchLabels: { [`rbac.authorization.k8s.io/${options.aggregateFrom}`]: 'true' } }] };
  return role;
}

function binding(name: string, role: string, groups: string[]): KubeObject {
  return {
    apiVersion: `${rbacGroup}/v1`,
    kind: 'ClusterRoleBinding',
    metadata: meta(name),
    roleRef: { apiGroup: rbacGroup, kind: 'ClusterRole', name: role },
    subjects: groups.map((group) => ({ apiGroup: rbacGroup, kind: 'Group', name: group })),
  };
}

const rule = (verbs: string[], apiGroups: string[], resources: string[]): PolicyRule => ({ apiGroups, resources, verbs });

export function bootstrapClusterRoles(): KubeObject[] {
  return [
    clusterRole('cluster-admin', [
      { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
      { nonResourceURLs: ['*'], verbs: ['*'] },
    ]),
    // Aggregated: their rules are the union of the roles labelled aggregate-to-<name> (a controller keeps them).
    clusterRole('admin', [], { aggregateFrom: 'aggregate-to-admin' }),
    clusterRole('edit', [], { aggregateFrom: 'aggregate-to-edit', labels: { 'rbac.authorization.k8s.io/aggregate-to-admin': 'true' } }),
    clusterRole('view', [], { aggregateFrom: 'aggregate-to-view', labels: { 'rbac.authorization.k8s.io/aggregate-to-edit': 'true' } }),
    clusterRole(
      'system:aggregate-to-admin',
      [rule(['create'], ['authorization.k8s.io'], ['localsubjectaccessreviews']), rule(readWrite, [rbacGroup], ['rolebindings', 'roles'])],
      { labels: { 'rbac.authorization.k8s.io/aggregate-to-admin': 'true' } },
    ),
    clusterRole(
      'system:aggregate-to-edit',
      [
        rule(read, [''], ['pods/attach', 'pods/exec', 'pods/portforward', 'pods/proxy', 'secrets', 'services/proxy']),
        rule(['impersonate'], [''], ['serviceaccounts']),
        rule(write, [''], ['pods', 'pods/attach', 'pods/exec', 'pods/portforward', 'pods/proxy']),
        rule(['create'], [''], ['pods/eviction']),
        rule(
          write,
          [''],
          [
            'configmaps',
            'events',
            'persistentvolumeclaims',
            'replicationcontrollers',
            'replicationcontrollers/scale',
            'secrets',
            'serviceaccounts',
            'services',
            'services/proxy',
          ],
        ),
        rule(['create'], [''], ['serviceaccounts/token']),
        rule(
          write,
          ['apps'],
          [
            'daemonsets',
            'deployments',
            'deployments/rollback',
            'deployments/scale',
            'replicasets',
            'replicasets/scale',
            'statefulsets',
            'statefulsets/scale',
          ],
        ),
        rule(write, ['autoscaling'], ['horizontalpodautoscalers']),
        rule(write, ['batch'], ['cronjobs', 'jobs']),
        rule(
          write,
          ['extensions'],
          [
            'daemonsets',
            'deployments',
            'deployments/rollback',
            'deployments/scale',
            'ingresses',
            'networkpolicies',
            'replicasets',
            'replicasets/scale',
            'replicationcontrollers/scale',
          ],
        ),
        rule(write, ['policy'], ['poddisruptionbudgets']),
        rule(write, ['networking.k8s.io'], ['ingresses', 'networkpolicies']),
        rule(readWrite, ['coordination.k8s.io'], ['leases']),
      ],
      { labels: { 'rbac.authorization.k8s.io/aggregate-to-edit': 'true' } },
    ),
    clusterRole(
      'system:aggregate-to-view',
      [
        rule(
          read,
          [''],
          [
            'configmaps',
            'endpoints',
            'persistentvolumeclaims',
            'persistentvolumeclaims/status',
            'pods',
            'replicationcontrollers',
            'replicationcontrollers/scale',
            'serviceaccounts',
            'services',
            'services/status',
          ],
        ),
        rule(
          read,
          [''],
          [
            'bindings',
            'events',
            'limitranges',
            'namespaces/status',
            'pods/log',
            'pods/status',
            'replicationcontrollers/status',
            'resourcequotas',
            'resourcequotas/status',
          ],
        ),
        rule(read, [''], ['namespaces']),
        rule(read, ['discovery.k8s.io'], ['endpointslices']),
        rule(
          read,
          ['apps'],
          [
            'controllerrevisions',
            'daemonsets',
            'daemonsets/status',
            'deployments',
            'deployments/scale',
            'deployments/status',
            'replicasets',
            'replicasets/scale',
            'replicasets/status',
            'statefulsets',
            'statefulsets/scale',
            'statefulsets/status',
          ],
        ),
        rule(read, ['autoscaling'], ['horizontalpodautoscalers', 'horizontalpodautoscalers/status']),
        rule(read, ['batch'], ['cronjobs', 'cronjobs/status', 'jobs', 'jobs/status']),
        rule(
          read,
          ['extensions'],
          [
            'daemonsets',
            'daemonsets/status',
            'deployments',
            'deployments/scale',
            'deployments/status',
            'ingresses',
            'ingresses/status',
            'networkpolicies',
            'replicasets',
            'replicasets/scale',
            'replicasets/status',
            'replicationcontrollers/scale',
          ],
        ),
        rule(read, ['policy'], ['poddisruptionbudgets', 'poddisruptionbudgets/status']),
        rule(read, ['networking.k8s.io'], ['ingresses', 'ingresses/status', 'networkpolicies']),
      ],
      { labels: { 'rbac.authorization.k8s.io/aggregate-to-view': 'true' } },
    ),
    clusterRole('system:basic-user', [
      rule(['create'], ['authorization.k8s.io'], ['selfsubjectaccessreviews', 'selfsubjectrulesreviews']),
      rule(['create'], ['authentication.k8s.io'], ['selfsubjectreviews']),
    ]),
    clusterRole('system:discovery', [
      {
        nonResourceURLs: [
          '/api',
          '/api/*',
          '/apis',
          '/apis/*',
          '/healthz',
          '/livez',
          '/openapi',
          '/openapi/*',
          '/readyz',
          '/version',
          '/version/',
        ],
        verbs: ['get'],
      },
    ]),
    clusterRole('system:public-info-viewer', [
      { nonResourceURLs: ['/healthz', '/livez', '/readyz', '/version', '/version/'], verbs: ['get'] },
    ]),
    clusterRole('system:auth-delegator', [
      rule(['create'], ['authentication.k8s.io'], ['tokenreviews']),
      rule(['create'], ['authorization.k8s.io'], ['subjectaccessreviews']),
    ]),
  ];
}

export function bootstrapClusterRoleBindings(): KubeObject[] {
  return [
    binding('cluster-admin', 'cluster-admin', [systemMasters]),
    binding('system:basic-user', 'system:basic-user', [allAuthenticated]),
    binding('system:discovery', 'system:discovery', [allAuthenticated]),
    binding('system:public-info-viewer', 'system:public-info-viewer', [allAuthenticated, allUnauthenticated]),
  ];
}
