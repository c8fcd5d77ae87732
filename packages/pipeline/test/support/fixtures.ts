import { randomUUID } from 'node:crypto';
import type { PodExecBehaviour } from '@stowage/kube-sim';

/*
 * Small builders for simulator fixtures: namespaces, nodes, pods (with hooks and volumes), PVCs.
 */

export function namespace(name: string): unknown {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name } };
}

export function node(name: string): unknown {
  return { apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { 'kubernetes.io/hostname': name } } };
}

export interface PodInput {
  name: string;
  namespace?: string;
  node?: string;
  phase?: string;
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  /** Pod volumes: `{name, emptyDir: {}}`, `{name, persistentVolumeClaim: {claimName}}`, ... */
  volumes?: Record<string, unknown>[];
  /** Scripted exec behaviour per container (simulator). */
  exec?: PodExecBehaviour;
  containers?: string[];
}

export function pod(input: PodInput): unknown {
  const volumes = input.volumes ?? [];
  const containers = (input.containers ?? ['app']).map((name, i) => ({
    name,
    image: 'busybox',
    // The first container mounts every volume.
    volumeMounts: i === 0 ? volumes.map((v) => ({ name: v.name, mountPath: `/data/${String(v.name)}` })) : [],
  }));
  const annotations = { ...input.annotations };
  if (input.exec) annotations['sim.stowage.dev/exec'] = JSON.stringify(input.exec);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: input.name, namespace: input.namespace ?? 'shop', uid: randomUUID(), annotations, labels: input.labels ?? {} },
    spec: { nodeName: input.node ?? 'node-a', containers, volumes },
    status: { phase: input.phase ?? 'Running' },
  };
}

export function pvc(name: string, ns = 'shop', labels: Record<string, string> = {}): unknown {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, namespace: ns, labels },
    spec: { accessModes: ['ReadWriteMany'], resources: { requests: { storage: '1Gi' } }, storageClassName: 'standard' },
  };
}

export function configMap(name: string, ns = 'shop'): unknown {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: ns }, data: { k: 'v' } };
}

/** A validated-looking backup spec (what core's validateBackupRequest returns), with overrides. */
export function backupSpec(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    includedNamespaces: ['shop'],
    excludedNamespaces: [],
    includedResources: [],
    excludedResources: [],
    includeClusterResources: null,
    labelSelector: null,
    orLabelSelectors: [],
    defaultVolumesToFsBackup: false,
    hooks: { resources: [] },
    resourcePolicy: null,
    fsBackupTimeoutMs: 4 * 3_600_000,
    ttlMs: 720 * 3_600_000,
    storageLocation: 'default',
    ...overrides,
  };
}
