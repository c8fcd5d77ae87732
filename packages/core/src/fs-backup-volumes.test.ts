import { describe, expect, it } from 'vitest';
import { pod, pv, pvc, specOf } from '../test/builders.js';
import { type FsBackupContext, type SnapshotContext, selectFsBackupVolumes } from './fs-backup-volumes.js';
import type { PersistentVolume, PersistentVolumeClaim, Pod, PodVolume } from './kube-types.js';
import { chooseSnapshotClass, type SnapshotClassInfo } from './snapshot-class.js';
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
      [
        'vol-data',
        'error',
        'cannot be snapshotted (volume policy #2 says snapshot): the cluster serves no VolumeSnapshotClass (snapshot.storage.k8s.io is not installed)',
      ],
      ['vol-nfs-share', 'fs-backup', 'volume policy #1 says fs-backup'],
      [
        'vol-big',
        'error',
        'cannot be snapshotted (volume policy #2 says snapshot): the cluster serves no VolumeSnapshotClass (snapshot.storage.k8s.io is not installed)',
      ],
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
    expect(second.volumes[0]?.reason).toContain('through pod default/a (one PVB or snapshot per PVC)');
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

describe('selectFsBackupVolumes: snapshots', () => {
  const ebs = 'ebs.csi.aws.com';
  const classes: SnapshotClassInfo[] = [
    { name: 'ebs-default', driver: ebs, annotations: { 'snapshot.storage.kubernetes.io/is-default-class': 'true' } },
    { name: 'ebs-other', driver: ebs },
    { name: 'nfs-snap', driver: 'nfs.csi.k8s.io' },
  ];
  const snapshots = (over: Partial<SnapshotContext> = {}): SnapshotContext => ({ volumes: false, moveData: false, classes, ...over });
  const everything: VolumePolicy[] = [{ conditions: {}, action: { type: 'snapshot' } }];

  it('a policy snapshot takes the driver default class, with its data kept or moved as snapshotMoveData says', () => {
    for (const moveData of [false, true]) {
      const [data] = selectFsBackupVolumes(
        pod('db', { claims: ['data'] }),
        context({ volumePolicies: everything, snapshots: snapshots({ moveData }) }),
      ).volumes;
      expect(data).toMatchObject({
        decision: 'snapshot',
        code: 'CORE_VOLUME_POLICY_SNAPSHOT',
        snapshot: { className: 'ebs-default', driver: ebs, pvName: 'pv-data', volumeMode: 'Filesystem', moveData },
      });
      expect(data?.reason).toContain(moveData ? 'its data moved into the repository' : 'the snapshot kept');
    }
  });

  it('the PVC annotation stowage.dev/snapshot-move-data overrides snapshotMoveData for its claim; another value is an error naming it', () => {
    const annotated = (value: string) => (namespace: string, name: string) => {
      const claim = claims.find((c) => c.metadata.namespace === namespace && c.metadata.name === name);
      return claim && { ...claim, metadata: { ...claim.metadata, annotations: { 'stowage.dev/snapshot-move-data': value } } };
    };
    for (const [value, backupMoves, moved] of [
      ['false', true, false],
      ['true', false, true],
    ] as const) {
      const [data] = selectFsBackupVolumes(
        pod('db', { claims: ['data'] }),
        context({ volumePolicies: everything, snapshots: snapshots({ moveData: backupMoves }), findPvc: annotated(value) }),
      ).volumes;
      expect(data).toMatchObject({ decision: 'snapshot', snapshot: { moveData: moved } });
      expect(data?.reason).toContain(`(PVC annotation stowage.dev/snapshot-move-data: "${value}")`);
    }
    const [bad] = selectFsBackupVolumes(
      pod('db', { claims: ['data'] }),
      context({ volumePolicies: everything, snapshots: snapshots(), findPvc: annotated('yes') }),
    ).volumes;
    expect(bad).toMatchObject({ decision: 'error', code: 'CORE_VOLUME_SNAPSHOT_IMPOSSIBLE' });
    expect(bad?.reason).toContain('annotation stowage.dev/snapshot-move-data: "yes"; it must be "true" or "false"');
  });

  it('chooses the class by the PVC annotation, then the class label, then the default; refuses ambiguity and absence', () => {
    expect(chooseSnapshotClass(ebs, classes, { 'velero.io/csi-volumesnapshot-class': 'ebs-other' })).toMatchObject({
      className: 'ebs-other',
    });
    const labelled = [...classes, { name: 'ebs-backup', driver: ebs, labels: { 'velero.io/csi-volumesnapshot-class': 'true' } }];
    expect(chooseSnapshotClass(ebs, labelled, undefined)).toMatchObject({ ok: true, className: 'ebs-backup' });
    const twice = [...labelled, { name: 'ebs-backup-2', driver: ebs, labels: { 'stowage.dev/csi-volumesnapshot-class': 'true' } }];
    expect(chooseSnapshotClass(ebs, twice, undefined)).toMatchObject({ ok: true, className: 'ebs-backup-2' });
    const ambiguous = [...twice, { name: 'ebs-backup-3', driver: ebs, labels: { 'stowage.dev/csi-volumesnapshot-class': 'true' } }];
    expect(chooseSnapshotClass(ebs, ambiguous, undefined)).toMatchObject({ ok: false });
    expect(chooseSnapshotClass(ebs, classes, { 'stowage.dev/csi-volumesnapshot-class': 'nfs-snap' })).toMatchObject({
      ok: false,
      message: expect.stringContaining('which is for driver nfs.csi.k8s.io'),
    });
    expect(chooseSnapshotClass('pd.csi.storage.gke.io', classes, undefined)).toEqual({
      ok: false,
      message: 'no VolumeSnapshotClass exists for its CSI driver pd.csi.storage.gke.io',
    });
  });

  it('a volume the policy says to snapshot but that cannot be is an error naming why, never a skip', () => {
    const onlyNfsClass = snapshots({ classes: [{ name: 'nfs-snap', driver: 'nfs.csi.k8s.io' }] });
    const result = selectFsBackupVolumes(
      pod('db', { claims: ['data', 'nfs-share', 'unbound'], volumes: [{ name: 'scratch', emptyDir: {} }] }),
      context({ volumePolicies: everything, snapshots: onlyNfsClass }),
    ).volumes;
    expect(result.map((v) => [v.volume, v.decision, v.code])).toEqual([
      ['vol-data', 'error', 'CORE_VOLUME_SNAPSHOT_IMPOSSIBLE'],
      ['vol-nfs-share', 'error', 'CORE_VOLUME_SNAPSHOT_IMPOSSIBLE'],
      ['vol-unbound', 'error', 'CORE_VOLUME_SNAPSHOT_IMPOSSIBLE'],
      ['scratch', 'error', 'CORE_VOLUME_SNAPSHOT_IMPOSSIBLE'],
    ]);
    expect(result.map((v) => v.reason)).toEqual([
      'cannot be snapshotted (volume policy #1 says snapshot): no VolumeSnapshotClass exists for its CSI driver ebs.csi.aws.com',
      'cannot be snapshotted (volume policy #1 says snapshot): PersistentVolume pv-nfs-share is not a CSI volume',
      'cannot be snapshotted (volume policy #1 says snapshot): PVC default/unbound is not bound to a PersistentVolume',
      'cannot be snapshotted (volume policy #1 says snapshot): only PVC-backed volumes can be snapshotted',
    ]);
    const moved = selectFsBackupVolumes(
      pod('db', { claims: ['data'] }),
      context({ volumePolicies: everything, snapshots: snapshots({ moveData: true }), nodesWithAgent: new Set() }),
    ).volumes[0];
    expect(moved?.reason).toContain('no node agent runs to move its data');
  });

  it('snapshotVolumes snapshots the PVC-backed volumes nothing chose fs-backup for; fs-backup choices stay', () => {
    const target = pod('db', {
      claims: ['data', 'big'],
      volumes: [{ name: 'scratch', emptyDir: {} }],
      annotations: { 'backup.velero.io/backup-volumes': 'vol-big' },
    });
    expect(decisions(target, context({ snapshots: snapshots({ volumes: true }) }))).toEqual({
      'vol-data': 'snapshot CORE_VOLUME_SNAPSHOT_VOLUMES',
      'vol-big': 'fs-backup CORE_VOLUME_OPTED_IN',
      scratch: 'skip CORE_VOLUME_NOT_OPTED_IN',
    });
    const optedOut = pod('db', { claims: ['data'], annotations: { 'backup.velero.io/backup-volumes-excludes': 'vol-data' } });
    expect(decisions(optedOut, context({ spec: { defaultVolumesToFsBackup: true }, snapshots: snapshots({ volumes: true }) }))).toEqual({
      'vol-data': 'snapshot CORE_VOLUME_SNAPSHOT_VOLUMES',
    });
    expect(decisions(target, context({ snapshots: snapshots({ volumes: false }) }))['vol-data']).toBe('skip CORE_VOLUME_NOT_OPTED_IN');
  });

  it('a block-mode volume chosen for fs-backup is snapshotted with snapshotVolumes, else skipped with a hint', () => {
    const block = pod('db', { claims: ['data'], annotations: { 'backup.velero.io/backup-volumes': 'vol-data' } });
    block.spec.containers[0]!.volumeMounts = [];
    block.spec.containers[0]!.volumeDevices = [{ name: 'vol-data', devicePath: '/dev/xvdb' }];
    expect(decisions(block, context({ snapshots: snapshots({ volumes: true }) }))).toEqual({
      'vol-data': 'snapshot CORE_VOLUME_BLOCK_MODE_SNAPSHOT',
    });
    const skipped = selectFsBackupVolumes(block, context()).volumes[0];
    expect(skipped).toMatchObject({ decision: 'skip', code: 'CORE_VOLUME_BLOCK_MODE' });
    expect(skipped?.reason).toContain('snapshotVolumes: true');
  });

  it('takes one snapshot per PVC: the second pod mounting it stands by', () => {
    const claimed = new Map<string, string>();
    const first = selectFsBackupVolumes(
      pod('a', { claims: ['data'] }),
      context({ volumePolicies: everything, snapshots: snapshots(), claimedPvcs: claimed }),
    );
    for (const claim of first.newClaims) claimed.set(claim.pvcKey, claim.podKey);
    const second = selectFsBackupVolumes(
      pod('b', { claims: ['data'] }),
      context({ volumePolicies: everything, snapshots: snapshots(), claimedPvcs: claimed }),
    );
    expect(first.volumes[0]?.decision).toBe('snapshot');
    expect(second.volumes[0]).toMatchObject({ decision: 'skip', code: 'CORE_VOLUME_PVC_ALREADY_CLAIMED' });
  });
});
