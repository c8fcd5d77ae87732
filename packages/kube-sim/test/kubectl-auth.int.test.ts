import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../src/index.js';
import { kubectlRunner } from './kubectl-helper.js';

/*
 * kubectl 1.32 as against a real server: its typed commands (create …, create token, auth can-i,
 * auth whoami) send protobuf bodies and ask for protobuf answers; apply of the rendered dev overlay
 * goes through discovery, OpenAPI and JSON patches; can-i answers from RBAC, also with --as.
 */
const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

describe('kubectl with authentication and RBAC', () => {
  let sim: Simulator;
  let kubectl: ReturnType<typeof kubectlRunner>;

  beforeAll(async () => {
    sim = await startSimulator({ materializeVolumes: 'none' });
    kubectl = kubectlRunner(sim.kubeconfigPath);
  });
  afterAll(async () => {
    kubectl?.cleanup();
    await sim?.close();
  });

  const ok = async (...args: string[]) => {
    const result = await kubectl.run(args);
    expect(result.stderr, `kubectl ${args.join(' ')}`).toBe('');
    expect(result.code).toBe(0);
    return result.stdout;
  };

  it('creates namespaces, configmaps, secrets, service accounts, roles and bindings (protobuf bodies)', async () => {
    expect(await ok('create', 'namespace', 'team-a')).toBe('namespace/team-a created\n');
    expect(await ok('create', 'configmap', 'settings', '-n', 'team-a', '--from-literal=mode=fast', '--from-literal=size=3')).toBe(
      'configmap/settings created\n',
    );
    expect(await ok('create', 'secret', 'generic', 'creds', '-n', 'team-a', '--from-literal=password=s3cr3t')).toBe(
      'secret/creds created\n',
    );
    expect(await ok('create', 'serviceaccount', 'builder', '-n', 'team-a')).toBe('serviceaccount/builder created\n');
    expect(await ok('create', 'role', 'pod-reader', '-n', 'team-a', '--verb=get,list', '--resource=pods,pods/log')).toBe(
      'role.rbac.authorization.k8s.io/pod-reader created\n',
    );
    expect(await ok('create', 'rolebinding', 'builder-reads', '-n', 'team-a', '--role=pod-reader', '--serviceaccount=team-a:builder')).toBe(
      'rolebinding.rbac.authorization.k8s.io/builder-reads created\n',
    );
    expect(await ok('create', 'clusterrole', 'node-reader', '--verb=get,list', '--resource=nodes')).toBe(
      'clusterrole.rbac.authorization.k8s.io/node-reader created\n',
    );
    expect(await ok('create', 'clusterrolebinding', 'ops-nodes', '--clusterrole=node-reader', '--group=ops')).toBe(
      'clusterrolebinding.rbac.authorization.k8s.io/ops-nodes created\n',
    );

    // What was stored is what was sent (decoded from protobuf): data, base64 secret data, rules, subjects.
    expect(sim.state.store.get('configmaps', 'team-a', 'settings')?.data).toEqual({ mode: 'fast', size: '3' });
    expect(sim.state.store.get('secrets', 'team-a', 'creds')?.data).toEqual({ password: Buffer.from('s3cr3t').toString('base64') });
    expect(sim.state.store.get('roles.rbac.authorization.k8s.io', 'team-a', 'pod-reader')?.rules).toEqual([
      { apiGroups: [''], resources: ['pods', 'pods/log'], verbs: ['get', 'list'] },
    ]);
    expect(sim.state.store.get('rolebindings.rbac.authorization.k8s.io', 'team-a', 'builder-reads')).toMatchObject({
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-reader' },
      subjects: [{ kind: 'ServiceAccount', name: 'builder', namespace: 'team-a' }],
    });
    const cm = JSON.parse(await ok('get', 'configmap', 'settings', '-n', 'team-a', '-o', 'json'));
    expect(cm.metadata.uid).toBe(sim.state.store.get('configmaps', 'team-a', 'settings')?.metadata.uid);

    const duplicate = await kubectl.run(['create', 'namespace', 'team-a']);
    expect(duplicate.code).not.toBe(0);
    expect(duplicate.stderr).toContain('Error from server (AlreadyExists): namespaces "team-a" already exists');
  });

  it('answers kubectl auth can-i from RBAC, as the admin and with --as, and lists rules with --list', async () => {
    await ok('create', 'namespace', 'team-b');
    await ok('create', 'serviceaccount', 'deployer', '-n', 'team-b');
    await ok('create', 'rolebinding', 'deployer-edits', '-n', 'team-b', '--clusterrole=edit', '--serviceaccount=team-b:deployer');
    await ok('create', 'rolebinding', 'hana-views', '-n', 'team-b', '--clusterrole=view', '--user=hana');
    const deployer = '--as=system:serviceaccount:team-b:deployer';
    const table: [string[], 'yes' | 'no'][] = [
      [['create', 'deployments', '-n', 'team-b'], 'yes'],
      [['create', 'deployments', '-n', 'team-b', deployer], 'yes'],
      [['create', 'deployments', '-n', 'team-a', deployer], 'no'],
      [['create', 'pods/exec', '-n', 'team-b', deployer], 'yes'],
      [['get', 'secrets', '-n', 'team-b', deployer], 'yes'],
      [['create', 'rolebindings', '-n', 'team-b', deployer], 'no'],
      [['list', 'nodes', deployer], 'no'],
      [['get', 'pods', '-n', 'team-b', '--as=hana'], 'yes'],
      [['get', 'secrets', '-n', 'team-b', '--as=hana'], 'no'],
      [['get', 'nodes', '--as=ivan', '--as-group=ops'], 'yes'],
      [['delete', 'nodes', '--as=ivan', '--as-group=ops'], 'no'],
      [['create', 'selfsubjectaccessreviews', '--as=nobody'], 'yes'],
    ];
    for (const [args, expected] of table) {
      const result = await kubectl.run(['auth', 'can-i', ...args]);
      expect({ args, answer: result.stdout.trim() }).toEqual({ args, answer: expected });
      expect(result.code).toBe(expected === 'yes' ? 0 : 1);
    }

    // A ClusterRole labelled to aggregate into view extends what hana may do, at once (PodVolumeBackups: a CRD of the fixture).
    const file = join(kubectl.home, 'aggregated.yaml');
    writeFileSync(
      file,
      `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: pvb-viewer
  labels: { rbac.authorization.k8s.io/aggregate-to-view: "true" }
rules:
  - apiGroups: [stowage.dev]
    resources: [podvolumebackups]
    verbs: [get, list, watch]
`,
    );
    expect((await kubectl.run(['auth', 'can-i', 'list', 'podvolumebackups.stowage.dev', '-n', 'team-b', '--as=hana'])).stdout.trim()).toBe(
      'no',
    );
    await ok('apply', '-f', file);
    expect((await kubectl.run(['auth', 'can-i', 'list', 'podvolumebackups.stowage.dev', '-n', 'team-b', '--as=hana'])).stdout.trim()).toBe(
      'yes',
    );

    const list = await ok('auth', 'can-i', '--list', '-n', 'team-a', '--as=system:serviceaccount:team-a:builder');
    const rows = list.trim().split('\n');
    expect(rows[0]).toMatch(/^Resources\s+Non-Resource URLs\s+Resource Names\s+Verbs$/);
    expect(rows).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^pods\s+\[\]\s+\[\]\s+\[get list\]$/),
        expect.stringMatching(/^pods\/log\s+\[\]\s+\[\]\s+\[get list\]$/),
      ]),
    );
    expect(rows.some((row) => row.startsWith('secrets'))).toBe(false);
  });

  it('applies the rendered dev overlay as the admin; the deployed identities then have their rights', async () => {
    const rendered = execFileSync('kubectl', ['kustomize', join(repoRoot, 'k8s/overlays/dev')], { encoding: 'utf8' });
    const file = join(kubectl.home, 'dev.yaml');
    writeFileSync(file, rendered);
    const applied = await kubectl.run(['apply', '-f', file]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('clusterrole.rbac.authorization.k8s.io/stowage-resource-reader created');
    expect(applied.stdout).toContain('deployment.apps/stowage-worker created');
    expect(applied.stdout).toContain('horizontalpodautoscaler.autoscaling/stowage-worker created');
    expect(applied.stdout).toContain('networkpolicy.networking.k8s.io/stowage-redis created');
    const worker = '--as=system:serviceaccount:stowage:stowage-worker';
    expect((await kubectl.run(['auth', 'can-i', 'list', 'deployments', '--all-namespaces', worker])).stdout.trim()).toBe('yes');
    expect((await kubectl.run(['auth', 'can-i', 'create', 'deployments', '-n', 'shop', worker])).stdout.trim()).toBe('no');
    // Applying it again changes nothing and is allowed.
    const again = await kubectl.run(['apply', '-f', file]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('clusterrole.rbac.authorization.k8s.io/stowage-resource-reader unchanged');
  });

  it('refuses a kubectl command the identity may not run with the API server’s words', async () => {
    const viewer = sim.kubeconfigFor({ user: 'hana' });
    const refused = await kubectl.run(['create', 'configmap', 'nope', '-n', 'team-b', '--from-literal=a=b'], { kubeconfig: viewer.path });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(
      'error: failed to create configmap: configmaps is forbidden: User "hana" cannot create resource "configmaps" in API group "" in the namespace "team-b"',
    );
    const listed = await kubectl.run(['get', 'secrets', '-n', 'team-b'], { kubeconfig: viewer.path });
    expect(listed.stderr).toContain(
      'Error from server (Forbidden): secrets is forbidden: User "hana" cannot list resource "secrets" in API group "" in the namespace "team-b"',
    );
  });
});
