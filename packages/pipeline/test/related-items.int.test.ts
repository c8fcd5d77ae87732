import type { RunningWorkers } from '@stowage/pipeline';
import { startWorkers, submitBackup } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { useTestRedis } from '@stowage/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, configMap, namespace, node, pod } from './support/fixtures.js';
import { type Harness, startHarness, waitForBackupEnd } from './support/harness.js';
import { tarballEntries } from './support/inspect.js';

/*
 * What a restore into a fresh cluster needs beyond the selected items, in the tarball of a real
 * backup: the CRD of a backed-up custom resource, the PriorityClass of a pod, the
 * ClusterRoleBindings naming a service account and their ClusterRoles, and the Namespace objects
 * of label-selected items (Velero adds each of these).
 */

const ALL_QUEUES = [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks];
const web = { app: 'web' };

const objects: unknown[] = [
  namespace('stowage'),
  namespace('crm'),
  namespace('other'),
  node('node-a'),
  {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'widgets.example.com' },
    spec: {
      group: 'example.com',
      scope: 'Namespaced',
      names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  },
  { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w1', namespace: 'crm', labels: web }, spec: { size: 3 } },
  { apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', metadata: { name: 'high' }, value: 1000 },
  { apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', metadata: { name: 'unused' }, value: 1 },
  { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'web', namespace: 'crm', labels: web } },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'web-reader' },
    subjects: [{ kind: 'ServiceAccount', namespace: 'crm', name: 'web' }],
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'reader' },
  },
  { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'reader' }, rules: [] },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'someone-else' },
    subjects: [{ kind: 'ServiceAccount', namespace: 'other', name: 'web' }],
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
  },
  { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'admin' }, rules: [] },
  (() => {
    const p = pod({ name: 'web-0', namespace: 'crm', labels: web }) as { spec: Record<string, unknown> };
    p.spec.priorityClassName = 'high';
    return p;
  })(),
  configMap('settings', 'other'),
  {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'no-service-accounts', namespace: 'stowage' },
    data: { 'policy.yaml': 'version: v1\nincludeExcludePolicy:\n  excludedNamespaceScopedResources: [serviceaccounts]\n' },
  },
];

describe('related items and namespaces in the tarball of a real backup', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: ['node-a'] });
  });
  afterEach(async () => {
    await workers?.close();
    workers = undefined;
  });
  afterAll(async () => {
    await h?.close();
    await redisHandle?.stop();
  });

  const backUp = async (name: string, spec: Record<string, unknown>) => {
    workers ??= startWorkers({ deps: h.deps, queues: ALL_QUEUES });
    await submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name, spec: backupSpec(spec) });
    expect(await waitForBackupEnd(h.deps.state, name)).toBe('Completed');
    return tarballEntries(h.storageDir, name).filter((e) => e.startsWith('resources/') && !e.includes('-preferredversion/'));
  };

  it('a namespace-scoped backup holds the CRD of its custom resource, the pod PriorityClass, the bindings of its service account and their roles', async () => {
    const entries = await backUp('related-1', { includedNamespaces: ['crm'] });
    expect(entries).toEqual(
      expect.arrayContaining([
        'resources/widgets.example.com/namespaces/crm/w1.json',
        'resources/customresourcedefinitions.apiextensions.k8s.io/cluster/widgets.example.com.json',
        'resources/pods/namespaces/crm/web-0.json',
        'resources/priorityclasses.scheduling.k8s.io/cluster/high.json',
        'resources/serviceaccounts/namespaces/crm/web.json',
        'resources/clusterrolebindings.rbac.authorization.k8s.io/cluster/web-reader.json',
        'resources/clusterroles.rbac.authorization.k8s.io/cluster/reader.json',
        'resources/namespaces/cluster/crm.json',
      ]),
    );
    // Only what the items pull in: no other cluster-scoped item, no other namespace.
    const cluster = entries.filter(
      (e) => e.includes('/cluster/') && !e.startsWith('resources/namespaces/') && !e.startsWith('resources/persistentvolumes/'),
    );
    expect(cluster.sort()).toEqual(
      [
        'resources/clusterrolebindings.rbac.authorization.k8s.io/cluster/web-reader.json',
        'resources/clusterroles.rbac.authorization.k8s.io/cluster/reader.json',
        'resources/customresourcedefinitions.apiextensions.k8s.io/cluster/widgets.example.com.json',
        'resources/priorityclasses.scheduling.k8s.io/cluster/high.json',
      ].sort(),
    );
    expect(entries.filter((e) => e.startsWith('resources/namespaces/'))).toEqual(['resources/namespaces/cluster/crm.json']);
  });

  it('includeClusterResources: false adds none of them', async () => {
    const entries = await backUp('related-2', { includedNamespaces: ['crm'], includeClusterResources: false });
    expect(entries).toContain('resources/widgets.example.com/namespaces/crm/w1.json');
    expect(entries.filter((e) => e.includes('/cluster/') && !e.startsWith('resources/namespaces/'))).toEqual([]);
  });

  it("a policy ConfigMap's includeExcludePolicy applies (and cannot be mixed with the old filters)", async () => {
    const resourcePolicy = { kind: 'ConfigMap', name: 'no-service-accounts' };
    const entries = await backUp('policy-1', { includedNamespaces: ['crm'], resourcePolicy });
    expect(entries).toContain('resources/pods/namespaces/crm/web-0.json');
    expect(entries.filter((e) => e.includes('serviceaccounts') || e.includes('clusterrole'))).toEqual([]);

    await submitBackup(
      { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
      { name: 'policy-2', spec: backupSpec({ includedNamespaces: ['crm'], includedResources: ['pods'], resourcePolicy }) },
    );
    expect(await waitForBackupEnd(h.deps.state, 'policy-2')).toBe('FailedValidation');
    expect((await h.deps.state.getBackup('policy-2'))?.failureReason).toMatch(/cannot be used with an includeExcludePolicy/);
  });

  it('a label selector keeps the namespaces of the items it selects, though their labels do not match', async () => {
    const entries = await backUp('labels-1', { includedNamespaces: [], labelSelector: { matchLabels: web, matchExpressions: [] } });
    expect(entries).toContain('resources/pods/namespaces/crm/web-0.json');
    expect(entries).toContain('resources/namespaces/cluster/crm.json');
    expect(entries).not.toContain('resources/namespaces/cluster/other.json');
    expect(entries).not.toContain('resources/configmaps/namespaces/other/settings.json');
  });
});
