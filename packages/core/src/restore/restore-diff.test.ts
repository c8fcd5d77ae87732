import { describe, expect, it } from 'vitest';
import { restoreDiff } from './restore-diff.js';
import type { RestoreTransformContext } from './restore-transforms.js';
import type { RestoreObject } from './types.js';

const context: RestoreTransformContext = {
  backupName: 'nightly',
  restoreName: 'r1',
  restoreUid: 'uid-r1',
  spec: { namespaceMapping: { shop: 'copy' }, preserveNodePorts: false, hooks: { resources: [] } },
  volumes: { podVolumes: { 'shop/postgres-0': [{ volume: 'data', snapshotID: 's1' }] }, reprovisionedClaims: ['shop/data-postgres-0'] },
  restoreWait: { image: 'agent', command: ['restore-wait'] },
};
const restoreLabels = { 'stowage.dev/backup-name': 'nightly', 'stowage.dev/restore-name': 'r1' };

const originalPod: RestoreObject = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    name: 'postgres-0',
    namespace: 'shop',
    uid: 'old',
    resourceVersion: '1',
    labels: { app: 'pg' },
    ownerReferences: [{ kind: 'StatefulSet', name: 'postgres', uid: 'o' }],
  },
  spec: {
    nodeName: 'node-a',
    containers: [{ name: 'postgres', image: 'postgres:16' }],
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data-postgres-0' } }],
  },
  status: { phase: 'Running' },
};

function restoredPod(overrides: (pod: RestoreObject) => void = () => {}): RestoreObject {
  const pod: RestoreObject = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'postgres-0',
      namespace: 'copy',
      uid: 'new',
      resourceVersion: '99',
      creationTimestamp: '2026-06-01T00:00:00Z',
      labels: { app: 'pg', ...restoreLabels },
    },
    spec: {
      nodeName: 'node-b',
      initContainers: [
        {
          name: 'stowage-restore-wait',
          image: 'agent',
          command: ['restore-wait'],
          env: [{ name: 'STOWAGE_RESTORE_UID', value: 'uid-r1' }],
          volumeMounts: [{ name: 'data', mountPath: '/restores/data' }],
          securityContext: {
            runAsNonRoot: true,
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
            seccompProfile: { type: 'RuntimeDefault' },
          },
          resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { cpu: '100m', memory: '128Mi' } },
        },
      ],
      containers: [{ name: 'postgres', image: 'postgres:16' }],
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data-postgres-0' } }],
    },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  };
  overrides(pod);
  return pod;
}

describe('restoreDiff', () => {
  it('is empty for a faithful restore: new uid, node, status, restore-wait container and labels are the documented transforms', () => {
    expect(restoreDiff(originalPod, restoredPod(), context)).toEqual([]);
  });

  it.each<[string, (pod: RestoreObject) => void, { path: string; expected: unknown; restored: unknown }[]]>([
    [
      'a changed image',
      (pod) => ((pod.spec as { containers: { image: string }[] }).containers[0] = { name: 'postgres', image: 'postgres:15' } as never),
      [{ path: 'spec.containers[0].image', expected: 'postgres:16', restored: 'postgres:15' }],
    ],
    ['a lost label', (pod) => delete pod.metadata.labels?.app, [{ path: 'metadata.labels.app', expected: 'pg', restored: undefined }]],
    [
      'an extra annotation',
      (pod) => (pod.metadata.annotations = { surprise: 'yes' }),
      [{ path: 'metadata.annotations.surprise', expected: undefined, restored: 'yes' }],
    ],
    [
      'a missing restore label',
      (pod) => delete pod.metadata.labels?.['stowage.dev/restore-name'],
      [{ path: 'metadata.labels["stowage.dev/restore-name"]', expected: 'r1', restored: undefined }],
    ],
    [
      'the wrong namespace (mapping not applied)',
      (pod) => (pod.metadata.namespace = 'shop'),
      [{ path: 'metadata.namespace', expected: 'copy', restored: 'shop' }],
    ],
    [
      'no restore-wait container',
      (pod) => delete (pod.spec as Record<string, unknown>).initContainers,
      [{ path: 'spec.initContainers', expected: expect.any(Array), restored: undefined }],
    ],
  ])('reports %s', (_name, change, expected) => {
    expect(restoreDiff(originalPod, restoredPod(change), context)).toEqual(expected);
  });

  it('accepts a Service whose clusterIP and nodePorts the cluster assigned again, but not a changed port', () => {
    const original: RestoreObject = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'shop' },
      spec: { type: 'NodePort', clusterIP: '10.0.0.1', clusterIPs: ['10.0.0.1'], ports: [{ port: 80, nodePort: 30001 }] },
    };
    const restored: RestoreObject = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'copy', uid: 'n', labels: restoreLabels },
      spec: { type: 'NodePort', clusterIP: '10.0.0.9', clusterIPs: ['10.0.0.9'], ports: [{ port: 80, nodePort: 30777 }] },
    };
    expect(restoreDiff(original, restored, context)).toEqual([]);
    const wrong = structuredClone(restored);
    (wrong.spec as { ports: { port: number }[] }).ports[0] = { port: 81 };
    expect(restoreDiff(original, wrong, context)).toEqual([{ path: 'spec.ports[0].port', expected: 80, restored: 81 }]);
  });

  it('accepts a reprovisioned claim bound to a new volume, and a namespace the cluster finalized', () => {
    const claim: RestoreObject = {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'data-postgres-0', namespace: 'shop', annotations: { 'pv.kubernetes.io/bind-completed': 'yes' } },
      spec: { volumeName: 'pvc-old', storageClassName: 'standard' },
      status: { phase: 'Bound' },
    };
    const restoredClaim: RestoreObject = {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: {
        name: 'data-postgres-0',
        namespace: 'copy',
        labels: restoreLabels,
        annotations: { 'pv.kubernetes.io/bind-completed': 'yes' },
      },
      spec: { volumeName: 'pvc-new', storageClassName: 'standard' },
      status: { phase: 'Bound' },
    };
    expect(restoreDiff(claim, restoredClaim, context)).toEqual([]);
    const namespace: RestoreObject = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop' } };
    const restoredNamespace: RestoreObject = {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'copy', labels: restoreLabels },
      spec: { finalizers: ['kubernetes'] },
      status: { phase: 'Active' },
    };
    expect(restoreDiff(namespace, restoredNamespace, context)).toEqual([]);
  });
});
