/*
 * Volume-policy conditions, case by case as Velero's tables decide them
 * (internal/resourcepolicies: volume_resources_test.go, volume_resources_validator_test.go;
 * internal/volumehelper: volume_policy_helper_test.go). Case names are Velero's where the case
 * comes from its tables; the inputs and expected outcomes are ported as facts.
 */
import { describe, expect, it } from 'vitest';
import { pod, pv, pvc } from '../test/builders.js';
import { type FsBackupContext, selectFsBackupVolumes } from './fs-backup-volumes.js';
import type { PersistentVolume, PersistentVolumeClaim, Pod } from './kube-types.js';
import {
  parseCapacityRange,
  type VolumeDescription,
  type VolumePolicy,
  type VolumePolicyConditions,
  volumePolicyMatches,
} from './volume-policy.js';

const Gi = 2 ** 30;
const pvcVolume = (more: Partial<VolumeDescription> = {}): VolumeDescription => ({ pvcBacked: true, ...more });

describe('parseCapacityRange (Velero TestParseCapacity, TestCapacityConditionValidate)', () => {
  it.each<[string, string, { lower: number | null; upper: number | null } | 'invalid']>([
    ['10Gi,20Gi', '10Gi,20Gi', { lower: 10 * Gi, upper: 20 * Gi }],
    ['10Gi,', '10Gi,', { lower: 10 * Gi, upper: null }],
    ['10Gi', '10Gi', 'invalid'],
    ['"" (no bounds)', '', { lower: null, upper: null }],
    ['lower and upper are both zero', '0,0', { lower: null, upper: null }],
    ['lower is zero and upper is greater than zero', '0,100', { lower: null, upper: 100 }],
    ['lower is greater than upper', '100,50', 'invalid'],
    ['lower and upper are equal', '100,100', { lower: 100, upper: 100 }],
    ['lower is greater than zero and upper is zero', '100,0', { lower: 100, upper: null }],
    ['lower and upper are both not zero and lower is less than upper', '100,200', { lower: 100, upper: 200 }],
    ['lower and upper are both not zero and lower is greater than upper', '200,100', 'invalid'],
  ])('%s', (_name, text, expected) => {
    const parsed = parseCapacityRange(text);
    if (expected === 'invalid') expect(parsed.ok).toBe(false);
    else expect(parsed).toEqual({ ok: true, value: { lowerBytes: expected.lower, upperBytes: expected.upper } });
  });
});

describe('capacity condition (Velero TestCapacityIsInRange)', () => {
  it.each<[string, number | undefined, boolean]>([
    ['0,10Gi', 5 * Gi, true],
    ['0,10Gi', 15 * Gi, false],
    ['20Gi,0', 25 * Gi, true],
    ['20Gi,0', 15 * Gi, false],
    ['10Gi,20Gi', 15 * Gi, true],
    ['10Gi,20Gi', 5 * Gi, false],
    ['10Gi,20Gi', 25 * Gi, false],
    ['0,0', 5 * Gi, true],
    ['', 5 * Gi, true],
    // an inline volume has capacity 0 for capacity conditions
    [',10Gi', undefined, true],
    ['10Gi,', undefined, false],
  ])('capacity %j with %s bytes → %s', (capacity, bytes, matches) => {
    const volume = bytes === undefined ? { pvcBacked: false } : pvcVolume({ capacityBytes: bytes });
    expect(volumePolicyMatches({ capacity }, volume)).toBe(matches);
  });
});

describe('list and map conditions (Velero TestStorageClassConditionMatch, TestPVCLabelsMatch, TestNFSConditionMatch, TestCSIConditionMatch, pvcPhase, volumeTypes)', () => {
  it.each<[string, VolumePolicyConditions, VolumeDescription, boolean]>([
    ['match single storage class', { storageClass: ['gp2'] }, pvcVolume({ storageClass: 'gp2' }), true],
    ['match multiple storage classes', { storageClass: ['gp2', 'ebs-sc'] }, pvcVolume({ storageClass: 'gp2' }), true],
    ['mismatch storage class', { storageClass: ['gp2'] }, pvcVolume({ storageClass: 'ebs-sc' }), false],
    ['empty storage class', { storageClass: [] }, pvcVolume({ storageClass: 'ebs-sc' }), true],
    ['empty volume storage class', { storageClass: ['gp2'] }, pvcVolume(), false],
    [
      'match exact label (single)',
      { pvcLabels: { environment: 'production' } },
      pvcVolume({ pvcLabels: { environment: 'production' } }),
      true,
    ],
    [
      'match exact label (multiple)',
      { pvcLabels: { environment: 'production', app: 'database' } },
      pvcVolume({ pvcLabels: { environment: 'production', app: 'database', extra: 'x' } }),
      true,
    ],
    ['mismatch label value', { pvcLabels: { environment: 'production' } }, pvcVolume({ pvcLabels: { environment: 'staging' } }), false],
    [
      'missing label key',
      { pvcLabels: { environment: 'production', app: 'database' } },
      pvcVolume({ pvcLabels: { environment: 'production' } }),
      false,
    ],
    ['empty condition always matches', { pvcLabels: {} }, pvcVolume({ pvcLabels: { environment: 'production' } }), true],
    ['nil pvcLabels fails non-empty condition', { pvcLabels: { environment: 'production' } }, pvcVolume(), false],
    [
      'match nfs condition',
      { nfs: { server: '192.168.10.20', path: '/mnt/data' } },
      pvcVolume({ nfs: { server: '192.168.10.20', path: '/mnt/data' } }),
      true,
    ],
    ['empty nfs server and path condition', { nfs: {} }, pvcVolume({ nfs: { server: '192.168.10.20', path: '/mnt/data' } }), true],
    ['server mismatch', { nfs: { server: '192.168.10.20', path: '' } }, pvcVolume({ nfs: { server: '', path: '/mnt/data' } }), false],
    [
      'empty nfs server condition',
      { nfs: { path: '/mnt/data' } },
      pvcVolume({ nfs: { server: '192.168.10.20', path: '/mnt/data' } }),
      true,
    ],
    ['empty nfs volume', { nfs: { server: '192.168.10.20' } }, pvcVolume(), false],
    ['match csi driver condition', { csi: { driver: 'test' } }, pvcVolume({ csi: { driver: 'test' } }), true],
    ['empty csi driver condition', { csi: {} }, pvcVolume({ csi: { driver: 'test' } }), true],
    ['empty csi driver volume', { csi: { driver: 'test' } }, pvcVolume({ csi: { driver: '' } }), false],
    [
      'match csi volumeAttributes condition',
      { csi: { driver: 'test', volumeAttributes: { protocol: 'nfs' } } },
      pvcVolume({ csi: { driver: 'test', volumeAttributes: { protocol: 'nfs' } } }),
      true,
    ],
    [
      'empty csi volumeAttributes condition',
      { csi: { driver: 'test' } },
      pvcVolume({ csi: { driver: 'test', volumeAttributes: { protocol: 'nfs' } } }),
      true,
    ],
    [
      'empty csi volumeAttributes volume',
      { csi: { driver: 'test', volumeAttributes: { protocol: 'nfs' } } },
      pvcVolume({ csi: { driver: 'test' } }),
      false,
    ],
    ['empty pvcPhase list matches all', { pvcPhase: [] }, pvcVolume({ pvcPhase: 'Bound' }), true],
    ['pvcPhase of an inline volume never matches', { pvcPhase: ['Bound'] }, { pvcBacked: false }, false],
    ['empty volumeTypes list matches all', { volumeTypes: [] }, { pvcBacked: false, volumeType: 'emptyDir' }, true],
    ['volumeTypes mismatch', { volumeTypes: ['nfs'] }, { pvcBacked: false, volumeType: 'emptyDir' }, false],
  ])('%s', (_name, conditions, volume, matches) => {
    expect(volumePolicyMatches(conditions, volume)).toBe(matches);
  });
});

describe('selectFsBackupVolumes with policies: ephemeral volumes and PVCs without a PV (Velero volumehelper)', () => {
  const claims: PersistentVolumeClaim[] = [
    { ...pvc('pvc-pending', { volumeName: null, storageClass: 'non-existent-class' }) },
    { ...pvc('pvc-lost', { volumeName: null, storageClass: 'some-class' }), status: { phase: 'Lost' } },
    pvc('web-scratch', { storageClass: 'fast' }),
  ];
  const volumes: PersistentVolume[] = [pv('pv-web-scratch', { storageClassName: 'fast', csi: { driver: 'ebs.csi.aws.com' } })];
  const ctx = (policies: VolumePolicy[]): FsBackupContext => ({
    spec: { defaultVolumesToFsBackup: true, includedResources: [], excludedResources: [] },
    volumePolicies: policies,
    findPvc: (namespace, name) => claims.find((c) => c.metadata.namespace === namespace && c.metadata.name === name),
    findPv: (name) => volumes.find((v) => v.metadata.name === name),
    nodesWithAgent: new Set(['node-1']),
    claimedPvcs: new Map(),
  });
  const decide = (target: Pod, policies: VolumePolicy[]) =>
    selectFsBackupVolumes(target, ctx(policies)).volumes.map((v) => [v.volume, v.decision, v.code]);
  const skip = (conditions: VolumePolicyConditions): VolumePolicy => ({ conditions, action: { type: 'skip' } });

  it.each<[string, string, VolumePolicy[], [string, string]]>([
    [
      'Pending PVC with phase-based skip policy should not error and return false',
      'pvc-pending',
      [skip({ pvcPhase: ['Pending'] })],
      ['skip', 'CORE_VOLUME_POLICY_SKIP'],
    ],
    [
      'Pending PVC without matching skip policy should error (no PV)',
      'pvc-pending',
      [skip({ storageClass: ['gp2-csi'] })],
      ['error', 'CORE_VOLUME_PVC_WITHOUT_PV'],
    ],
    [
      'Lost PVC with phase-based skip policy should not error and return false',
      'pvc-lost',
      [skip({ pvcPhase: ['Lost'] })],
      ['skip', 'CORE_VOLUME_POLICY_SKIP'],
    ],
    [
      'Lost PVC with policy for Pending and Lost should not error and return false',
      'pvc-lost',
      [skip({ pvcPhase: ['Pending', 'Lost'] })],
      ['skip', 'CORE_VOLUME_POLICY_SKIP'],
    ],
  ])('%s', (_name, claim, policies, [decision, code]) => {
    expect(decide(pod('pod-1', { claims: [claim] }), policies)).toEqual([[`vol-${claim}`, decision, code]]);
  });

  it('without volume policies a PVC without a PV follows the annotations (no error, as Velero)', () => {
    const res = selectFsBackupVolumes(pod('pod-1', { claims: ['pvc-pending'] }), { ...ctx([]), volumePolicies: null });
    expect(res.volumes.map((v) => v.decision)).toEqual(['fs-backup']);
  });

  it('the error names the PVC and why', () => {
    const [volume] = selectFsBackupVolumes(pod('pod-1', { claims: ['pvc-pending'] }), ctx([skip({ storageClass: ['gp2-csi'] })])).volumes;
    expect(volume?.reason).toBe(
      'PVC default/pvc-pending cannot be backed up: it has no PV (phase Pending), and no volume policy matched it (a policy with pvcPhase can skip it)',
    );
  });

  it('a generic ephemeral volume is of type ephemeral (not its PV type) with capacity 0', () => {
    const target = pod('web', { volumes: [{ name: 'scratch', ephemeral: { volumeClaimTemplate: {} } }] });
    expect(decide(target, [skip({ volumeTypes: ['ephemeral'] })])).toEqual([['scratch', 'skip', 'CORE_VOLUME_POLICY_SKIP']]);
    expect(decide(target, [skip({ volumeTypes: ['csi'] })])).toEqual([['scratch', 'fs-backup', 'CORE_VOLUME_DEFAULT_FS_BACKUP']]);
    expect(decide(target, [skip({ capacity: ',1Gi' })])).toEqual([['scratch', 'skip', 'CORE_VOLUME_POLICY_SKIP']]);
  });
});
