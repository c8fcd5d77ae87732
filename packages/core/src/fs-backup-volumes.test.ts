import { describe, expect, it } from 'vitest';
import { pod, pv, pvc, specOf } from '../test/builders.js';
import { type FsBackupContext, selectFsBackupVolumes } from './fs-backup-volumes.js';
import type { PersistentVolume, PersistentVolumeClaim, Pod, PodVolume } from './kube-types.js';
import type { VolumePolicy } from './volume-policy.js';

const claims: PersistentVolumeClaim[] = [
  pvc('data', { labels: { tier: 'gold' }, storageClass: 'fast' }),
  pvc('nfs-share'),
  pvc('big'),
  pvc('host'),
  pvc('unbound', { volumeName: null }),
];
const volumes: PersistentVolume[] = [
  pv('pv-data', { storageClassName: 'fast', csi: { driver: 'ebs.csi.aws.com', volumeAttributes: { type: 'gp3' } } }),
  pv('pv-nfs-share', { storageClassName: 'nfs-client', nfs: { server: 'nas-1', path: '/exports/a' } }),
  pv('pv-big', { capacity: { storage: '200Gi' }, storageClassName: 'slow', csi: { driver: 'ebs.csi.aws.com' } }),
  pv('pv-host', { hostPath: { path: '/srv' } }),
];

function context(overrides: Partial<Omit<FsBackupContext, 'spec'>> & { spec?: Record<string, unknown> } = {}): FsBackupContext {
  const { spec, ...rest } = overrides;
  return {
    spec: specOf(spec ?? {}),
    volumePolicies: null,
    findPvc: (namespace, name) => claims.find((claim) => claim.metadata.namespace === namespace && claim.metadata.name === name),
    findPv: (name) => volumes.find((volume) => volume.metadata.name === name),
    nodesWithAgent: new Set(['node-1']),
    claimedPvcs: new Map(),
    ...rest,
  };
}

const decisions = (target: Pod, ctx: FsBackupContext) =>
  Object.fromEntries(
    selectFsBackupVolumes(target, ctx).volumes.map((decision) => [decision.volume, `${decision.decision} ${decision.code}`]),
  );

const inlineVolumes: PodVolume[] = [
  { name: 'scratch', emptyDir: {} },
  { name: 'host', hostPath: { path: '/var/log' } },
  { name: 'creds', secret: { secretName: 's' } },
  { name: 'settings', configMap: { name: 'c' } },
  { name: 'token', projected: { sources: [] } },
  { name: 'info', downwardAPI: {} },
  { name: 'default-token-abcde', emptyDir: {} },
];

describe('selectFsBackupVolumes: never', () => {
  it('never backs up hostPath, secret, configMap, projected, downwardAPI or default-token volumes, whatever the settings', () => {
    const everything = Object.fromEntries(inlineVolumes.map((volume) => [volume.name, 1]));
    const target = pod('web', {
      volumes: inlineVolumes,
      annotations: { 'backup.velero.io/backup-volumes': Object.keys(everything).join(',') },
    });
    const allPolicy: VolumePolicy[] = [{ conditions: {}, action: { type: 'fs-backup' } }];
    for (const ctx of [context(), context({ spec: { defaultVolumesToFsBackup: true } }), context({ volumePolicies: allPolicy })]) {
      expect(decisions(target, ctx)).toEqual({
        scratch:
          'fs-backup ' +
          (ctx.volumePolicies
            ? 'CORE_VOLUME_POLICY_FS_BACKUP'
            : ctx.spec.defaultVolumesToFsBackup
              ? 'CORE_VOLUME_DEFAULT_FS_BACKUP'
              : 'CORE_VOLUME_OPTED_IN'),
        host: 'skip CORE_VOLUME_TYPE_NEVER_BACKED_UP',
        creds: 'skip CORE_VOLUME_TYPE_NEVER_BACKED_UP',
        settings: 'skip CORE_VOLUME_TYPE_NEVER_BACKED_UP',
        token: 'skip CORE_VOLUME_TYPE_NEVER_BACKED_UP',
        info: 'skip CORE_VOLUME_TYPE_NEVER_BACKED_UP',
        'default-token-abcde': 'skip CORE_VOLUME_DEFAULT_TOKEN',
      });
    }
  });

  it('never backs up a PVC bound to a hostPath PV, a missing PVC, or PVCs the filters exclude', () => {
    const target = pod('web', { claims: ['host', 'missing', 'data'] });
    expect(decisions(target, context({ spec: { defaultVolumesToFsBackup: true } }))).toEqual({
      'vol-host': 'skip CORE_VOLUME_HOSTPATH_PV',
      'vol-missing': 'skip CORE_VOLUME_PVC_NOT_FOUND',
      'vol-data': 'fs-backup CORE_VOLUME_DEFAULT_FS_BACKUP',
    });
    expect(
      decisions(pod('web', { claims: ['data'] }), context({ spec: { defaultVolumesToFsBackup: true, excludedResources: ['pvc'] } })),
    ).toEqual({
      'vol-data': 'skip CORE_VOLUME_PVC_EXCLUDED',
    });
  });
});

describe('selectFsBackupVolumes: volume policies', () => {
  const target = () => pod('web', { claims: ['data', 'nfs-share', 'big', 'unbound'], volumes: [{ name: 'scratch', emptyDir: {} }] });

  it.each<[string, VolumePolicy['conditions'], Record<string, string>]>([
    ['capacity range', { capacity: '100Gi,' }, { 'vol-big': 'policy' }],
    // inline volumes and PVCs without a PV have capacity 0 for capacity conditions (Velero)
    [
      'capacity upper bound',
      { capacity: ',10Gi' },
      { 'vol-data': 'policy', 'vol-nfs-share': 'policy', 'vol-unbound': 'policy', scratch: 'policy' },
    ],
    ['storage class', { storageClass: ['nfs-client', 'slow'] }, { 'vol-nfs-share': 'policy', 'vol-big': 'policy' }],
    ['nfs server', { nfs: { server: 'nas-1' } }, { 'vol-nfs-share': 'policy' }],
    ['any nfs', { nfs: {} }, { 'vol-nfs-share': 'policy' }],
    ['csi driver with attributes', { csi: { driver: 'ebs.csi.aws.com', volumeAttributes: { type: 'gp3' } } }, { 'vol-data': 'policy' }],
    ['csi driver', { csi: { driver: 'ebs.csi.aws.com' } }, { 'vol-data': 'policy', 'vol-big': 'policy' }],
    ['volume type of an inline volume', { volumeTypes: ['emptyDir'] }, { scratch: 'policy' }],
    ['volume type of a PV', { volumeTypes: ['nfs'] }, { 'vol-nfs-share': 'policy' }],
    ['pvc labels', { pvcLabels: { tier: 'gold' } }, { 'vol-data': 'policy' }],
    ['pvc phase', { pvcPhase: ['Pending'] }, { 'vol-unbound': 'policy' }],
    ['all conditions must hold', { storageClass: ['fast'], pvcLabels: { tier: 'silver' } }, {}],
    ['a policy that matches nothing', { storageClass: ['does-not-exist'] }, {}],
  ])('%s', (_case, conditions, matched) => {
    const result = selectFsBackupVolumes(target(), context({ volumePolicies: [{ conditions, action: { type: 'skip' } }] }));
    for (const decision of result.volumes) {
      if (matched[decision.volume]) expect(decision.code, decision.volume).toBe('CORE_VOLUME_POLICY_SKIP');
      // fell through to the annotations; a PVC without a PV that no policy matched is an error (Velero)
      else
        expect(decision.code, decision.volume).toBe(
          decision.volume === 'vol-unbound' ? 'CORE_VOLUME_PVC_WITHOUT_PV' : 'CORE_VOLUME_NOT_OPTED_IN',
        );
    }
  });

  it('takes the first matching policy and reports each action', () => {
    const policies: VolumePolicy[] = [
      { conditions: { storageClass: ['nfs-client'] }, action: { type: 'fs-backup' } },
      { conditions: { csi: {} }, action: { type: 'snapshot' } },
      { conditions: { volumeTypes: ['emptyDir'] }, action: { type: 'skip' } },
      { conditions: {}, action: { type: 'fs-backup' } },
    ];
    const result = selectFsBackupVolumes(target(), context({ volumePolicies: policies }));
    expect(result.volumes.map((decision) => [decision.volume, decision.decision, decision.reason])).toEqual([
      ['vol-data', 'snapshot', 'volume policy #2 says snapshot; Stowage takes no snapshots, so no PVB is created'],
      ['vol-nfs-share', 'fs-backup', 'volume policy #1 says fs-backup'],
      ['vol-big', 'snapshot', 'volume policy #2 says snapshot; Stowage takes no snapshots, so no PVB is created'],
      ['vol-unbound', 'fs-backup', 'volume policy #4 says fs-backup'],
      ['scratch', 'skip', 'volume policy #3 says skip'],
    ]);
  });

  it('a policy decision beats the annotations', () => {
    const annotated = pod('web', { claims: ['data'], annotations: { 'backup.velero.io/backup-volumes': 'vol-data' } });
    expect(decisions(annotated, context({ volumePolicies: [{ conditions: {}, action: { type: 'skip' } }] }))).toEqual({
      'vol-data': 'skip CORE_VOLUME_POLICY_SKIP',
    });
  });
});

describe('selectFsBackupVolumes: annotations', () => {
  const volumesOf = [
    { name: 'a', emptyDir: {} },
    { name: 'b', emptyDir: {} },
    { name: 'both', emptyDir: {} },
  ];
  const annotations = { 'backup.velero.io/backup-volumes': 'a, both', 'backup.velero.io/backup-volumes-excludes': 'b,both' };

  it('opt-in when defaultVolumesToFsBackup is false: only backup-volumes is read, so a volume in both lists is backed up', () => {
    const result = selectFsBackupVolumes(pod('web', { volumes: volumesOf, annotations }), context());
    expect(result.volumes.map((decision) => [decision.volume, decision.decision, decision.code])).toEqual([
      ['a', 'fs-backup', 'CORE_VOLUME_OPTED_IN'],
      ['b', 'skip', 'CORE_VOLUME_NOT_OPTED_IN'],
      ['both', 'fs-backup', 'CORE_VOLUME_OPTED_IN'],
    ]);
    expect(result.volumes[2]?.reason).toContain('only the opt-in annotation is read');
  });

  it('opt-out when defaultVolumesToFsBackup is true: only backup-volumes-excludes is read, so a volume in both lists is skipped', () => {
    const result = selectFsBackupVolumes(
      pod('web', { volumes: volumesOf, annotations }),
      context({ spec: { defaultVolumesToFsBackup: true } }),
    );
    expect(result.volumes.map((decision) => [decision.volume, decision.decision, decision.code])).toEqual([
      ['a', 'fs-backup', 'CORE_VOLUME_DEFAULT_FS_BACKUP'],
      ['b', 'skip', 'CORE_VOLUME_OPTED_OUT'],
      ['both', 'skip', 'CORE_VOLUME_OPTED_OUT'],
    ]);
    expect(result.volumes[2]?.reason).toContain('only the excludes annotation is read');
  });
});

describe('selectFsBackupVolumes: run-time skips', () => {
  const optIn = { 'backup.velero.io/backup-volumes': 'vol-data,scratch' };

  it('skips every selected volume of a pod that is not running, with the reason', () => {
    const result = selectFsBackupVolumes(
      pod('web', { claims: ['data'], volumes: [{ name: 'scratch', emptyDir: {} }], annotations: optIn, phase: 'Pending' }),
      context(),
    );
    expect(result.volumes.map((decision) => decision.code)).toEqual(['CORE_VOLUME_POD_NOT_RUNNING', 'CORE_VOLUME_POD_NOT_RUNNING']);
    expect(result.volumes[0]?.reason).toMatch(/pod is not running \(phase Pending\); selected because listed in/);
    expect(result.newClaims).toEqual([]);
  });

  it('skips pods on a node without a node agent', () => {
    const result = selectFsBackupVolumes(pod('web', { claims: ['data'], annotations: optIn, node: 'node-9' }), context());
    expect(result.volumes[0]).toMatchObject({ decision: 'skip', code: 'CORE_VOLUME_NO_NODE_AGENT' });
    expect(result.volumes[0]?.reason).toContain('node-9');
  });

  it('one PVB per PVC: the second pod sharing a PVC is skipped', () => {
    const first = selectFsBackupVolumes(pod('a', { claims: ['data'], annotations: optIn }), context());
    expect(first.volumes[0]).toMatchObject({ decision: 'fs-backup', pvcName: 'data' });
    expect(first.newClaims).toEqual([{ pvcKey: 'default/data', podKey: 'default/a' }]);
    const claimed = new Map(first.newClaims.map((claim) => [claim.pvcKey, claim.podKey]));
    const second = selectFsBackupVolumes(pod('b', { claims: ['data'], annotations: optIn }), context({ claimedPvcs: claimed }));
    expect(second.volumes[0]).toMatchObject({ decision: 'skip', code: 'CORE_VOLUME_PVC_ALREADY_CLAIMED' });
    expect(second.volumes[0]?.reason).toContain('through pod default/a (one PVB per PVC)');
    expect(second.newClaims).toEqual([]);
  });

  it('a re-run for the same pod keeps its own claim (jobs run at least once)', () => {
    const again = selectFsBackupVolumes(
      pod('a', { claims: ['data'], annotations: optIn }),
      context({ claimedPvcs: new Map([['default/data', 'default/a']]) }),
    );
    expect(again.volumes[0]?.decision).toBe('fs-backup');
  });

  it('the same PVC mounted twice by one pod gets one PVB', () => {
    const target = pod('a', {
      volumes: [
        { name: 'one', persistentVolumeClaim: { claimName: 'data' } },
        { name: 'two', persistentVolumeClaim: { claimName: 'data' } },
      ],
      annotations: { 'backup.velero.io/backup-volumes': 'one,two' },
    });
    expect(selectFsBackupVolumes(target, context()).volumes.map((decision) => decision.code)).toEqual([
      'CORE_VOLUME_OPTED_IN',
      'CORE_VOLUME_PVC_ALREADY_CLAIMED',
    ]);
  });

  it('skips volumes no container mounts and block-mode volumes', () => {
    const target = pod('a', {
      volumes: [{ name: 'raw', persistentVolumeClaim: { claimName: 'data' } }],
      annotations: { 'backup.velero.io/backup-volumes': 'raw,unmounted' },
    });
    target.spec.volumes?.push({ name: 'unmounted', emptyDir: {} });
    const container = target.spec.containers[0];
    if (!container) throw new Error('test pod has a container');
    container.volumeMounts = [];
    container.volumeDevices = [{ name: 'raw', devicePath: '/dev/xvda' }];
    expect(decisions(target, context())).toEqual({ raw: 'skip CORE_VOLUME_BLOCK_MODE', unmounted: 'skip CORE_VOLUME_NOT_MOUNTED' });
  });
});
