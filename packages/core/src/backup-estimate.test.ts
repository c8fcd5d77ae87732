import { describe, expect, it } from 'vitest';
import { estimateBytesPerNode, estimateVolumeBytes } from './backup-estimate.js';
import type { PersistentVolume, PersistentVolumeClaim } from './kube-types.js';

const pvc = (requests?: string, capacity?: string): PersistentVolumeClaim => ({
  metadata: { name: 'data', namespace: 'shop' },
  spec: { ...(requests ? { resources: { requests: { storage: requests } } } : {}) },
  ...(capacity ? { status: { capacity: { storage: capacity } } } : {}),
});
const pv = (capacity: string): PersistentVolume => ({ metadata: { name: 'pv-1' }, spec: { capacity: { storage: capacity } } });

describe('estimateVolumeBytes', () => {
  it('takes the PVC request first, then its capacity, then the PV capacity', () => {
    const volume = { name: 'data', persistentVolumeClaim: { claimName: 'data' } };
    expect(estimateVolumeBytes(volume, pvc('1Gi', '2Gi'), pv('3Gi'))).toEqual({ bytes: 2 ** 30, basis: 'pvc-request' });
    expect(estimateVolumeBytes(volume, pvc(undefined, '2Gi'), pv('3Gi'))).toEqual({ bytes: 2 * 2 ** 30, basis: 'pvc-capacity' });
    expect(estimateVolumeBytes(volume, pvc(), pv('500M'))).toEqual({ bytes: 500e6, basis: 'pv-capacity' });
  });

  it('skips an unparsable quantity for the next source and says why when nothing is known', () => {
    const volume = { name: 'data', persistentVolumeClaim: { claimName: 'data' } };
    expect(estimateVolumeBytes(volume, pvc('lots', '1G'), undefined)).toEqual({ bytes: 1e9, basis: 'pvc-capacity' });
    expect(estimateVolumeBytes(volume, pvc(), undefined)).toEqual({
      bytes: null,
      basis: 'unknown',
      why: 'the PVC states no requested storage or capacity',
    });
  });

  it("uses an emptyDir's sizeLimit, and has none without it", () => {
    expect(estimateVolumeBytes({ name: 'cache', emptyDir: { sizeLimit: '64Mi' } }, undefined, undefined)).toEqual({
      bytes: 64 * 2 ** 20,
      basis: 'emptydir-size-limit',
    });
    expect(estimateVolumeBytes({ name: 'cache', emptyDir: {} }, undefined, undefined)).toMatchObject({ bytes: null, basis: 'unknown' });
  });
});

describe('estimateBytesPerNode', () => {
  it('sums known sizes per node and counts the unknown ones apart', () => {
    expect(
      estimateBytesPerNode([
        { node: 'node-b', estimate: { bytes: 10, basis: 'pvc-request' } },
        { node: 'node-a', estimate: { bytes: 5, basis: 'pv-capacity' } },
        { node: 'node-b', estimate: { bytes: null, basis: 'unknown', why: 'x' } },
        { node: 'node-b', estimate: { bytes: 7, basis: 'emptydir-size-limit' } },
      ]),
    ).toEqual([
      { node: 'node-a', volumes: 1, estimatedBytes: 5, volumesWithoutEstimate: 0 },
      { node: 'node-b', volumes: 3, estimatedBytes: 17, volumesWithoutEstimate: 1 },
    ]);
  });
});
