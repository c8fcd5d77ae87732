/*
 * A dry run's estimate of the bytes a backup's fs-backup volumes hold: the size each volume was
 * provisioned with, read from the objects the plan already listed. It is an upper bound of what
 * a first backup copies (volumes are rarely full; the repository deduplicates, and an incremental
 * run rereads only changed files), never a measurement; `basis` says where each number comes from.
 */
import type { PersistentVolume, PersistentVolumeClaim, PodVolume } from './kube-types.js';
import { parseQuantity } from './quantity.js';

export type VolumeSizeBasis = 'pvc-request' | 'pvc-capacity' | 'pv-capacity' | 'emptydir-size-limit';

export type VolumeSizeEstimate = { bytes: number; basis: VolumeSizeBasis } | { bytes: null; basis: 'unknown'; why: string };

/**
 * The PVC's requested storage, else its bound capacity, else its PV's capacity; an emptyDir's
 * sizeLimit; otherwise unknown (with why). An unparsable quantity is skipped for the next source.
 */
export function estimateVolumeBytes(
  volume: PodVolume,
  pvc: PersistentVolumeClaim | undefined,
  pv: PersistentVolume | undefined,
): VolumeSizeEstimate {
  const candidates: Array<[VolumeSizeBasis, unknown]> = [
    ['pvc-request', pvc?.spec?.resources?.requests?.storage],
    ['pvc-capacity', pvc?.status?.capacity?.storage],
    ['pv-capacity', pv?.spec?.capacity?.storage],
    ['emptydir-size-limit', (volume.emptyDir as { sizeLimit?: unknown } | undefined)?.sizeLimit],
  ];
  for (const [basis, text] of candidates) {
    if (typeof text !== 'string') continue;
    const parsed = parseQuantity(text);
    if (parsed.ok && parsed.value >= 0) return { bytes: Math.ceil(parsed.value), basis };
  }
  if (pvc) return { bytes: null, basis: 'unknown', why: 'the PVC states no requested storage or capacity' };
  if (volume.emptyDir) return { bytes: null, basis: 'unknown', why: 'the emptyDir has no sizeLimit' };
  return { bytes: null, basis: 'unknown', why: 'the volume states no size' };
}

export interface NodeByteEstimate {
  node: string;
  /** fs-backup volumes on the node (one PVB each). */
  volumes: number;
  /** Sum of the volumes with a known size. */
  estimatedBytes: number;
  /** Volumes whose size is unknown (not in estimatedBytes). */
  volumesWithoutEstimate: number;
}

/** Sums the estimates per node, nodes sorted by name. */
export function estimateBytesPerNode(volumes: ReadonlyArray<{ node: string; estimate: VolumeSizeEstimate }>): NodeByteEstimate[] {
  const byNode = new Map<string, NodeByteEstimate>();
  for (const { node, estimate } of volumes) {
    const entry = byNode.get(node) ?? { node, volumes: 0, estimatedBytes: 0, volumesWithoutEstimate: 0 };
    entry.volumes += 1;
    if (estimate.bytes === null) entry.volumesWithoutEstimate += 1;
    else entry.estimatedBytes += estimate.bytes;
    byNode.set(node, entry);
  }
  return [...byNode.values()].sort((a, b) => a.node.localeCompare(b.node));
}
