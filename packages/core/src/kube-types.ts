/*
 * Minimal structural types for the Kubernetes objects core reasons about. Only the fields core
 * reads are declared; real objects (from client-node or the simulator) carry more and still fit.
 */

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  deletionTimestamp?: string | Date | null;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

export interface PersistentVolumeClaimVolumeSource {
  claimName: string;
  readOnly?: boolean;
}

export interface NfsVolumeSource {
  server: string;
  path: string;
  readOnly?: boolean;
}

export interface CsiVolumeSource {
  driver: string;
  volumeAttributes?: Record<string, string>;
}

/**
 * A pod volume. Exactly one source field is set on a real pod; the source types core needs
 * by name are typed, every other source (awsElasticBlockStore, rbd, …) is still recognised by
 * its key through the index signature.
 */
export interface PodVolume {
  name: string;
  persistentVolumeClaim?: PersistentVolumeClaimVolumeSource;
  emptyDir?: Record<string, unknown>;
  hostPath?: { path: string; type?: string };
  secret?: Record<string, unknown>;
  configMap?: Record<string, unknown>;
  projected?: Record<string, unknown>;
  downwardAPI?: Record<string, unknown>;
  nfs?: NfsVolumeSource;
  csi?: CsiVolumeSource;
  /** Generic ephemeral volume: Kubernetes creates a PVC named `<pod>-<volume>` for it. */
  ephemeral?: Record<string, unknown>;
  [source: string]: unknown;
}

export interface VolumeMount {
  name: string;
  mountPath: string;
}

export interface Container {
  name: string;
  image?: string;
  volumeMounts?: VolumeMount[];
  volumeDevices?: { name: string; devicePath: string }[];
  /** Only on init containers: `Always` makes it a native sidecar (hooks may target it). */
  restartPolicy?: string;
}

export type PodPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';

export interface Pod extends KubeObject {
  spec: {
    nodeName?: string;
    containers: Container[];
    initContainers?: Container[];
    volumes?: PodVolume[];
    priorityClassName?: string;
  };
  status?: { phase?: PodPhase | string };
}

export type PvcPhase = 'Pending' | 'Bound' | 'Lost';

export interface PersistentVolumeClaim extends KubeObject {
  spec: {
    volumeName?: string;
    storageClassName?: string | null;
    accessModes?: string[];
    volumeMode?: string;
    resources?: { requests?: { storage?: string } };
  };
  status?: { phase?: PvcPhase | string; capacity?: { storage?: string } };
}

export interface PersistentVolume extends KubeObject {
  spec: {
    capacity?: { storage?: string };
    storageClassName?: string;
    claimRef?: { namespace?: string; name?: string; uid?: string };
    nfs?: NfsVolumeSource;
    csi?: CsiVolumeSource;
    hostPath?: { path: string; type?: string };
    local?: { path: string };
    volumeMode?: string;
    [source: string]: unknown;
  };
  status?: { phase?: string };
}

/** Kubernetes' own rule for "the pod is running": scheduled, phase Running, not being deleted. */
export function isPodRunning(pod: Pod): boolean {
  return Boolean(pod.spec.nodeName) && pod.status?.phase === 'Running' && !pod.metadata.deletionTimestamp;
}

/** Names of the PVCs a pod mounts: `persistentVolumeClaim` volumes and generic ephemeral volumes. */
export function claimNamesOfPod(pod: Pod): string[] {
  const names: string[] = [];
  for (const volume of pod.spec.volumes ?? []) {
    const claimName = claimNameOfVolume(pod, volume);
    if (claimName !== undefined) names.push(claimName);
  }
  return names;
}

/** The PVC name behind one pod volume, if it is PVC-backed. */
export function claimNameOfVolume(pod: Pod, volume: PodVolume): string | undefined {
  if (volume.persistentVolumeClaim?.claimName) return volume.persistentVolumeClaim.claimName;
  if (volume.ephemeral) return `${pod.metadata.name}-${volume.name}`;
  return undefined;
}
