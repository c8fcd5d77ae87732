import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../src/index.js';
import { kubectlRunner } from './kubectl-helper.js';
import { apiExceptionBody, kubeConfigFromYaml, rawRequest } from './sim-helpers.js';

/*
 * Who a request is: bearer tokens (static ones, TokenRequest's service-account tokens), anonymous
 * requests, TokenReview and SelfSubjectReview, impersonation — over HTTP with client-node, raw
 * requests and the real kubectl.
 */
describe('authentication', () => {
  let sim: Simulator;
  let kubectl: ReturnType<typeof kubectlRunner>;
  let admin: k8s.KubeConfig;

  beforeAll(async () => {
    sim = await startSimulator({ materializeVolumes: 'none' });
    kubectl = kubectlRunner(sim.kubeconfigPath);
    admin = kubeConfigFromYaml(sim.kubeconfigYaml);
    const core = admin.makeApiClient(k8s.CoreV1Api);
    for (const name of ['robot', 'short-lived', 'doomed'])
      await core.createNamespacedServiceAccount({ namespace: 'shop', body: { metadata: { name } } });
  });
  afterAll(async () => {
    kubectl?.cleanup();
    await sim?.close();
  });

  const unauthorized = {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'Unauthorized',
    reason: 'Unauthorized',
    code: 401,
  };

  it('answers a request without a token with 401 Unauthorized, except the public health and version paths and the control API', async () => {
    for (const path of ['/api/v1/namespaces/shop/pods', '/api', '/apis/apps/v1', '/openapi/v3', '/api/v1/nodes/node-a', '/no/such/path']) {
      const res = await rawRequest(sim, 'GET', path);
      expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 401, body: unauthorized });
    }
    expect((await rawRequest(sim, 'POST', '/api/v1/namespaces', { body: { metadata: { name: 'sneaky' } } })).status).toBe(401);
    for (const path of ['/version', '/healthz', '/livez', '/readyz']) expect((await rawRequest(sim, 'GET', path)).status).toBe(200);
    expect((await rawRequest(sim, 'GET', '/_sim/info')).status).toBe(200);
    // nothing was created by the refused request
    expect(sim.state.store.get('namespaces', '', 'sneaky')).toBeUndefined();
  });

  it('answers a malformed, unknown, forged or other-scheme credential with 401', async () => {
    const valid = sim.serviceAccountToken('shop', 'robot');
    const [head, payload, signature] = valid.split('.') as [string, string, string];
    const otherAccount = Buffer.from(Buffer.from(payload, 'base64url').toString().replace('"robot"', '"admin"')).toString('base64url');
    const tokens = {
      malformed: 'not.a.jwt.at.all',
      unknown: 'c29tZS1yYW5kb20tdG9rZW4tbm9ib2R5LWlzc3VlZA',
      'flipped signature': `${head}.${payload}.${signature.slice(0, -2)}${signature.endsWith('AA') ? 'BB' : 'AA'}`,
      'payload edited': `${head}.${otherAccount}.${signature}`,
      empty: '',
    };
    for (const [what, token] of Object.entries(tokens)) {
      const res = await rawRequest(sim, 'GET', '/api/v1/namespaces/shop/configmaps', { token });
      expect({ what, status: res.status, reason: res.body.reason }).toEqual({ what, status: 401, reason: 'Unauthorized' });
    }
    const basic = await rawRequest(sim, 'GET', '/api/v1/namespaces', { headers: { Authorization: 'Basic YWRtaW46YWRtaW4=' } });
    expect(basic.status).toBe(401);
  });

  it('refuses a service-account token once it has expired', async () => {
    const token = sim.serviceAccountToken('shop', 'short-lived', { expirationSeconds: 1 });
    const whoami = () => rawRequest(sim, 'POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', { token, body: {} });
    expect((await whoami()).status).toBe(201);
    // Expiry has second precision: the token is dead within two seconds.
    const deadline = Date.now() + 5000;
    let status = 201;
    while (status !== 401 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      status = (await whoami()).status;
    }
    expect(status).toBe(401);
  });

  it('revokes the tokens of a deleted service account, also when one of the same name is created again', async () => {
    const token = sim.serviceAccountToken('shop', 'doomed');
    const get = () => rawRequest(sim, 'POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', { token, body: {} });
    expect((await get()).status).toBe(201);
    const core = admin.makeApiClient(k8s.CoreV1Api);
    await core.deleteNamespacedServiceAccount({ namespace: 'shop', name: 'doomed' });
    expect((await get()).status).toBe(401);
    await core.createNamespacedServiceAccount({ namespace: 'shop', body: { metadata: { name: 'doomed' } } });
    expect((await get()).status).toBe(401);
  });

  it('mints tokens with TokenRequest (client-node): the account authenticates as system:serviceaccount:NS:NAME with its groups', async () => {
    const core = admin.makeApiClient(k8s.CoreV1Api);
    const minted = await core.createNamespacedServiceAccountToken({
      namespace: 'shop',
      name: 'robot',
      body: { spec: { audiences: [], expirationSeconds: 1200 } },
    });
    const token = minted.status?.token ?? '';
    expect(token.split('.')).toHaveLength(3);
    const expires = Date.parse(String(minted.status?.expirationTimestamp));
    expect(expires - Date.now()).toBeGreaterThan(1190_000);
    expect(expires - Date.now()).toBeLessThan(1210_000);

    const robotConfig = sim.kubeconfigFor({ serviceAccount: { namespace: 'shop', name: 'robot' } });
    // a kubeconfig's token is not refreshed by anything, so it lasts a day unless asked otherwise
    const claims = JSON.parse(Buffer.from(robotConfig.token.split('.')[1]!, 'base64url').toString()) as { exp: number; iat: number };
    expect(claims.exp - claims.iat).toBe(24 * 3600);
    const asRobot = kubeConfigFromYaml(robotConfig.yaml);
    const review = await asRobot.makeApiClient(k8s.AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    expect(review.status?.userInfo?.username).toBe('system:serviceaccount:shop:robot');
    expect(review.status?.userInfo?.groups).toEqual(['system:serviceaccounts', 'system:serviceaccounts:shop', 'system:authenticated']);

    const reviewed = await admin.makeApiClient(k8s.AuthenticationV1Api).createTokenReview({ body: { spec: { token } } });
    expect(reviewed.status?.authenticated).toBe(true);
    expect(reviewed.status?.user?.username).toBe('system:serviceaccount:shop:robot');
    expect(reviewed.status?.user?.uid).toBe(sim.state.store.get('serviceaccounts', 'shop', 'robot')?.metadata.uid);
    expect(reviewed.status?.audiences).toEqual(['https://kubernetes.default.svc.cluster.local']);

    const bogus = await admin.makeApiClient(k8s.AuthenticationV1Api).createTokenReview({ body: { spec: { token: 'bogus' } } });
    expect(bogus.status?.authenticated).toBeFalsy();
    expect(bogus.status?.error).toMatch(/invalid bearer token/);
    // A token minted for another audience does not authenticate to the API server, but a review for that audience accepts it.
    const forVault = await core.createNamespacedServiceAccountToken({
      namespace: 'shop',
      name: 'robot',
      body: { spec: { audiences: ['vault'] } },
    });
    expect((await rawRequest(sim, 'GET', '/api/v1/namespaces/shop/configmaps', { token: forVault.status!.token })).status).toBe(401);
    const vaultReview = await admin
      .makeApiClient(k8s.AuthenticationV1Api)
      .createTokenReview({ body: { spec: { token: forVault.status!.token, audiences: ['vault'] } } });
    expect(vaultReview.status?.authenticated).toBe(true);
  });

  it('refuses TokenRequest for an account that does not exist (404) or a lifetime under 10 minutes (422)', async () => {
    const core = admin.makeApiClient(k8s.CoreV1Api);
    const missing = await core
      .createNamespacedServiceAccountToken({ namespace: 'shop', name: 'nobody', body: { spec: { audiences: [] } } })
      .catch((e) => e);
    expect(apiExceptionBody(missing)).toMatchObject({ code: 404, reason: 'NotFound', message: 'serviceaccounts "nobody" not found' });
    const short = await core
      .createNamespacedServiceAccountToken({ namespace: 'shop', name: 'robot', body: { spec: { audiences: [], expirationSeconds: 599 } } })
      .catch((e) => e);
    expect(apiExceptionBody(short)).toMatchObject({
      code: 422,
      reason: 'Invalid',
      message:
        'TokenRequest.authentication.k8s.io "robot" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes',
    });
    expect(() => sim.serviceAccountToken('shop', 'nobody')).toThrow(/does not exist/);
  });

  it('kubectl create token mints a token the account can use; kubectl auth whoami says who it is', async () => {
    const created = await kubectl.run(['create', 'token', 'robot', '-n', 'shop', '--duration=15m']);
    expect(created.stderr).toBe('');
    const token = created.stdout.trim();
    const reviewed = await admin.makeApiClient(k8s.AuthenticationV1Api).createTokenReview({ body: { spec: { token } } });
    expect(reviewed.status?.user?.username).toBe('system:serviceaccount:shop:robot');
    const missing = await kubectl.run(['create', 'token', 'nobody', '-n', 'shop']);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('serviceaccounts "nobody" not found');

    const alice = sim.kubeconfigFor({ user: 'alice', groups: ['team-a'] });
    const whoami = await kubectl.run(['auth', 'whoami', '-o', 'json'], { kubeconfig: alice.path });
    expect(JSON.parse(whoami.stdout).status.userInfo).toEqual({ username: 'alice', groups: ['team-a', 'system:authenticated'] });
  });

  it('impersonates for identities allowed to, with the impersonated account’s groups, and refuses others with 403', async () => {
    const asWorker = await kubectl.run(['auth', 'whoami', '-o', 'json', '--as=system:serviceaccount:stowage:stowage-worker']);
    expect(JSON.parse(asWorker.stdout).status.userInfo).toEqual({
      username: 'system:serviceaccount:stowage:stowage-worker',
      groups: ['system:serviceaccounts', 'system:serviceaccounts:stowage', 'system:authenticated'],
    });
    const asGroup = await kubectl.run(['auth', 'whoami', '-o', 'json', '--as=carol', '--as-group=auditors']);
    expect(JSON.parse(asGroup.stdout).status.userInfo).toEqual({ username: 'carol', groups: ['auditors', 'system:authenticated'] });

    const bob = sim.addUser('bob');
    const refused = await rawRequest(sim, 'GET', '/api/v1/namespaces/shop/configmaps', {
      token: bob,
      headers: { 'Impersonate-User': 'admin' },
    });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({
      reason: 'Forbidden',
      message: 'users "admin" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope',
      details: { name: 'admin', kind: 'users' },
    });
    const refusedAccount = await rawRequest(sim, 'GET', '/api/v1/namespaces/shop/configmaps', {
      token: bob,
      headers: { 'Impersonate-User': 'system:serviceaccount:shop:robot' },
    });
    expect(refusedAccount.body.message).toBe(
      'serviceaccounts "robot" is forbidden: User "bob" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "shop"',
    );
    const groupWithoutUser = await rawRequest(sim, 'GET', '/api/v1/namespaces/shop/configmaps', {
      token: bob,
      headers: { 'Impersonate-Group': 'x' },
    });
    expect(groupWithoutUser.status).toBe(400);

    // edit (through its aggregated rules) lets bob impersonate the service accounts of `shop`, nothing else.
    const rbac = admin.makeApiClient(k8s.RbacAuthorizationV1Api);
    await rbac.createNamespacedRoleBinding({
      namespace: 'shop',
      body: {
        metadata: { name: 'bob-edits' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'bob' }],
      },
    });
    const asRobot = await rawRequest(sim, 'POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      token: bob,
      body: {},
      headers: { 'Impersonate-User': 'system:serviceaccount:shop:robot' },
    });
    expect(asRobot.status).toBe(201);
    expect((asRobot.body.status as { userInfo: { username: string } }).userInfo.username).toBe('system:serviceaccount:shop:robot');
    const elsewhere = await rawRequest(sim, 'GET', '/version', {
      token: bob,
      headers: { 'Impersonate-User': 'system:serviceaccount:media:default' },
    });
    expect(elsewhere.status).toBe(403);
  });

  it('answers a flood of bad tokens with 401 and stays available to good ones', async () => {
    const good = sim.serviceAccountToken('shop', 'robot');
    const statuses = new Map<number, number>();
    for (let round = 0; round < 10; round++) {
      const batch = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          rawRequest(sim, 'GET', '/api/v1/namespaces/shop/configmaps', {
            token: i % 3 === 0 ? `${good.slice(0, -4)}${String(round).padStart(4, 'x')}` : i % 3 === 1 ? `garbage-${round}-${i}` : 'a.b.c',
          }).then((r) => r.status),
        ),
      );
      for (const status of batch) statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
    expect(Object.fromEntries(statuses)).toEqual({ 401: 1000 });
    const whoami = await rawRequest(sim, 'POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', { token: good, body: {} });
    expect(whoami.status).toBe(201);
  });
});
