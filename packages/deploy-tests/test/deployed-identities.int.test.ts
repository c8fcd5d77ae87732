import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { type DeployedIdentities, deployIdentities, renderDevOverlay } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KUBECTL_HINT, runTool } from './run-tool.js';

/*
 * The harness every e2e test, the demo and the bench start services with: the dev overlay's
 * identities applied to the simulator, a kubeconfig per ServiceAccount. Checked with kubectl
 * through each kubeconfig file, as the services' requests go: who it authenticates as, and that
 * the simulator lets through what the overlay grants and refuses what it does not.
 */
const IDENTITY_KINDS = new Set([
  'Namespace',
  'CustomResourceDefinition',
  'ServiceAccount',
  'Role',
  'ClusterRole',
  'RoleBinding',
  'ClusterRoleBinding',
]);

let sim: Simulator;
let home: string;
let identities: DeployedIdentities;

function kubectl(kubeconfig: string, ...args: string[]) {
  return runTool('kubectl', ['--kubeconfig', kubeconfig, '--cache-dir', join(home, 'cache'), ...args], KUBECTL_HINT);
}

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'stowage-identities-'));
  sim = await startSimulator({ materializeVolumes: 'none' });
  identities = await deployIdentities(sim);
}, 120_000);

afterAll(async () => {
  await sim?.close();
  if (home) await rm(home, { recursive: true, force: true });
});

describe('deployIdentities: the dev overlay’s identities in the simulator', () => {
  it('applies exactly the rendered namespace, CRDs, accounts, roles and bindings, and nothing else', async () => {
    const rendered = await renderDevOverlay();
    const expected = rendered
      .filter((o) => IDENTITY_KINDS.has(o.kind))
      .map((o) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`);
    expect([...identities.applied].sort()).toEqual([...expected].sort());
    for (const object of rendered) {
      const kind = object.kind;
      if (kind === 'ServiceAccount') {
        expect(sim.state.store.get('serviceaccounts', 'stowage', object.metadata.name), object.metadata.name).toBeDefined();
      }
      if (kind === 'Deployment' || kind === 'DaemonSet' || kind === 'StatefulSet') {
        // the workloads are the services the tests start themselves: none runs in the simulator
        const found = await kubectl(sim.kubeconfigPath, 'get', kind.toLowerCase(), object.metadata.name, '-n', 'stowage');
        expect(found.stderr).toContain('NotFound');
      }
    }
    // an aggregated role's rules are the aggregation's (the server fills them in), not the render's
    const roles = rendered.filter((o) => o.kind === 'ClusterRole' && o.aggregationRule === undefined);
    for (const role of roles) {
      expect(sim.state.store.get('clusterroles.rbac.authorization.k8s.io', '', role.metadata.name)?.rules, role.metadata.name).toEqual(
        role.rules,
      );
    }
  });

  it('gives each ServiceAccount a kubeconfig that authenticates as that account', async () => {
    expect([...identities.kubeconfigs.keys()].sort()).toEqual(
      (await renderDevOverlay())
        .filter((o) => o.kind === 'ServiceAccount')
        .map((o) => o.metadata.name)
        .sort(),
    );
    for (const [name, kubeconfig] of identities.kubeconfigs) {
      const whoami = await kubectl(kubeconfig, 'auth', 'whoami', '-o', 'json');
      expect(whoami.stderr).toBe('');
      const review = JSON.parse(whoami.stdout) as { status: { userInfo: { username: string; groups: string[] } } };
      expect(review.status.userInfo.username).toBe(`system:serviceaccount:stowage:${name}`);
      expect(review.status.userInfo.groups).toEqual(['system:serviceaccounts', 'system:serviceaccounts:stowage', 'system:authenticated']);
    }
    expect(identities.api).toBe(identities.kubeconfigs.get('stowage-api'));
    expect(identities.worker).toBe(identities.kubeconfigs.get('stowage-worker'));
    expect(identities.nodeAgent).toBe(identities.kubeconfigs.get('stowage-node-agent'));
    expect(identities.restorer).toBe(identities.kubeconfigs.get('stowage-restorer'));
  });

  it('lets each identity do what the overlay grants and refuses the rest with the API server’s 403', async () => {
    const workerLists = await kubectl(identities.worker, 'get', 'deployments', '--all-namespaces', '-o', 'name');
    expect(workerLists.stderr).toBe('');
    expect(workerLists.stdout).toContain('deployment.apps/web');

    const workerWrites = await kubectl(identities.worker, 'create', 'configmap', 'planted', '-n', 'shop', '--from-literal=a=b');
    expect(workerWrites.exitCode).not.toBe(0);
    expect(workerWrites.stderr).toContain(
      'error: failed to create configmap: configmaps is forbidden: User "system:serviceaccount:stowage:stowage-worker" cannot create resource "configmaps" in API group "" in the namespace "shop"',
    );

    const apiCreatesPod = await kubectl(identities.api, 'run', 'planted', '-n', 'shop', '--image=busybox');
    expect(apiCreatesPod.stderr).toContain(
      'pods is forbidden: User "system:serviceaccount:stowage:stowage-api" cannot create resource "pods" in API group "" in the namespace "shop"',
    );
    expect(sim.state.store.get('pods', 'shop', 'planted')).toBeUndefined();

    const agentReadsPods = await kubectl(identities.nodeAgent, 'get', 'pod', 'postgres-0', '-n', 'shop', '-o', 'name');
    expect(agentReadsPods.stdout).toBe('pod/postgres-0\n');
    const agentExecs = await kubectl(identities.nodeAgent, 'auth', 'can-i', 'create', 'pods/exec', '-n', 'shop');
    expect(agentExecs.stdout).toBe('no\n');
  });

  it('applies again over what is there (an external simulator, a second run) and the kubeconfigs still work', async () => {
    const again = await deployIdentities(sim);
    expect(again.applied).toEqual(identities.applied);
    const whoami = await kubectl(identities.worker, 'auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}');
    expect(whoami.stdout).toBe('system:serviceaccount:stowage:stowage-worker');
  });
});
