/*
 * How a restored object differs from its backed-up original beyond the documented transforms.
 * The original is transformed exactly as a restore does (`transformForRestore`); the result is
 * compared with the object read back from the cluster. A field the transforms removed may come
 * back filled in by the cluster (a new uid, clusterIP, nodeName, volumeName, status, …) —
 * `FIELDS_REFILLED_BY_CLUSTER` lists those per kind; anything else that differs is reported.
 */
import { groupResourceOf } from '../resource-selection.js';
import { childPath, isJsonObject, jsonEqual, pathMatches } from './json.js';
import { mapNamespace, splitGroupResource } from './restore-selection.js';
import { type RestoreTransformContext, transformForRestore } from './restore-transforms.js';
import type { RestoreItem, RestoreObject } from './types.js';

/** Fields the cluster fills in again when a restore left them out, by group-resource (`*` = every kind). */
export const FIELDS_REFILLED_BY_CLUSTER: Readonly<Record<string, readonly string[]>> = {
  '*': [
    'metadata.uid',
    'metadata.resourceVersion',
    'metadata.generation',
    'metadata.creationTimestamp',
    'metadata.managedFields',
    'metadata.selfLink',
    // a controller may adopt a restored object (a ReplicaSet its pods)
    'metadata.ownerReferences',
    'status',
  ],
  services: ['spec.clusterIP', 'spec.clusterIPs', 'spec.ports[*].nodePort', 'spec.healthCheckNodePort'],
  pods: ['spec.nodeName', 'spec.priority'],
  persistentvolumeclaims: [
    'spec.volumeName',
    'metadata.annotations["pv.kubernetes.io/bind-completed"]',
    'metadata.annotations["pv.kubernetes.io/bound-by-controller"]',
    'metadata.annotations["volume.kubernetes.io/storage-provisioner"]',
    'metadata.annotations["volume.beta.kubernetes.io/storage-provisioner"]',
    'metadata.annotations["volume.kubernetes.io/selected-node"]',
  ],
  persistentvolumes: [
    'spec.claimRef.uid',
    'spec.claimRef.resourceVersion',
    'metadata.annotations["pv.kubernetes.io/bind-completed"]',
    'metadata.annotations["pv.kubernetes.io/bound-by-controller"]',
  ],
  serviceaccounts: ['secrets'],
  secrets: ['data.token', 'data["ca.crt"]', 'metadata.annotations["kubernetes.io/service-account.uid"]'],
  'jobs.batch': [
    'spec.selector.matchLabels["batch.kubernetes.io/controller-uid"]',
    'spec.selector.matchLabels["controller-uid"]',
    'spec.template.metadata.labels["batch.kubernetes.io/controller-uid"]',
    'spec.template.metadata.labels["controller-uid"]',
  ],
  namespaces: ['spec.finalizers'],
};

export interface RestoreDifference {
  /** JSON path, e.g. `spec.containers[0].image`. */
  path: string;
  /** What the documented transforms give (undefined: the field should not be there). */
  expected: unknown;
  /** What the cluster has (undefined: the field is missing). */
  restored: unknown;
}

/** What restoreDiff needs to know about the restore (the same context the restore used). */
export type RestoreDiffContext = RestoreTransformContext;

const KIND_RESOURCES: Record<string, string> = {
  Namespace: 'namespaces',
  Service: 'services',
  Pod: 'pods',
  PersistentVolumeClaim: 'persistentvolumeclaims',
  PersistentVolume: 'persistentvolumes',
  ServiceAccount: 'serviceaccounts',
  Job: 'jobs',
  RoleBinding: 'rolebindings',
  ClusterRoleBinding: 'clusterrolebindings',
};

/** The group-resource of an object from its apiVersion and kind (kinds with transforms by name). */
function groupResourceOfObject(object: RestoreObject): { group: string; resource: string } {
  const apiVersion = object.apiVersion ?? 'v1';
  const group = apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
  const kind = object.kind ?? '';
  const resource = KIND_RESOURCES[kind] ?? `${kind.toLowerCase()}s`;
  return splitGroupResource(group ? `${resource}.${group}` : resource);
}

function refillable(groupResource: string, path: string): boolean {
  const patterns = [...(FIELDS_REFILLED_BY_CLUSTER['*'] ?? []), ...(FIELDS_REFILLED_BY_CLUSTER[groupResource] ?? [])];
  return patterns.some((pattern) => pathMatches(pattern, path));
}

function compare(expected: unknown, restored: unknown, path: string, groupResource: string, out: RestoreDifference[]): void {
  if (jsonEqual(expected, restored)) return;
  if (isJsonObject(expected) && isJsonObject(restored)) {
    for (const key of new Set([...Object.keys(expected), ...Object.keys(restored)])) {
      const fieldPath = childPath(path, key);
      const inExpected = Object.hasOwn(expected, key);
      if (!inExpected && refillable(groupResource, fieldPath)) continue;
      // an object the restore left out may come back holding only refilled fields
      const expectedValue = !inExpected && isJsonObject(restored[key]) ? {} : expected[key];
      compare(expectedValue, restored[key], fieldPath, groupResource, out);
    }
    return;
  }
  if (Array.isArray(expected) && Array.isArray(restored) && expected.length === restored.length) {
    expected.forEach((value, index) => {
      compare(value, restored[index], childPath(path, index), groupResource, out);
    });
    return;
  }
  out.push({ path, expected, restored });
}

/**
 * Every way `restored` (read back from the cluster) differs from `original` (as backed up) that
 * the documented restore transforms do not explain; empty when the restore is faithful.
 */
export function restoreDiff(original: RestoreObject, restored: RestoreObject, context: RestoreDiffContext): RestoreDifference[] {
  const { group, resource } = groupResourceOfObject(original);
  const namespace = original.metadata.namespace ?? null;
  const isNamespace = group === '' && resource === 'namespaces';
  const item: RestoreItem = {
    group,
    resource,
    namespace,
    name: original.metadata.name,
    object: original,
    targetNamespace: namespace === null ? null : mapNamespace(namespace, context.spec.namespaceMapping),
    targetName: isNamespace ? mapNamespace(original.metadata.name, context.spec.namespaceMapping) : original.metadata.name,
    origin: 'selected',
  };
  const expected = transformForRestore(item, context).object;
  const differences: RestoreDifference[] = [];
  compare(expected, restored, '', groupResourceOf(item), differences);
  return differences;
}
