/** Small builders for core tests: plain objects shaped like what client-node returns. */
import type { BackupSpec } from '../src/backup-spec.js';
import { validateBackupRequest } from '../src/backup-spec.schema.js';
import type { ClusterItem } from '../src/item-blocks.js';
import type { PersistentVolume, PersistentVolumeClaim, Pod, PodVolume } from '../src/kube-types.js';

export function specOf(spec: Record<string, unknown> = {}): BackupSpec {
  const result = validateBackupRequest({ spec });
  if (!result.ok) throw new Error(`test spec invalid: ${JSON.stringify(result.problems)}`);
  return result.value;
}

export interface PodOptions {
  namespace?: string;
  phase?: string;
  node?: string;
  claims?: string[];
  volumes?: PodVolume[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  containers?: string[];
  uid?: string;
}

export function pod(name: string, options: PodOptions = {}): Pod {
  const volumes: PodVolume[] = [
    ...(options.claims ?? []).map((claim) => ({ name: `vol-${claim}`, persistentVolumeClaim: { claimName: claim } })),
    ...(options.volumes ?? []),
  ];
  const containerNames = options.containers ?? ['app'];
  return {
    metadata: {
      name,
      namespace: options.namespace ?? 'default',
      uid: options.uid ?? `uid-${name}`,
      ...(options.labels ? { labels: options.labels } : {}),
      ...(options.annotations ? { annotations: options.annotations } : {}),
    },
    spec: {
      nodeName: options.node ?? 'node-1',
      containers: containerNames.map((containerName, index) => ({
        name: containerName,
        // the first container mounts every volume
        volumeMounts: index === 0 ? volumes.map((volume) => ({ name: volume.name, mountPath: `/mnt/${volume.name}` })) : [],
      })),
      volumes,
    },
    status: { phase: options.phase ?? 'Running' },
  };
}

export function pvc(
  name: string,
  options: { namespace?: string; volumeName?: string | null; labels?: Record<string, string>; storageClass?: string } = {},
): PersistentVolumeClaim {
  const volumeName = options.volumeName === undefined ? `pv-${name}` : options.volumeName;
  return {
    metadata: { name, namespace: options.namespace ?? 'default', ...(options.labels ? { labels: options.labels } : {}) },
    spec: { ...(volumeName ? { volumeName } : {}), ...(options.storageClass ? { storageClassName: options.storageClass } : {}) },
    status: { phase: volumeName ? 'Bound' : 'Pending' },
  };
}

export function pv(name: string, spec: Partial<PersistentVolume['spec']> = {}): PersistentVolume {
  return { metadata: { name }, spec: { capacity: { storage: '10Gi' }, ...spec } };
}

export const podItem = (object: Pod): ClusterItem => ({ group: '', resource: 'pods', namespaced: true, object });
export const pvcItem = (object: PersistentVolumeClaim): ClusterItem => ({
  group: '',
  resource: 'persistentvolumeclaims',
  namespaced: true,
  object,
});
export const pvItem = (object: PersistentVolume): ClusterItem => ({ group: '', resource: 'persistentvolumes', namespaced: false, object });
export const otherItem = (
  group: string,
  resource: string,
  name: string,
  namespace: string | null,
  labels?: Record<string, string>,
): ClusterItem => ({
  group,
  resource,
  namespaced: namespace !== null,
  object: { metadata: { name, ...(namespace !== null ? { namespace } : {}), ...(labels ? { labels } : {}) } },
});
