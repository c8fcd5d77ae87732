/*
 * Velero-compatible volume policies (`resourcePolicy` → `volumePolicies[]`): types, the list of
 * volume source types, and condition matching. Validation lives in backup-spec.schema.ts.
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
  /** `"lower,upper"` quantities, either side may be empty (unbounded); inclusive. */
  capacity?: string;
  storageClass?: string[];
  nfs?: { server?: string; path?: string };
  csi?: { driver?: string; volumeAttributes?: Record<string, string> };
  volumeTypes?: VolumeType[];
  pvcLabels?: Record<string, string>;
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
  /** Bytes, from the PV capacity (PVC-backed volumes only). */
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

export type CapacityRange = { lowerBytes: number | null; upperBytes: number | null };

/** Parses `"10Gi,100Gi"`, `",5Gi"`, `"5Gi,"`; a single value without a comma is invalid. */
export function parseCapacityRange(text: string): { ok: true; value: CapacityRange } | { ok: false; message: string } {
  const parts = text.split(',');
  if (parts.length !== 2) {
    return {
      ok: false,
      message: `must be "lower,upper" (either side may be empty, e.g. "10Gi,100Gi", ",5Gi", "5Gi,"); got ${JSON.stringify(text)}`,
    };
  }
  const [lowerText = '', upperText = ''] = parts.map((part) => part.trim());
  if (lowerText === '' && upperText === '') return { ok: false, message: 'must bound at least one side, e.g. "10Gi," or ",100Gi"' };
  const bound = (side: string): { ok: true; value: number | null } | { ok: false; message: string } => {
    if (side === '') return { ok: true, value: null };
    const parsed = parseQuantity(side);
    return parsed.ok ? { ok: true, value: parsed.value } : parsed;
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

/** True when every condition of the policy holds for the volume (an empty condition set matches all). */
export function volumePolicyMatches(conditions: VolumePolicyConditions, volume: VolumeDescription): boolean {
  if (conditions.capacity !== undefined) {
    const range = parseCapacityRange(conditions.capacity);
    if (!range.ok || volume.capacityBytes === undefined) return false;
    if (range.value.lowerBytes !== null && volume.capacityBytes < range.value.lowerBytes) return false;
    if (range.value.upperBytes !== null && volume.capacityBytes > range.value.upperBytes) return false;
  }
  if (conditions.storageClass !== undefined) {
    if (volume.storageClass === undefined || !conditions.storageClass.includes(volume.storageClass)) return false;
  }
  if (conditions.nfs !== undefined) {
    if (!volume.nfs) return false;
    if (conditions.nfs.server !== undefined && conditions.nfs.server !== volume.nfs.server) return false;
    if (conditions.nfs.path !== undefined && conditions.nfs.path !== volume.nfs.path) return false;
  }
  if (conditions.csi !== undefined) {
    if (!volume.csi) return false;
    if (conditions.csi.driver !== undefined && conditions.csi.driver !== volume.csi.driver) return false;
    for (const [key, value] of Object.entries(conditions.csi.volumeAttributes ?? {})) {
      if (volume.csi.volumeAttributes?.[key] !== value) return false;
    }
  }
  if (conditions.volumeTypes !== undefined) {
    if (volume.volumeType === undefined || !(conditions.volumeTypes as readonly string[]).includes(volume.volumeType)) return false;
  }
  if (conditions.pvcLabels !== undefined) {
    if (!volume.pvcBacked) return false;
    for (const [key, value] of Object.entries(conditions.pvcLabels)) {
      if (volume.pvcLabels?.[key] !== value) return false;
    }
  }
  if (conditions.pvcPhase !== undefined) {
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
