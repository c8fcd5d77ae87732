/**
 * The simulator of authz.bench.ts in its own process: a generated cluster of 10 namespaces of 100
 * pods, a service account `bench/reader` allowed to read pods in every namespace through
 * RoleBindings (plus a few unrelated bindings, as a cluster has), enforcement from BENCH_AUTHZ.
 * Prints one JSON line: urls, CA, the admin's and the reader's tokens.
 */
import { generateCluster, startSimulator } from '../src/index.js';

const authz = process.env.BENCH_AUTHZ !== '0';
const fixture = generateCluster({ namespaces: 10, podsPerNamespace: 100, volumesPerPod: 0, bytesPerVolume: 0, nodes: 4 });
fixture.objects.push(
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'bench' } },
  { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'reader', namespace: 'bench' } },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'pod-reader' },
    rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] }],
  },
);
for (let n = 0; n < 10; n++) {
  const namespace = `bench-${n}`;
  fixture.objects.push({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'reader-reads-pods', namespace },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'pod-reader' },
    subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: 'bench' }],
  });
  for (let i = 0; i < 5; i++)
    fixture.objects.push({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: `team-${i}-edits`, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
      subjects: [{ kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: `team-${i}` }],
    });
}
const sim = await startSimulator({ fixture, materializeVolumes: 'none', authz });
process.stdout.write(
  `${JSON.stringify({
    url: sim.url,
    httpsUrl: sim.httpsUrl,
    ca: sim.caCertificate,
    adminToken: sim.adminToken,
    saToken: sim.serviceAccountToken('bench', 'reader'),
  })}\n`,
);
process.once('SIGTERM', () => {
  sim.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
