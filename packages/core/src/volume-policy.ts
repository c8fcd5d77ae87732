/*
 * Velero-compatible volume policies (`resourcePolicy` → `volumePolicies[]`): types, the list of
 * volume source types, and condition matching. Validation lives in resource-policy.schema.ts.
 */
import { parseQuantity } from './quantity.js';

export type VolumePolicyActionType = 'fs-backup' | 'skip' | 'snapshot';
export const VOLUME_POLICY_ACTIONS: readonly VolumePolicyActionType[] = ['fs-backup', 'skip', 'snapshot'];

/** Volume source types a `volumeTypes` condition may name (Velero's list). */
export const VOLUME_TYPES = [
  'awsElasticBlockStore',
  'azureDisk',
  'azureFile',
  'cephfs',
  'cinder',
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'fc',
  'flexVolume',
  'flocker',
  'gcePersistentDisk',
  'gitRepo',
  'glusterfs',
  'hostPath',
  'image',
  'iscsi',
  'local',
  'nfs',
  'photonPersistentDisk',
  'portworxVolume',
  'projected',
  'quobyte',
  'rbd',
  'scaleIO',
  'secret',
  'storageOS',
  'vsphereVolume',
] as const;
export type VolumeType = (typeof VOLUME_TYPES)[number];

export interface VolumePolicyConditions {
  /**
   * `"lower,upper"` quantities, inclusive; an empty side or `0` is unbounded, so `""`, `","` and
   * `"0,0"` match every volume and `"10Gi,0"` means at least 10Gi (Velero's rules).
   */
  capacity?: string;
  /** An empty list is no condition (matches all), as in Velero. */
  storageClass?: string[];
  nfs?: { server?: string; path?: string };
  csi?: { driver?: string; volumeAttributes?: Record<string, string> };
  /** An empty list is no condition. */
  volumeTypes?: VolumeType[];
  /** An empty map is no condition. */
  pvcLabels?: Record<string, string>;
  /** An empty list is no condition. */
  pvcPhase?: ('Pending' | 'Bound' | 'Lost')[];
}

export interface VolumePolicy {
  conditions: VolumePolicyConditions;
  action: { type: VolumePolicyActionType; parameters?: Record<string, unknown> };
}

/**
 * What a policy condition can see about one pod volume: for a PVC-backed volume the PV's
 * source and the PVC's labels/phase; for an inline volume only its own source.
 */
export interface VolumeDescription {
  /** Bytes, from the PV capacity; absent (capacity conditions read 0, as Velero) for inline volumes and PVCs without a PV. */
  capacityBytes?: number;
  storageClass?: string;
  nfs?: { server: string; path: string };
  csi?: { driver: string; volumeAttributes?: Record<string, string> };
  /** Source type of the PV (PVC-backed) or of the inline pod volume. */
  volumeType?: string;
  pvcLabels?: Record<string, string>;
  pvcPhase?: string;
  /** False for inline pod volumes: pvcLabels / pvcPhase conditions then never match. */
  pvcBacked: boolean;
}

/** Inclusive bounds in bytes; null = unbounded on that side. */
export type CapacityRange = { lowerBytes: number | null; upperBytes: number | null };

/**
 * Parses Velero's capacity condition: `"10Gi,100Gi"`, `",5Gi"`, `"5Gi,"`, `"10Gi,0"`; an empty
 * side or `0` is unbounded and `""` means no bounds at all. A single value without a comma is
 * invalid, and so is a lower bound above a non-zero upper bound.
 */
export function parseCapacityRange(text: string): { ok: true; value: CapacityRange } | { ok: false; message: string } {
  const parts = (text === '' ? ',' : text).split(',');
  if (parts.length !== 2) {
    return {
      ok: false,
      message: `must be "lower,upper" (either side may be empty or 0 for no bound, e.g. "10Gi,100Gi", ",5Gi", "5Gi,"); got ${JSON.stringify(text)}`,
    };
  }
  const [lowerText = '', upperText = ''] = parts.map((part) => part.trim());
  const bound = (side: string): { ok: true; value: number | null } | { ok: false; message: string } => {
    if (side === '') return { ok: true, value: null };
    const parsed = parseQuantity(side);
    if (!parsed.ok) return parsed;
    return { ok: true, value: parsed.value === 0 ? null : parsed.value };
  };
  const lower = bound(lowerText);
  if (!lower.ok) return lower;
  const upper = bound(upperText);
  if (!upper.ok) return upper;
  if (lower.value !== null && upper.value !== null && lower.value > upper.value) {
    return { ok: false, message: `lower bound ${lowerText} is larger than upper bound ${upperText}` };
  }
  return { ok: true, value: { lowerBytes: lower.value, upperBytes: upper.value } };
}

/**
 * True when every condition of the policy holds for the volume (an empty condition set matches
 * all; so does an empty list or map in a condition, as in Velero).
 */
export function volumePolicyMatches(conditions: VolumePolicyConditions, volume: VolumeDescription): boolean {
  if (conditions.capacity !== undefined) {
    const range = parseCapacityRange(conditions.capacity);
    if (!range.ok) return false;
    const bytes = volume.capacityBytes ?? 0;
    if (range.value.lowerBytes !== null && bytes < range.value.lowerBytes) return false;
    if (range.value.upperBytes !== null && bytes > range.value.upperBytes) return false;
  }
  if (conditions.storageClass !== undefined && conditions.storageClass.length > 0) {
    if (volume.storageClass === undefined || !conditions.storageClass.includes(volume.storageClass)) return false;
  }
  if (conditions.nfs !== undefined) {
    if (!volume.nfs) return false;
    if (conditions.nfs.server !== undefined && conditions.nfs.server !== '' && conditions.nfs.server !== volume.nfs.server) return false;
    if (conditions.nfs.path !== undefined && conditions.nfs.path !== '' && conditions.nfs.path !== volume.nfs.path) return false;
  }
  if (conditions.csi !== undefined) {
    if (!volume.csi) return false;
    if (conditions.csi.driver !== undefined && conditions.csi.driver !== volume.csi.driver) return false;
    for (const [key, value] of Object.entries(conditions.csi.volumeAttributes ?? {})) {
      if (volume.csi.volumeAttributes?.[key] !== value) return false;
    }
  }
  if (conditions.volumeTypes !== undefined && conditions.volumeTypes.length > 0) {
    if (volume.volumeType === undefined || !(conditions.volumeTypes as readonly string[]).includes(volume.volumeType)) return false;
  }
  if (conditions.pvcLabels !== undefined && Object.keys(conditions.pvcLabels).length > 0) {
    if (!volume.pvcBacked) return false;
    for (const [key, value] of Object.entries(conditions.pvcLabels)) {
      if (volume.pvcLabels?.[key] !== value) return false;
    }
  }
  if (conditions.pvcPhase !== undefined && conditions.pvcPhase.length > 0) {
    if (!volume.pvcBacked || volume.pvcPhase === undefined || !(conditions.pvcPhase as readonly string[]).includes(volume.pvcPhase)) {
      return false;
    }
  }
  return true;
}

/** The first policy whose conditions all hold, with its index, or undefined. */
export function findMatchingVolumePolicy(
  policies: readonly VolumePolicy[],
  volume: VolumeDescription,
): { policy: VolumePolicy; index: number } | undefined {
  for (let index = 0; index < policies.length; index++) {
    const policy = policies[index];
    if (policy && volumePolicyMatches(policy.conditions, volume)) return { policy, index };
  }
  return undefined;
}
