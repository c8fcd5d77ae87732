import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKubeClients, discoverResources, type KubeClients } from '@stowage/kube';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeObject, renderOverlay } from './manifests.js';
import { KUBECTL_HINT, runTool } from './run-tool.js';

/*
 * What each identity of the deployment may and must not do (docs/architecture.md, "Identities"),
 * asked of an API server that enforces RBAC: the overlay is applied to the simulator with
 * `kubectl apply` as an admin, then `kubectl auth can-i --as=system:serviceaccount:stowage:<name>`
 * answers each row, and SubjectAccessReviews sweep every type the server serves.
 */

const NS = 'stowage';
/** The identities that write nothing outside stowage.dev; the restorer writes what restores create. */
const READ_ONLY = ['stowage-api', 'stowage-worker', 'stowage-node-agent'] as const;
type Identity = (typeof READ_ONLY)[number] | 'stowage-restorer';
/** What the api's controller writes outside stowage.dev: Events, and its leader Lease in Stowage's namespace. */
const API_CONTROLLER_WRITES = [
  'create events. shop',
  'create events. stowage',
  'create leases.coordination.k8s.io stowage',
  'patch events. shop',
  'patch events. stowage',
];
const WRITES = ['create', 'update', 'patch', 'delete', 'deletecollection'];
const DATA_MOVER_WRITES = [
  ...['create', 'delete'].flatMap((verb) => ['pods', 'persistentvolumeclaims'].map((r) => `${verb} ${r}. ${NS}`)),
  'patch persistentvolumes. (cluster)',
].sort();

interface Row {
  who: Identity;
  /** `kubectl auth can-i` arguments after the verb: resource, `--subresource`, `-n`/`-A`. */
  ask: string[];
  verb: string;
  /** Expected answer per overlay (dev opts in to backing up Secrets, prod does not). */
  allowed: boolean | { dev: boolean; prod: boolean };
}

const table: Row[] = [
  // backup worker: reads every type a backup may include, cluster-wide; execs hooks; PVBs
  { who: 'stowage-worker', verb: 'list', ask: ['deployments.apps', '-A'], allowed: true },
  { who: 'stowage-worker', verb: 'watch', ask: ['statefulsets.apps', '-A'], allowed: true },
  { who: 'stowage-worker', verb: 'list', ask: ['priorityclasses.scheduling.k8s.io'], allowed: true },
  { who: 'stowage-worker', verb: 'get', ask: ['persistentvolumes'], allowed: true },
  { who: 'stowage-worker', verb: 'create', ask: ['pods', '--subresource=exec', '-n', 'shop'], allowed: true },
  { who: 'stowage-worker', verb: 'create', ask: ['podvolumebackups.stowage.dev', '-n', NS], allowed: true },
  { who: 'stowage-worker', verb: 'create', ask: ['deployments.apps', '-n', 'shop'], allowed: false },
  { who: 'stowage-worker', verb: 'patch', ask: ['configmaps', '-n', NS], allowed: false },
  { who: 'stowage-worker', verb: 'delete', ask: ['pods', '-n', 'shop'], allowed: false },
  // Secrets: only the planner (the api) reads them, and only with k8s/components/backup-secrets (dev)
  { who: 'stowage-worker', verb: 'list', ask: ['secrets', '-A'], allowed: false },
  { who: 'stowage-worker', verb: 'create', ask: ['podvolumerestores.stowage.dev', '-n', NS], allowed: false },
  // restorer: creates what a restore writes, in any namespace; PVRs; never reads a Secret, no exec
  { who: 'stowage-restorer', verb: 'create', ask: ['deployments.apps', '-A'], allowed: true },
  { who: 'stowage-restorer', verb: 'create', ask: ['deployments.apps', '-n', 'shop'], allowed: true },
  { who: 'stowage-restorer', verb: 'patch', ask: ['services', '-n', 'shop'], allowed: true },
  { who: 'stowage-restorer', verb: 'create', ask: ['namespaces'], allowed: true },
  { who: 'stowage-restorer', verb: 'create', ask: ['persistentvolumeclaims', '-n', 'shop'], allowed: true },
  { who: 'stowage-restorer', verb: 'create', ask: ['secrets', '-n', 'shop'], allowed: true },
  { who: 'stowage-restorer', verb: 'create', ask: ['podvolumerestores.stowage.dev', '-n', NS], allowed: true },
  { who: 'stowage-restorer', verb: 'get', ask: ['secrets', '-n', 'shop'], allowed: false },
  { who: 'stowage-restorer', verb: 'list', ask: ['secrets', '-A'], allowed: false },
  { who: 'stowage-restorer', verb: 'delete', ask: ['deployments.apps', '-n', 'shop'], allowed: false },
  { who: 'stowage-restorer', verb: 'create', ask: ['pods', '--subresource=exec', '-n', 'shop'], allowed: false },
  { who: 'stowage-restorer', verb: 'create', ask: ['serviceaccounts', '--subresource=token', '-n', 'shop'], allowed: false },
  { who: 'stowage-restorer', verb: 'create', ask: ['podvolumebackups.stowage.dev', '-n', NS], allowed: false },
  // RBAC objects only with k8s/components/restore-rbac (dev): bind and escalate
  { who: 'stowage-restorer', verb: 'create', ask: ['roles.rbac.authorization.k8s.io', '-n', 'shop'], allowed: { dev: true, prod: false } },
  { who: 'stowage-restorer', verb: 'bind', ask: ['clusterroles.rbac.authorization.k8s.io'], allowed: { dev: true, prod: false } },
  {
    who: 'stowage-restorer',
    verb: 'escalate',
    ask: ['roles.rbac.authorization.k8s.io', '-n', 'shop'],
    allowed: { dev: true, prod: false },
  },
  // api: plans (reads), cancels PVBs/PVRs; no workload writes, no exec (backup-level hooks run in the workers)
  { who: 'stowage-api', verb: 'list', ask: ['namespaces'], allowed: true },
  { who: 'stowage-api', verb: 'patch', ask: ['podvolumebackups.stowage.dev', '-n', NS], allowed: true },
  { who: 'stowage-api', verb: 'create', ask: ['pods', '-n', 'shop'], allowed: false },
  { who: 'stowage-api', verb: 'create', ask: ['deployments.apps', '-n', 'shop'], allowed: false },
  { who: 'stowage-api', verb: 'create', ask: ['pods', '--subresource=exec', '-n', 'shop'], allowed: false },
  { who: 'stowage-api', verb: 'create', ask: ['pods', '--subresource=exec', '-n', NS], allowed: false },
  // users' Kubernetes tokens on the API (STOWAGE_KUBE_AUTH): authenticated, then authorized as the user
  { who: 'stowage-api', verb: 'create', ask: ['tokenreviews.authentication.k8s.io'], allowed: true },
  { who: 'stowage-api', verb: 'create', ask: ['subjectaccessreviews.authorization.k8s.io'], allowed: true },
  { who: 'stowage-worker', verb: 'create', ask: ['tokenreviews.authentication.k8s.io'], allowed: false },
  // the resource controller (STOWAGE_CONTROLLER): every stowage.dev resource, its status, its Lease only
  { who: 'stowage-api', verb: 'list', ask: ['backups.stowage.dev', '-A'], allowed: true },
  { who: 'stowage-api', verb: 'watch', ask: ['clusterbackups.stowage.dev'], allowed: true },
  { who: 'stowage-api', verb: 'patch', ask: ['backups.stowage.dev', '--subresource=status', '-n', 'shop'], allowed: true },
  { who: 'stowage-api', verb: 'patch', ask: ['clusterbackups.stowage.dev', '--subresource=status'], allowed: true },
  { who: 'stowage-api', verb: 'update', ask: ['clusterbackups.stowage.dev', '--subresource=finalizers'], allowed: true },
  { who: 'stowage-api', verb: 'update', ask: ['leases.coordination.k8s.io/stowage-controller', '-n', NS], allowed: true },
  { who: 'stowage-api', verb: 'update', ask: ['leases.coordination.k8s.io/kube-scheduler', '-n', NS], allowed: false },
  { who: 'stowage-api', verb: 'update', ask: ['leases.coordination.k8s.io/stowage-controller', '-n', 'kube-system'], allowed: false },
  // The repository key's Secret: no identity reads it through the API (the workers and node agents get
  // it from their pod spec). But RBAC has no "all Secrets but one": where Secrets are opted in to
  // backups (k8s/components/backup-secrets, dev) the planner, the api, reads every Secret, this one too.
  { who: 'stowage-api', verb: 'get', ask: ['secrets/stowage-repo-key', '-n', NS], allowed: { dev: true, prod: false } },
  { who: 'stowage-api', verb: 'list', ask: ['secrets', '-A'], allowed: { dev: true, prod: false } },
  { who: 'stowage-worker', verb: 'get', ask: ['secrets/stowage-repo-key', '-n', NS], allowed: false },
  { who: 'stowage-restorer', verb: 'get', ask: ['secrets/stowage-repo-key', '-n', NS], allowed: false },
  { who: 'stowage-node-agent', verb: 'get', ask: ['secrets/stowage-repo-key', '-n', NS], allowed: false },
  // node agent: watches PVBs/PVRs, reports status, reads pods and PVCs; no exec, creates nothing
  { who: 'stowage-node-agent', verb: 'watch', ask: ['podvolumebackups.stowage.dev', '-n', NS], allowed: true },
  { who: 'stowage-node-agent', verb: 'patch', ask: ['podvolumerestores.stowage.dev', '--subresource=status', '-n', NS], allowed: true },
  { who: 'stowage-node-agent', verb: 'get', ask: ['pods', '-n', 'shop'], allowed: true },
  { who: 'stowage-node-agent', verb: 'get', ask: ['persistentvolumeclaims', '-n', 'shop'], allowed: true },
  { who: 'stowage-node-agent', verb: 'create', ask: ['pods', '--subresource=exec', '-n', 'shop'], allowed: false },
  { who: 'stowage-node-agent', verb: 'create', ask: ['podvolumebackups.stowage.dev', '-n', NS], allowed: false },
  { who: 'stowage-node-agent', verb: 'get', ask: ['secrets', '-n', NS], allowed: false },
];

describe.each(['dev', 'prod'] as const)('k8s/overlays/%s applied to an API server that enforces RBAC', (overlay) => {
  let sim: Simulator;
  let dir: string;
  let admin: KubeClients;
  let rendered: KubeObject[];
  const kubectl = (...args: string[]) => runTool('kubectl', ['--kubeconfig', sim.kubeconfigPath, ...args], KUBECTL_HINT);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), `stowage-identities-${overlay}-`));
    sim = await startSimulator({ fixture: { objects: [] }, materializeVolumes: 'none', kubeconfigPath: join(dir, 'kubeconfig') });
    admin = createKubeClients({ kubeconfigYaml: sim.kubeconfigYaml });
    // KEDA's ScaledObject (prod) needs KEDA's CRDs, which a cluster without KEDA (the simulator) lacks
    rendered = (await renderOverlay(overlay)).filter((object) => object.kind !== 'ScaledObject');
    // JSON, not YAML: kubectl reads YAML 1.1 (an unquoted `yes` would become true); one file per
    // object, named so the namespace and the CRDs go first
    const manifests = join(dir, 'rendered');
    await mkdir(manifests);
    await Promise.all(
      rendered.map((object, i) => writeFile(join(manifests, `${String(i).padStart(3, '0')}.json`), JSON.stringify(object))),
    );
    const applied = await kubectl('apply', '-f', manifests);
    if (applied.exitCode !== 0) throw new Error(`kubectl apply of the ${overlay} overlay failed:\n${applied.stderr}`);
    const shop = await kubectl('create', 'namespace', 'shop');
    if (shop.exitCode !== 0) throw new Error(`kubectl create namespace shop failed:\n${shop.stderr}`);
  }, 120_000);
  afterAll(async () => {
    await sim?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('applies every object of the overlay as an admin would (kubectl apply)', async () => {
    const listed = await kubectl('get', 'serviceaccounts,clusterroles,clusterrolebindings,roles,rolebindings', '-n', NS, '-o', 'name');
    const rbac = rendered.filter((o) => ['ServiceAccount', 'Role', 'ClusterRole', 'RoleBinding', 'ClusterRoleBinding'].includes(o.kind));
    expect(rbac.length).toBeGreaterThan(10);
    for (const object of rbac) expect(listed.stdout).toContain(`/${object.metadata.name}\n`);
  });

  it.each(table.map((row) => [row.who, row.verb, row.ask.join(' '), row] as const))(
    'kubectl auth can-i --as=%s %s %s',
    async (who, verb, _ask, row) => {
      const expected = typeof row.allowed === 'boolean' ? row.allowed : row.allowed[overlay];
      const answer = await kubectl('auth', 'can-i', verb, ...row.ask, `--as=system:serviceaccount:${NS}:${who}`);
      expect(answer.stderr).not.toMatch(/error/i);
      expect(answer.stdout.trim()).toBe(expected ? 'yes' : 'no');
      expect(answer.exitCode).toBe(expected ? 0 : 1);
    },
  );

  it.each(READ_ONLY)('%s writes nothing outside stowage.dev but hook execs (every served type, every write verb)', async (who) => {
    const { resources } = await discoverResources(admin);
    const writes: string[] = [];
    for (const resource of resources) {
      if (resource.group === 'stowage.dev') continue;
      for (const verb of WRITES) {
        for (const namespace of resource.namespaced ? [NS, 'shop'] : [undefined]) {
          if (await allowed(who, { verb, group: resource.group, resource: resource.resource, namespace }))
            writes.push(`${verb} ${resource.resource}.${resource.group} ${namespace ?? '(cluster)'}`);
        }
      }
    }
    writes.sort();
    // The one exception: the worker's data mover makes a temporary claim and pod in Stowage's own
    // namespace to expose a CSI snapshot (or a new block volume) to a node agent, and deletes them,
    // and hands a restored block volume's PersistentVolume to the restored claim (VolumeSnapshot writes are
    // granted too, where the cluster serves that API; this one does not).
    // And the api's resource controller: Events on the objects it reports about, and its leader Lease
    // (docs/architecture.md, "Identities": the api may hold Leases; none of these is a workload object).
    const expected = { 'stowage-worker': DATA_MOVER_WRITES, 'stowage-api': API_CONTROLLER_WRITES, 'stowage-node-agent': [] }[who];
    expect(writes).toEqual(expected);
    expect(resources.length).toBeGreaterThan(20);
    const execs = await allowed(who, { verb: 'create', group: '', resource: 'pods', subresource: 'exec', namespace: 'shop' });
    // Only the backup workers exec (pods' hooks, backup-level hooks, post-restore hooks).
    expect(execs).toBe(who === 'stowage-worker');
  });

  it('stowage-restorer deletes nothing and reads no Secret anywhere, and writes no Stowage object but PVRs', async () => {
    const { resources } = await discoverResources(admin);
    const found: string[] = [];
    for (const resource of resources) {
      const verbs = [
        'delete',
        'deletecollection',
        ...(resource.group === 'stowage.dev' && resource.resource !== 'podvolumerestores' ? WRITES : []),
      ];
      for (const verb of verbs) {
        for (const namespace of resource.namespaced ? [NS, 'shop'] : [undefined]) {
          if (await allowed('stowage-restorer', { verb, group: resource.group, resource: resource.resource, namespace }))
            found.push(`${verb} ${resource.resource}.${resource.group} ${namespace ?? '(cluster)'}`);
        }
      }
    }
    for (const verb of ['get', 'list', 'watch']) {
      for (const namespace of [NS, 'shop', undefined]) {
        if (await allowed('stowage-restorer', { verb, group: '', resource: 'secrets', namespace }))
          found.push(`${verb} secrets ${namespace ?? '(all)'}`);
      }
    }
    expect(found).toEqual([]);
  });

  /** A SubjectAccessReview for the service account as it authenticates (its two groups and system:authenticated). */
  async function allowed(
    who: Identity,
    attributes: { verb: string; group: string; resource: string; subresource?: string; namespace?: string | undefined },
  ): Promise<boolean> {
    const review = await admin.requestJson<{ status: { allowed: boolean } }>({
      method: 'POST',
      path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: `system:serviceaccount:${NS}:${who}`,
          groups: ['system:serviceaccounts', `system:serviceaccounts:${NS}`, 'system:authenticated'],
          resourceAttributes: { ...attributes },
        },
      },
    });
    return review.status.allowed;
  }
});
