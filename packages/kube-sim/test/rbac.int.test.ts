import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../src/index.js';
import { apiExceptionBody, execTransport, kubeConfigFromYaml, rawRequest } from './sim-helpers.js';

/*
 * RBAC as kube-apiserver enforces it, seen through client-node and raw requests: the 403 Status of
 * every request shape, lists and watches, status and exec, the review APIs, the aggregated default
 * roles, and escalation prevention.
 */
const rbacGroup = 'rbac.authorization.k8s.io';
const worker = 'system:serviceaccount:stowage:stowage-worker';

describe('RBAC authorization', () => {
  let sim: Simulator;
  let admin: k8s.KubeConfig;
  let workerToken: string;
  let rbac: k8s.RbacAuthorizationV1Api;

  const bind = async (
    namespace: string | undefined,
    name: string,
    role: { kind: 'Role' | 'ClusterRole'; name: string },
    subjects: k8s.RbacV1Subject[],
  ) => {
    const body = { metadata: { name }, roleRef: { apiGroup: rbacGroup, ...role }, subjects };
    if (namespace) await rbac.createNamespacedRoleBinding({ namespace, body });
    else await rbac.createClusterRoleBinding({ body });
  };
  const saSubject = (namespace: string, name: string): k8s.RbacV1Subject => ({ kind: 'ServiceAccount', namespace, name });
  const userSubject = (name: string): k8s.RbacV1Subject => ({ kind: 'User', apiGroup: rbacGroup, name });

  beforeAll(async () => {
    sim = await startSimulator({ materializeVolumes: 'none' });
    admin = kubeConfigFromYaml(sim.kubeconfigYaml);
    rbac = admin.makeApiClient(k8s.RbacAuthorizationV1Api);
    await admin
      .makeApiClient(k8s.CoreV1Api)
      .createNamespacedServiceAccount({ namespace: 'stowage', body: { metadata: { name: 'stowage-worker' } } });
    await rbac.createClusterRole({
      body: {
        metadata: { name: 'reader' },
        rules: [
          { apiGroups: ['', 'apps'], resources: ['pods', 'deployments', 'configmaps'], verbs: ['get', 'list', 'watch'] },
          { apiGroups: [''], resources: ['pods/exec'], verbs: ['create'] },
        ],
      },
    });
    await bind(undefined, 'worker-reads', { kind: 'ClusterRole', name: 'reader' }, [saSubject('stowage', 'stowage-worker')]);
    workerToken = sim.serviceAccountToken('stowage', 'stowage-worker');
  });
  afterAll(async () => {
    await sim?.close();
  });

  const forbiddenBody = (message: string, details: Record<string, string>) => ({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: 'Forbidden',
    details,
    code: 403,
  });

  it('answers a write the identity lacks with kube-apiserver’s 403 Status, for every request shape', async () => {
    const cases: { method: string; path: string; body?: unknown; message: string; details: Record<string, string> }[] = [
      {
        method: 'POST',
        path: '/apis/apps/v1/namespaces/shop/deployments',
        body: { metadata: { name: 'web2' } },
        message: `deployments.apps is forbidden: User "${worker}" cannot create resource "deployments" in API group "apps" in the namespace "shop"`,
        details: { group: 'apps', kind: 'deployments' },
      },
      {
        method: 'PUT',
        path: '/apis/apps/v1/namespaces/shop/deployments/web',
        body: { metadata: { name: 'web' } },
        message: `deployments.apps "web" is forbidden: User "${worker}" cannot update resource "deployments" in API group "apps" in the namespace "shop"`,
        details: { name: 'web', group: 'apps', kind: 'deployments' },
      },
      {
        method: 'DELETE',
        path: '/api/v1/namespaces/shop/pods/cache',
        message: `pods "cache" is forbidden: User "${worker}" cannot delete resource "pods" in API group "" in the namespace "shop"`,
        details: { name: 'cache', kind: 'pods' },
      },
      {
        method: 'DELETE',
        path: '/api/v1/namespaces/shop/configmaps',
        message: `configmaps is forbidden: User "${worker}" cannot deletecollection resource "configmaps" in API group "" in the namespace "shop"`,
        details: { kind: 'configmaps' },
      },
      {
        method: 'GET',
        path: '/api/v1/nodes',
        message: `nodes is forbidden: User "${worker}" cannot list resource "nodes" in API group "" at the cluster scope`,
        details: { kind: 'nodes' },
      },
      {
        method: 'GET',
        path: '/api/v1/namespaces/shop/secrets/postgres-credentials',
        message: `secrets "postgres-credentials" is forbidden: User "${worker}" cannot get resource "secrets" in API group "" in the namespace "shop"`,
        details: { name: 'postgres-credentials', kind: 'secrets' },
      },
      {
        method: 'PATCH',
        path: '/api/v1/namespaces/shop/pods/cache/status',
        body: { status: { phase: 'Failed' } },
        message: `pods "cache" is forbidden: User "${worker}" cannot patch resource "pods/status" in API group "" in the namespace "shop"`,
        details: { name: 'cache', kind: 'pods' },
      },
      {
        method: 'GET',
        path: '/api/v1/namespaces/shop',
        message: `namespaces "shop" is forbidden: User "${worker}" cannot get resource "namespaces" in API group "" in the namespace "shop"`,
        details: { name: 'shop', kind: 'namespaces' },
      },
      {
        method: 'GET',
        path: '/metrics',
        message: `forbidden: User "${worker}" cannot get path "/metrics"`,
        details: {},
      },
      {
        // A type that does not exist is refused before it is looked up, as on a real server.
        method: 'GET',
        path: '/apis/example.com/v1/widgets',
        message: `widgets.example.com is forbidden: User "${worker}" cannot list resource "widgets" in API group "example.com" at the cluster scope`,
        details: { group: 'example.com', kind: 'widgets' },
      },
    ];
    for (const c of cases) {
      const res = await rawRequest(sim, c.method, c.path, {
        token: workerToken,
        ...(c.body !== undefined ? { body: c.body } : {}),
        ...(c.method === 'PATCH' ? { headers: { 'Content-Type': 'application/merge-patch+json' } } : {}),
      });
      expect({ path: c.path, status: res.status, body: res.body }).toEqual({
        path: c.path,
        status: 403,
        body: forbiddenBody(c.message, c.details),
      });
    }
    expect(sim.state.store.get('pods', 'shop', 'cache')).toBeDefined();
    expect(sim.state.store.get('deployments.apps', 'shop', 'web2')).toBeUndefined();
  });

  it('answers a flood of requests for verbs the identity lacks with the 403 Status each, and keeps serving what it holds', async () => {
    const statuses = new Map<string, number>();
    const count = (key: string) => statuses.set(key, (statuses.get(key) ?? 0) + 1);
    const before = [...sim.state.store.list('configmaps', 'shop')].length;
    for (let round = 0; round < 10; round++) {
      await Promise.all(
        Array.from({ length: 100 }, async (_, i) => {
          const name = `flood-${round}-${i}`;
          const shape = i % 4;
          if (shape === 3) {
            // what the worker holds, between the refusals: answered as usual
            const ok = await rawRequest(sim, 'GET', '/api/v1/namespaces/shop/configmaps', { token: workerToken });
            count(`allowed ${ok.status}`);
            return;
          }
          const [method, path, verb, body] =
            shape === 0
              ? (['POST', '/api/v1/namespaces/shop/configmaps', 'create', { metadata: { name }, data: { a: 'b' } }] as const)
              : shape === 1
                ? (['DELETE', `/api/v1/namespaces/shop/configmaps/${name}`, 'delete', undefined] as const)
                : (['PATCH', `/apis/apps/v1/namespaces/shop/deployments/${name}`, 'patch', { spec: { replicas: 0 } }] as const);
          const res = await rawRequest(sim, method, path, {
            token: workerToken,
            ...(body ? { body } : {}),
            ...(method === 'PATCH' ? { headers: { 'Content-Type': 'application/merge-patch+json' } } : {}),
          });
          const expected = `User "${worker}" cannot ${verb} resource`;
          count(
            res.status === 403 && res.body.reason === 'Forbidden' && String(res.body.message).includes(expected)
              ? 'forbidden 403'
              : `other ${res.status}`,
          );
        }),
      );
    }
    expect(Object.fromEntries(statuses)).toEqual({ 'allowed 200': 250, 'forbidden 403': 750 });
    expect([...sim.state.store.list('configmaps', 'shop')]).toHaveLength(before);
    const after = await rawRequest(sim, 'GET', '/api/v1/namespaces/shop/pods', { token: workerToken });
    expect(after.status).toBe(200);
  });

  it('checks lists, watches and gets alike (client-node), including a watch of one name by field selector', async () => {
    const asWorker = kubeConfigFromYaml(sim.kubeconfigFor({ serviceAccount: { namespace: 'stowage', name: 'stowage-worker' } }).yaml);
    const apps = asWorker.makeApiClient(k8s.AppsV1Api);
    expect((await apps.listDeploymentForAllNamespaces()).items.map((d) => d.metadata?.name)).toContain('web');
    const secrets = await asWorker
      .makeApiClient(k8s.CoreV1Api)
      .listNamespacedSecret({ namespace: 'shop' })
      .catch((e) => e);
    expect(apiExceptionBody(secrets)).toMatchObject({
      code: 403,
      message: `secrets is forbidden: User "${worker}" cannot list resource "secrets" in API group "" in the namespace "shop"`,
    });
    const watchRefused = await rawRequest(sim, 'GET', '/api/v1/namespaces/shop/secrets?watch=true', { token: workerToken });
    expect(watchRefused.body.message).toBe(
      `secrets is forbidden: User "${worker}" cannot watch resource "secrets" in API group "" in the namespace "shop"`,
    );

    // resourceNames restrict a list/watch to the name its field selector asks for.
    await rbac.createNamespacedRole({
      namespace: 'shop',
      body: {
        metadata: { name: 'one-secret' },
        rules: [{ apiGroups: [''], resources: ['secrets'], resourceNames: ['postgres-credentials'], verbs: ['get', 'list', 'watch'] }],
      },
    });
    await bind('shop', 'worker-one-secret', { kind: 'Role', name: 'one-secret' }, [saSubject('stowage', 'stowage-worker')]);
    expect((await rawRequest(sim, 'GET', '/api/v1/namespaces/shop/secrets/postgres-credentials', { token: workerToken })).status).toBe(200);
    const byName = await rawRequest(sim, 'GET', '/api/v1/namespaces/shop/secrets?fieldSelector=metadata.name%3Dpostgres-credentials', {
      token: workerToken,
    });
    expect(byName.status).toBe(200);
    expect((await rawRequest(sim, 'GET', '/api/v1/namespaces/shop/secrets', { token: workerToken })).status).toBe(403);
    // Removing the binding takes the right away at once (decisions are cached until RBAC changes).
    await rbac.deleteNamespacedRoleBinding({ namespace: 'shop', name: 'worker-one-secret' });
    expect((await rawRequest(sim, 'GET', '/api/v1/namespaces/shop/secrets/postgres-credentials', { token: workerToken })).status).toBe(403);
  });

  it('asks for get and create on pods/exec before a WebSocket exec (create alone is refused)', async () => {
    const asWorker = kubeConfigFromYaml(sim.kubeconfigFor({ serviceAccount: { namespace: 'stowage', name: 'stowage-worker' } }).yaml);
    const exec = new k8s.Exec(asWorker, execTransport(asWorker));
    const attempt = () =>
      new Promise<string>((resolve, reject) => {
        exec
          .exec('shop', 'postgres-0', 'postgres', ['true'], null, null, null, false, (status) => resolve(String(status.status)))
          .catch((error: unknown) => reject(error));
      });
    await expect(attempt()).rejects.toThrow(/403/);
    expect(sim.execLog({ pod: 'postgres-0' })).toEqual([]);
    await rbac.createClusterRole({
      body: { metadata: { name: 'exec-get' }, rules: [{ apiGroups: [''], resources: ['pods/exec'], verbs: ['get'] }] },
    });
    await bind(undefined, 'worker-exec-get', { kind: 'ClusterRole', name: 'exec-get' }, [saSubject('stowage', 'stowage-worker')]);
    expect(await attempt()).toBe('Success');
    expect(sim.execLog({ pod: 'postgres-0' })).toHaveLength(1);
  });

  it('answers SubjectAccessReview, LocalSubjectAccessReview and SelfSubjectAccessReview; SAR needs its own right', async () => {
    const authz = admin.makeApiClient(k8s.AuthorizationV1Api);
    const sar = await authz.createSubjectAccessReview({
      body: {
        spec: {
          user: worker,
          groups: ['system:serviceaccounts', 'system:serviceaccounts:stowage', 'system:authenticated'],
          resourceAttributes: { verb: 'list', group: 'apps', resource: 'deployments' },
        },
      },
    });
    expect(sar.status).toMatchObject({
      allowed: true,
      reason: 'RBAC: allowed by ClusterRoleBinding "worker-reads" of ClusterRole "reader" to ServiceAccount "stowage-worker/stowage"',
    });
    const denied = await authz.createSubjectAccessReview({
      body: { spec: { user: worker, resourceAttributes: { verb: 'create', group: 'apps', resource: 'deployments', namespace: 'shop' } } },
    });
    expect(denied.status?.allowed).toBe(false);
    const local = await authz.createNamespacedLocalSubjectAccessReview({
      namespace: 'media',
      body: { spec: { user: worker, resourceAttributes: { verb: 'get', resource: 'configmaps' } } },
    });
    expect(local.status?.allowed).toBe(true);
    const noSubject = await authz.createSubjectAccessReview({ body: { spec: { resourceAttributes: { verb: 'get' } } } }).catch((e) => e);
    expect(apiExceptionBody(noSubject)).toMatchObject({ code: 422, reason: 'Invalid' });

    const asWorker = kubeConfigFromYaml(sim.kubeconfigFor({ serviceAccount: { namespace: 'stowage', name: 'stowage-worker' } }).yaml);
    const self = await asWorker.makeApiClient(k8s.AuthorizationV1Api).createSelfSubjectAccessReview({
      body: { spec: { resourceAttributes: { verb: 'create', resource: 'pods', subresource: 'exec', namespace: 'shop' } } },
    });
    expect(self.status?.allowed).toBe(true);
    const sarAsWorker = await asWorker
      .makeApiClient(k8s.AuthorizationV1Api)
      .createSubjectAccessReview({ body: { spec: { user: 'admin', resourceAttributes: { verb: 'get', resource: 'pods' } } } })
      .catch((e) => e);
    expect(apiExceptionBody(sarAsWorker)).toMatchObject({
      code: 403,
      message: `subjectaccessreviews.authorization.k8s.io is forbidden: User "${worker}" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`,
    });
    // system:auth-delegator grants TokenReview and SubjectAccessReview (what a service authenticating its own users needs).
    await bind(undefined, 'worker-delegates', { kind: 'ClusterRole', name: 'system:auth-delegator' }, [
      saSubject('stowage', 'stowage-worker'),
    ]);
    const delegated = await asWorker.makeApiClient(k8s.AuthorizationV1Api).createSubjectAccessReview({
      body: { spec: { user: 'admin', groups: ['system:masters'], resourceAttributes: { verb: 'get', resource: 'pods' } } },
    });
    expect(delegated.status?.allowed).toBe(true);
  });

  it('aggregates labelled ClusterRoles into edit, admin and view at once, and drops them again', async () => {
    const authz = admin.makeApiClient(k8s.AuthorizationV1Api);
    const can = async (user: string, verb: string, group: string, resource: string) =>
      (
        await authz.createSubjectAccessReview({
          body: { spec: { user, groups: ['system:authenticated'], resourceAttributes: { verb, group, resource, namespace: 'media' } } },
        })
      ).status?.allowed;
    await bind('media', 'dana-views', { kind: 'ClusterRole', name: 'view' }, [userSubject('dana')]);
    await bind('media', 'erin-admins', { kind: 'ClusterRole', name: 'admin' }, [userSubject('erin')]);
    expect(await can('dana', 'list', 'stowage.dev', 'backups')).toBe(false);
    expect(await can('dana', 'list', '', 'pods')).toBe(true);
    expect(await can('dana', 'get', '', 'secrets')).toBe(false);
    expect(await can('erin', 'create', 'rbac.authorization.k8s.io', 'rolebindings')).toBe(true);
    await rbac.createClusterRole({
      body: {
        metadata: { name: 'backups-view', labels: { 'rbac.authorization.k8s.io/aggregate-to-view': 'true' } },
        rules: [{ apiGroups: ['stowage.dev'], resources: ['backups'], verbs: ['get', 'list', 'watch'] }],
      },
    });
    expect(await can('dana', 'list', 'stowage.dev', 'backups')).toBe(true);
    // view is aggregated into edit, edit into admin.
    expect(await can('erin', 'list', 'stowage.dev', 'backups')).toBe(true);
    const view = await rbac.readClusterRole({ name: 'view' });
    expect(view.rules).toContainEqual({ apiGroups: ['stowage.dev'], resources: ['backups'], verbs: ['get', 'list', 'watch'] });
    await rbac.deleteClusterRole({ name: 'backups-view' });
    expect(await can('dana', 'list', 'stowage.dev', 'backups')).toBe(false);
    expect(await can('erin', 'list', 'stowage.dev', 'backups')).toBe(false);
  });

  it('defaults the API groups of a binding as kube-apiserver does, and refuses a malformed RBAC object with 422 naming the field', async () => {
    const loose = await rawRequest(sim, 'POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/media/rolebindings', {
      token: sim.adminToken,
      body: {
        metadata: { name: 'loose' },
        roleRef: { kind: 'ClusterRole', name: 'view' },
        subjects: [
          { kind: 'User', name: 'kim' },
          { kind: 'ServiceAccount', name: 'media' },
        ],
      },
    });
    expect(loose.status).toBe(201);
    expect(loose.body).toMatchObject({
      roleRef: { apiGroup: rbacGroup, kind: 'ClusterRole', name: 'view' },
      subjects: [
        { kind: 'User', name: 'kim', apiGroup: rbacGroup },
        { kind: 'ServiceAccount', name: 'media' },
      ],
    });
    // A ServiceAccount's API group is "", which kube-apiserver's JSON omits: re-applying the binding changes nothing.
    expect((loose.body.subjects as unknown[])[1]).not.toHaveProperty('apiGroup');
    const bad = await rawRequest(sim, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      token: sim.adminToken,
      body: { metadata: { name: 'bad' }, roleRef: { kind: 'Role', name: 'x' }, subjects: [{ kind: 'ServiceAccount', name: 'nowhere' }] },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.message).toBe(
      'ClusterRoleBinding.rbac.authorization.k8s.io "bad" is invalid: roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole", subjects[0].namespace: Required value',
    );
    const noVerbs = await rawRequest(sim, 'POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/media/roles', {
      token: sim.adminToken,
      body: {
        metadata: { name: 'noverbs' },
        rules: [
          { apiGroups: [''], resources: ['pods'] },
          { nonResourceURLs: ['/healthz'], verbs: ['get'] },
        ],
      },
    });
    expect(noVerbs.body.message).toBe(
      'Role.rbac.authorization.k8s.io "noverbs" is invalid: rules[0].verbs: Required value: verbs must contain at least one value, rules[1].nonResourceURLs: Invalid value: []string{"/healthz"}: namespaced rules cannot apply to non-resource URLs',
    );
  });

  describe('escalation prevention', () => {
    let frank: k8s.RbacAuthorizationV1Api;
    beforeAll(async () => {
      // frank administers namespace media (the admin ClusterRole, bound there), nothing else.
      await bind('media', 'frank-admins', { kind: 'ClusterRole', name: 'admin' }, [userSubject('frank')]);
      frank = kubeConfigFromYaml(sim.kubeconfigFor({ user: 'frank' }).yaml).makeApiClient(k8s.RbacAuthorizationV1Api);
    });

    it('lets a namespace admin create a Role and bindings within what it holds', async () => {
      await frank.createNamespacedRole({
        namespace: 'media',
        body: { metadata: { name: 'pod-reader' }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] }] },
      });
      await frank.createNamespacedRoleBinding({
        namespace: 'media',
        body: {
          metadata: { name: 'gina-reads' },
          roleRef: { apiGroup: rbacGroup, kind: 'Role', name: 'pod-reader' },
          subjects: [userSubject('gina')],
        },
      });
      await frank.createNamespacedRoleBinding({
        namespace: 'media',
        body: {
          metadata: { name: 'gina-edits' },
          roleRef: { apiGroup: rbacGroup, kind: 'ClusterRole', name: 'edit' },
          subjects: [userSubject('gina')],
        },
      });
    });

    it('refuses a Role granting more than its writer holds, naming the missing rights', async () => {
      const refused = await frank
        .createNamespacedRole({
          namespace: 'media',
          body: {
            metadata: { name: 'too-much' },
            rules: [
              { apiGroups: [''], resources: ['pods'], verbs: ['get'] },
              { apiGroups: ['stowage.dev'], resources: ['podvolumebackups'], verbs: ['get', 'delete'] },
            ],
          },
        })
        .catch((e) => e);
      expect(apiExceptionBody(refused)).toMatchObject({
        code: 403,
        reason: 'Forbidden',
        message:
          'roles.rbac.authorization.k8s.io "too-much" is forbidden: user "frank" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n' +
          '{APIGroups:["stowage.dev"], Resources:["podvolumebackups"], Verbs:["get" "delete"]}',
      });
      // An update that adds rights is refused the same way.
      const role = await frank.readNamespacedRole({ namespace: 'media', name: 'pod-reader' });
      const widened = await frank
        .replaceNamespacedRole({
          namespace: 'media',
          name: 'pod-reader',
          body: { ...role, rules: [...(role.rules ?? []), { apiGroups: [''], resources: ['nodes'], verbs: ['list'] }] },
        })
        .catch((e) => e);
      expect(apiExceptionBody(widened).code).toBe(403);
    });

    it('refuses a binding to a role whose rules its writer does not hold, unless it may bind that role', async () => {
      const binding = {
        metadata: { name: 'frank-is-root' },
        roleRef: { apiGroup: rbacGroup, kind: 'ClusterRole', name: 'cluster-admin' },
        subjects: [userSubject('frank')],
      };
      const refused = await frank.createNamespacedRoleBinding({ namespace: 'media', body: binding }).catch((e) => e);
      expect(apiExceptionBody(refused)).toMatchObject({ code: 403, reason: 'Forbidden' });
      expect(apiExceptionBody(refused).message).toMatch(
        /^rolebindings\.rbac\.authorization\.k8s\.io "frank-is-root" is forbidden: user "frank" \(groups=\["system:authenticated"\]\) is attempting to grant RBAC permissions not currently held:\n/,
      );
      // A binding to a role that does not exist, by one who may not bind it: 404, as kube-apiserver's rule resolver answers.
      const missingRole = await frank
        .createNamespacedRoleBinding({
          namespace: 'media',
          body: {
            metadata: { name: 'to-nothing' },
            roleRef: { apiGroup: rbacGroup, kind: 'Role', name: 'nope' },
            subjects: [userSubject('frank')],
          },
        })
        .catch((e) => e);
      expect(apiExceptionBody(missingRole)).toMatchObject({ code: 404, message: 'roles.rbac.authorization.k8s.io "nope" not found' });
      // `bind` on that very ClusterRole, in that namespace, is enough.
      await rbac.createClusterRole({
        body: {
          metadata: { name: 'bind-cluster-admin' },
          rules: [{ apiGroups: [rbacGroup], resources: ['clusterroles'], resourceNames: ['cluster-admin'], verbs: ['bind'] }],
        },
      });
      await bind('media', 'frank-may-bind', { kind: 'ClusterRole', name: 'bind-cluster-admin' }, [userSubject('frank')]);
      await frank.createNamespacedRoleBinding({ namespace: 'media', body: binding });
    });

    it('lets an identity with escalate create a Role granting what it does not hold', async () => {
      await rbac.createClusterRole({
        body: { metadata: { name: 'escalate-roles' }, rules: [{ apiGroups: [rbacGroup], resources: ['roles'], verbs: ['escalate'] }] },
      });
      await bind('shop', 'frank-escalates', { kind: 'ClusterRole', name: 'escalate-roles' }, [userSubject('frank')]);
      await bind('shop', 'frank-admins-shop', { kind: 'ClusterRole', name: 'admin' }, [userSubject('frank')]);
      const created = await frank.createNamespacedRole({
        namespace: 'shop',
        body: { metadata: { name: 'anything' }, rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }] },
      });
      expect(created.metadata?.name).toBe('anything');
    });

    it('refuses an aggregationRule to anyone without cluster-admin’s rights', async () => {
      await rbac.createClusterRole({
        body: {
          metadata: { name: 'manage-clusterroles' },
          rules: [{ apiGroups: [rbacGroup], resources: ['clusterroles'], verbs: ['create'] }],
        },
      });
      await bind(undefined, 'frank-clusterroles', { kind: 'ClusterRole', name: 'manage-clusterroles' }, [userSubject('frank')]);
      const refused = await frank
        .createClusterRole({
          body: { metadata: { name: 'collector' }, aggregationRule: { clusterRoleSelectors: [{ matchLabels: { anything: 'true' } }] } },
        })
        .catch((e) => e);
      expect(apiExceptionBody(refused)).toMatchObject({
        code: 403,
        message:
          'clusterroles.rbac.authorization.k8s.io "collector" is forbidden: must have cluster-admin privileges to use the aggregationRule',
      });
    });
  });
});
