import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  groupSkippedItems,
  type RestoreSelectionSpec,
  type SkippedRestoreGroup,
  selectRestoreItems,
  streamRestoreSelection,
} from './restore-selection.js';
import { item, pod } from './test-objects.js';
import type { BackedUpItem, BackedUpPodVolume } from './types.js';

const everything: RestoreSelectionSpec = {
  includedNamespaces: [],
  excludedNamespaces: [],
  includedResources: [],
  excludedResources: [],
  includeClusterResources: null,
  labelSelector: null,
  orLabelSelectors: [],
  namespaceMapping: {},
  restorePVs: true,
};

function keys(items: readonly Pick<BackedUpItem, 'group' | 'resource' | 'namespace' | 'name'>[]): string[] {
  return items.map((i) => `${i.group ? `${i.resource}.${i.group}` : i.resource}/${i.namespace ?? ''}/${i.name}`).sort();
}

const backup: BackedUpItem[] = [
  item('namespaces', null, 'shop', { kind: 'Namespace' }, { labels: { team: 'a' } }),
  item('namespaces', null, 'media', { kind: 'Namespace' }),
  item('configmaps', 'shop', 'settings', {}, { labels: { app: 'web' } }),
  item('secrets', 'shop', 'db', {}, { labels: { app: 'db' } }),
  item('configmaps', 'media', 'thumbs', {}, { labels: { app: 'thumbs' } }),
  item('deployments.apps', 'shop', 'web', {}, { labels: { app: 'web' } }),
  item('storageclasses.storage.k8s.io', null, 'fast'),
  item('nodes', null, 'node-a'),
  item('events', 'shop', 'web.1'),
  item('events.events.k8s.io', 'shop', 'web.2'),
  item('podvolumebackups.stowage.dev', 'stowage', 'nightly-abc'),
  item('podvolumerestores.stowage.dev', 'stowage', 'r-abc'),
  item('backups.velero.io', 'velero', 'old'),
  item('csinodes.storage.k8s.io', null, 'node-a'),
  item('volumeattachments.storage.k8s.io', null, 'va-1'),
];

describe('selectRestoreItems: filters', () => {
  it('never restores nodes, events, CSINodes, VolumeAttachments, Velero and Stowage kinds, and says so', () => {
    const selection = selectRestoreItems(backup, everything, []);
    const never = selection.skipped.filter((s) => s.reason === 'never-restored');
    expect(keys(never.map((s) => s.item))).toEqual([
      'backups.velero.io/velero/old',
      'csinodes.storage.k8s.io//node-a',
      'events.events.k8s.io/shop/web.2',
      'events/shop/web.1',
      'nodes//node-a',
      'podvolumebackups.stowage.dev/stowage/nightly-abc',
      'podvolumerestores.stowage.dev/stowage/r-abc',
      'volumeattachments.storage.k8s.io//va-1',
    ]);
    // everything is accounted for: restored or skipped with a reason
    expect(selection.items.length + selection.skipped.length).toBe(backup.length);
  });

  it.each<[string, Partial<RestoreSelectionSpec>, string[]]>([
    [
      'all namespaces, includeClusterResources null: cluster-scoped restored',
      {},
      [
        'configmaps/media/thumbs',
        'configmaps/shop/settings',
        'deployments.apps/shop/web',
        'namespaces//media',
        'namespaces//shop',
        'secrets/shop/db',
        'storageclasses.storage.k8s.io//fast',
      ],
    ],
    [
      'a namespace subset, null: no cluster-scoped items but the namespace',
      { includedNamespaces: ['shop'] },
      ['configmaps/shop/settings', 'deployments.apps/shop/web', 'namespaces//shop', 'secrets/shop/db'],
    ],
    [
      'a namespace subset, true: cluster-scoped items too',
      { includedNamespaces: ['shop'], includeClusterResources: true },
      [
        'configmaps/shop/settings',
        'deployments.apps/shop/web',
        'namespaces//shop',
        'secrets/shop/db',
        'storageclasses.storage.k8s.io//fast',
      ],
    ],
    [
      'all namespaces, false: no cluster-scoped items but namespaces',
      { includeClusterResources: false },
      [
        'configmaps/media/thumbs',
        'configmaps/shop/settings',
        'deployments.apps/shop/web',
        'namespaces//media',
        'namespaces//shop',
        'secrets/shop/db',
      ],
    ],
    [
      'an excluded namespace (glob) wins over included',
      { includedNamespaces: ['*'], excludedNamespaces: ['sh*'] },
      ['configmaps/media/thumbs', 'namespaces//media'],
    ],
    [
      'included resources by alias',
      { includedResources: ['cm'] },
      ['configmaps/media/thumbs', 'configmaps/shop/settings', 'namespaces//media', 'namespaces//shop'],
    ],
    [
      'excluded resources',
      { excludedResources: ['configmaps', 'deployments'] },
      ['namespaces//media', 'namespaces//shop', 'secrets/shop/db', 'storageclasses.storage.k8s.io//fast'],
    ],
    [
      'a label selector, namespaces of restored items still created',
      { labelSelector: { matchLabels: { app: 'web' } } },
      ['configmaps/shop/settings', 'deployments.apps/shop/web', 'namespaces//shop'],
    ],
    [
      'orLabelSelectors',
      { orLabelSelectors: [{ matchLabels: { app: 'db' } }, { matchLabels: { app: 'thumbs' } }] },
      ['configmaps/media/thumbs', 'namespaces//media', 'namespaces//shop', 'secrets/shop/db'],
    ],
  ])('%s', (_name, spec, expected) => {
    const selection = selectRestoreItems(backup, { ...everything, ...spec }, []);
    expect(keys(selection.items)).toEqual(expected);
    expect(selection.items.length + selection.skipped.length).toBe(backup.length);
  });

  it('restores ClusterRoles and ClusterRoleBindings only when includedResources names them (not by default, not by *)', () => {
    const withRbac: BackedUpItem[] = [
      item('namespaces', null, 'shop', { kind: 'Namespace' }),
      item('roles.rbac.authorization.k8s.io', 'shop', 'reader'),
      item('clusterroles.rbac.authorization.k8s.io', null, 'shop-admin'),
      item('clusterrolebindings.rbac.authorization.k8s.io', null, 'shop-admin'),
      item('storageclasses.storage.k8s.io', null, 'fast'),
    ];
    const byDefault = selectRestoreItems(withRbac, { ...everything, includeClusterResources: true }, []);
    expect(keys(byDefault.items.map((i) => ({ ...i, namespace: i.targetNamespace, name: i.targetName })))).toEqual([
      'namespaces//shop',
      'roles.rbac.authorization.k8s.io/shop/reader',
      'storageclasses.storage.k8s.io//fast',
    ]);
    const notNamed = byDefault.skipped.filter((s) => s.reason === 'cluster-rbac-not-named');
    expect(keys(notNamed.map((s) => s.item))).toEqual([
      'clusterrolebindings.rbac.authorization.k8s.io//shop-admin',
      'clusterroles.rbac.authorization.k8s.io//shop-admin',
    ]);
    expect(notNamed[0]?.message).toMatch(/restored only when includedResources names/);
    const star = selectRestoreItems(withRbac, { ...everything, includedResources: ['*'], includeClusterResources: true }, []);
    expect(star.skipped.filter((s) => s.reason === 'cluster-rbac-not-named')).toHaveLength(2);
    const named = selectRestoreItems(
      withRbac,
      {
        ...everything,
        includedResources: ['clusterroles', 'clusterrolebindings.rbac.authorization.k8s.io'],
        includeClusterResources: true,
      },
      [],
    );
    expect(keys(named.items.map((i) => ({ ...i, namespace: i.targetNamespace, name: i.targetName })))).toEqual([
      'clusterrolebindings.rbac.authorization.k8s.io//shop-admin',
      'clusterroles.rbac.authorization.k8s.io//shop-admin',
    ]);
  });

  it('restores a namespace the label selector left out when restored items live in it (from the backup)', () => {
    const selection = selectRestoreItems(backup, { ...everything, labelSelector: { matchLabels: { app: 'web' } } }, []);
    const shop = selection.items.find((i) => i.resource === 'namespaces');
    expect(shop?.origin).toBe('target-namespace');
    expect(shop?.object.metadata.labels).toEqual({ team: 'a' });
  });

  it('adds a bare namespace for items whose namespace object is not in the backup', () => {
    const selection = selectRestoreItems([item('configmaps', 'orphan', 'c')], everything, []);
    expect(selection.items.map((i) => [i.resource, i.targetName, i.origin, i.object.kind])).toEqual([
      ['configmaps', 'c', 'selected', 'configmaps'],
      ['namespaces', 'orphan', 'target-namespace', 'Namespace'],
    ]);
  });

  it('maps namespaces: items get the target namespace, the namespace object its new name', () => {
    const selection = selectRestoreItems(
      backup,
      { ...everything, includedNamespaces: ['shop'], namespaceMapping: { shop: 'shop-copy' } },
      [],
    );
    expect(selection.items.map((i) => `${i.resource}:${i.targetNamespace ?? ''}/${i.targetName}`).sort()).toEqual([
      'configmaps:shop-copy/settings',
      'deployments:shop-copy/web',
      'namespaces:/shop-copy',
      'secrets:shop-copy/db',
    ]);
    // the filter is on the backed-up namespace
    expect(selection.items.every((i) => i.namespace === 'shop' || i.name === 'shop')).toBe(true);
  });

  it.each<[string, BackedUpItem, boolean]>([
    ['a Succeeded pod is not restored', pod('shop', 'done', {}, {}, { phase: 'Succeeded' }), false],
    ['a Failed pod is not restored', pod('shop', 'crashed', {}, {}, { phase: 'Failed' }), false],
    ['a Running pod is restored', pod('shop', 'web', {}, {}, { phase: 'Running' }), true],
    [
      'a completed Job is not restored',
      item('jobs.batch', 'shop', 'migrate', { status: { completionTime: '2026-01-01T00:00:00Z' } }),
      false,
    ],
    ['a running Job is restored', item('jobs.batch', 'shop', 'migrate', { status: { active: 1 } }), true],
  ])('%s (Velero isCompleted)', (_name, backedUp, restored) => {
    const selection = selectRestoreItems([backedUp], everything, []);
    expect(selection.items.some((i) => i.name === backedUp.name)).toBe(restored);
    if (!restored) expect(selection.skipped[0]?.reason).toBe('completed');
  });

  it.each<[string, BackedUpItem, boolean]>([
    [
      'an auto-created token Secret of a backed-up account is not restored',
      item('secrets', 'shop', 'builder-token-abcde', { type: 'kubernetes.io/service-account-token' }),
      false,
    ],
    [
      'a token Secret of no backed-up account is restored',
      item('secrets', 'shop', 'ci-token-abcde', { type: 'kubernetes.io/service-account-token' }),
      true,
    ],
    ['an Opaque Secret named like a token is restored', item('secrets', 'shop', 'builder-token-notes', { type: 'Opaque' }), true],
  ])('%s (Velero SecretAction)', (_name, secret, restored) => {
    const selection = selectRestoreItems([item('serviceaccounts', 'shop', 'builder'), secret], everything, []);
    expect(selection.items.some((i) => i.name === secret.name)).toBe(restored);
    if (!restored) expect(selection.skipped.map((s) => s.reason)).toEqual(['auto-created-token']);
  });

  it('does not restore mirror pods (Velero restore_test "mirror pods are not restored")', () => {
    const mirror = pod('kube-system', 'etcd-node-a', {}, { annotations: { 'kubernetes.io/config.mirror': 'abc' } });
    const selection = selectRestoreItems([mirror], everything, []);
    expect(selection.items.filter((i) => i.resource === 'pods')).toEqual([]);
    expect(selection.skipped.map((s) => s.reason)).toEqual(['mirror-pod']);
  });

  it('restores only one of two items mapped onto the same target, and says why for the other', () => {
    const items = [
      item('configmaps', 'shop', 'settings', { data: { from: 'shop' } }),
      item('configmaps', 'copy', 'settings', { data: { from: 'copy' } }),
    ];
    const selection = selectRestoreItems(items, { ...everything, namespaceMapping: { shop: 'copy' } }, []);
    const configMaps = selection.items.filter((i) => i.resource === 'configmaps');
    expect(configMaps.map((i) => [i.targetNamespace, i.object.data])).toEqual([['copy', { from: 'shop' }]]);
    expect(selection.skipped.map((s) => [s.reason, s.item.namespace])).toEqual([['target-collision', 'copy']]);
    expect(selection.skipped[0]?.message).toMatch(/configmaps copy\/settings is already restored from another namespace/);
  });

  it('plans no volume restore for a pod skipped as a collision', () => {
    const volumes = { volumes: [{ name: 'data', emptyDir: {} }] };
    const pvbs = [
      { podNamespace: 'shop', podName: 'db', volume: 'data', phase: 'Completed', snapshotID: 's-shop' },
      { podNamespace: 'copy', podName: 'db', volume: 'data', phase: 'Completed', snapshotID: 's-copy' },
    ];
    const selection = selectRestoreItems(
      [pod('shop', 'db', volumes), pod('copy', 'db', volumes)],
      { ...everything, namespaceMapping: { shop: 'copy' } },
      pvbs,
    );
    expect(selection.volumes.podVolumes).toEqual({ 'shop/db': [{ volume: 'data', snapshotID: 's-shop' }] });
  });
});

describe('groupSkippedItems: the restore log says an excluded namespace or resource once', () => {
  it('counts the items of an excluded namespace on one line, keeps item-specific lines, in the order first seen', () => {
    const big: BackedUpItem[] = [
      ...backup,
      ...Array.from({ length: 500 }, (_, i) => item('configmaps', 'media', `cm-${i}`)),
      ...Array.from({ length: 300 }, (_, i) => item('secrets', 'media', `s-${i}`)),
    ];
    const selection = selectRestoreItems(big, { ...everything, includedNamespaces: ['shop'], excludedResources: ['secrets'] }, []);
    const groups = groupSkippedItems(selection.skipped);
    // every skipped item is counted once
    expect(groups.reduce((n, g) => n + g.count, 0)).toBe(selection.skipped.length);
    const media = groups.filter((g) => g.reason === 'namespace-excluded' && g.message === 'namespace media is not restored');
    expect(media).toHaveLength(1);
    // the namespace object, thumbs and 500 config maps; media's 300 secrets were excluded by resource first
    expect(media[0]).toMatchObject({ count: 502 });
    expect(media[0]?.item).toBeUndefined();
    expect(groups.find((g) => g.reason === 'resource-excluded')).toMatchObject({
      message: 'secrets is not among the restored resources',
      count: 301,
    });
    // a line standing for one item carries the item
    const events = groups.filter((g) => g.reason === 'never-restored' && g.message.startsWith('events '));
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ count: 1, item: { resource: 'events', name: 'web.1' } });
    // a message that names its item stays a line of its own
    const collisions = groupSkippedItems([
      {
        item: item('configmaps', 'a', 'x'),
        reason: 'target-collision',
        message: 'configmaps copy/x is already restored from another namespace',
      },
      {
        item: item('configmaps', 'b', 'y'),
        reason: 'target-collision',
        message: 'configmaps copy/y is already restored from another namespace',
      },
    ]);
    expect(collisions.map((g) => [g.count, g.item?.name])).toEqual([
      [1, 'x'],
      [1, 'y'],
    ]);
    expect(groups.map((g) => g.message)).toEqual([...new Set(selection.skipped.map((s) => s.message))]);
  });

  it('a label selector restore says per resource how many items did not match, not per item', () => {
    const many: BackedUpItem[] = [
      ...Array.from({ length: 40 }, (_, i) => item('configmaps', 'shop', `cm-${i}`, {}, { labels: { app: i < 3 ? 'web' : 'other' } })),
      ...Array.from({ length: 10 }, (_, i) => item('secrets', 'shop', `s-${i}`, {}, { labels: { app: 'other' } })),
    ];
    const selection = selectRestoreItems(many, { ...everything, labelSelector: { matchLabels: { app: 'web' } } }, []);
    expect(selection.items.filter((i) => i.resource === 'configmaps')).toHaveLength(3);
    expect(groupSkippedItems(selection.skipped).map((g) => [g.message, g.count])).toEqual([
      ['configmaps not matching the label selector are not restored', 37],
      ['secrets not matching the label selector are not restored', 10],
    ]);
  });
});

describe('selectRestoreItems: persistent volumes and volume data', () => {
  const dataPod = pod('shop', 'postgres-0', {
    volumes: [
      { name: 'data', persistentVolumeClaim: { claimName: 'data-postgres-0' } },
      { name: 'cache', emptyDir: {} },
      { name: 'config', configMap: { name: 'pg' } },
    ],
  });
  const claim = item('persistentvolumeclaims', 'shop', 'data-postgres-0', {
    spec: { volumeName: 'pvc-1', storageClassName: 'standard' },
  });
  const volume = item('persistentvolumes', null, 'pvc-1', {
    spec: { claimRef: { namespace: 'shop', name: 'data-postgres-0', uid: 'u1' }, persistentVolumeReclaimPolicy: 'Retain' },
  });
  const retained = item('persistentvolumeclaims', 'shop', 'archive', { spec: { volumeName: 'pv-archive' } });
  const retainedVolume = item('persistentvolumes', null, 'pv-archive', {
    spec: { claimRef: { namespace: 'shop', name: 'archive' }, persistentVolumeReclaimPolicy: 'Retain' },
  });
  const deleted = item('persistentvolumeclaims', 'shop', 'scratch', { spec: { volumeName: 'pv-scratch' } });
  const deletedVolume = item('persistentvolumes', null, 'pv-scratch', {
    spec: { claimRef: { namespace: 'shop', name: 'scratch' }, persistentVolumeReclaimPolicy: 'Delete' },
  });
  const pvbs: BackedUpPodVolume[] = [
    { podNamespace: 'shop', podName: 'postgres-0', volume: 'data', phase: 'Completed', snapshotID: 'snap-data' },
    { podNamespace: 'shop', podName: 'postgres-0', volume: 'cache', phase: 'Completed', snapshotID: 'snap-cache' },
    { podNamespace: 'shop', podName: 'postgres-0', volume: 'config', phase: 'Failed' },
  ];
  const all = [dataPod, claim, volume, retained, retainedVolume, deleted, deletedVolume];

  it('plans a PodVolumeRestore per completed PVB, reprovisions fs-backup claims and does not restore their PV', () => {
    const selection = selectRestoreItems(all, everything, pvbs);
    expect(selection.volumes.podVolumes).toEqual({
      'shop/postgres-0': [
        { volume: 'data', snapshotID: 'snap-data' },
        { volume: 'cache', snapshotID: 'snap-cache' },
      ],
    });
    expect(selection.volumes.reprovisionedClaims).toEqual(['shop/data-postgres-0', 'shop/scratch']);
    const skippedPvs = selection.skipped.filter((s) => s.reason === 'pv-reprovisioned').map((s) => s.item.name);
    expect(skippedPvs.sort()).toEqual(['pv-scratch', 'pvc-1']);
    // a Retain PV without fs-backup is restored statically and its claim keeps volumeName
    expect(selection.items.some((i) => i.name === 'pv-archive')).toBe(true);
  });

  it('restorePVs false: no PodVolumeRestores, but the claim is still reprovisioned (empty) and the PV not restored', () => {
    const selection = selectRestoreItems(all, { ...everything, restorePVs: false }, pvbs);
    expect(selection.volumes.podVolumes).toEqual({});
    expect(selection.volumes.reprovisionedClaims).toContain('shop/data-postgres-0');
    expect(selection.items.some((i) => i.name === 'pvc-1')).toBe(false);
  });

  it('a namespace subset still restores the static PV of a restored claim (related item), unless includeClusterResources is false', () => {
    const subset = selectRestoreItems(all, { ...everything, includedNamespaces: ['shop'] }, pvbs);
    expect(subset.items.some((i) => i.name === 'pv-archive')).toBe(true);
    const none = selectRestoreItems(all, { ...everything, includedNamespaces: ['shop'], includeClusterResources: false }, pvbs);
    expect(none.items.some((i) => i.name === 'pv-archive')).toBe(false);
    // without its PV the claim is reprovisioned rather than left pointing at nothing
    expect(none.volumes.reprovisionedClaims).toContain('shop/archive');
  });

  it('plans volumes only for pods that are restored', () => {
    const selection = selectRestoreItems(all, { ...everything, excludedResources: ['pods'] }, pvbs);
    expect(selection.volumes.podVolumes).toEqual({});
    // the claim's data was fs-backed up: its PV is still not restored (Velero's pvsToProvision)
    expect(selection.items.some((i) => i.name === 'pvc-1')).toBe(false);
    expect(selection.volumes.reprovisionedClaims).toContain('shop/data-postgres-0');
  });
});

describe('streamRestoreSelection: a backup read item by item, objects only where needed (issue #45)', () => {
  const namespaces = ['a', 'b', 'c'];
  const arbLabels = fc.option(fc.record({ app: fc.constantFrom('web', 'db') }), { nil: undefined });
  const arbItem: fc.Arbitrary<BackedUpItem> = fc.oneof(
    fc
      .tuple(fc.constantFrom(...namespaces), arbLabels)
      .map(([ns, labels]) => item('namespaces', null, ns, { kind: 'Namespace' }, labels ? { labels } : {})),
    fc
      .tuple(
        fc.constantFrom('configmaps', 'deployments.apps', 'events', 'jobs.batch'),
        fc.constantFrom(...namespaces),
        fc.nat(3),
        arbLabels,
      )
      .map(([gr, ns, i, labels]) =>
        item(gr, ns, `x${i}`, gr === 'jobs.batch' && i === 0 ? { status: { completionTime: 't' } } : {}, labels ? { labels } : {}),
      ),
    fc.tuple(fc.constantFrom(...namespaces), fc.constantFrom('default', 'builder')).map(([ns, n]) => item('serviceaccounts', ns, n)),
    fc
      .tuple(fc.constantFrom(...namespaces), fc.constantFrom('default-token-x', 'builder-token-y', 'plain'), arbLabels)
      .map(([ns, n, labels]) =>
        item('secrets', ns, n, { type: n === 'plain' ? 'Opaque' : 'kubernetes.io/service-account-token' }, labels ? { labels } : {}),
      ),
    fc.tuple(fc.constantFrom(...namespaces), fc.nat(2), fc.constantFrom('Running', 'Succeeded'), arbLabels).map(([ns, i, phase, labels]) =>
      pod(ns, `p${i}`, { volumes: [{ name: 'data', persistentVolumeClaim: { claimName: `c${i}` } }] }, labels ? { labels } : {}, {
        phase,
      }),
    ),
    fc
      .tuple(fc.constantFrom(...namespaces), fc.nat(2), fc.boolean())
      .map(([ns, i, bound]) => item('persistentvolumeclaims', ns, `c${i}`, { spec: bound ? { volumeName: `pv-${ns}-${i}` } : {} })),
    fc
      .tuple(fc.constantFrom(...namespaces), fc.nat(2), fc.constantFrom('Retain', 'Delete'), fc.boolean(), arbLabels)
      .map(([ns, i, policy, claimed, labels]) =>
        item(
          'persistentvolumes',
          null,
          `pv-${ns}-${i}`,
          { spec: { persistentVolumeReclaimPolicy: policy, ...(claimed ? { claimRef: { namespace: ns, name: `c${i}` } } : {}) } },
          labels ? { labels } : {},
        ),
      ),
    fc
      .tuple(fc.constantFrom('clusterroles.rbac.authorization.k8s.io', 'storageclasses.storage.k8s.io', 'nodes'), fc.nat(1), arbLabels)
      .map(([gr, i, labels]) => item(gr, null, `k${i}`, {}, labels ? { labels } : {})),
  );
  const arbSpec: fc.Arbitrary<RestoreSelectionSpec> = fc.record({
    includedNamespaces: fc.constantFrom([], ['a'], ['a', 'b'], ['*'], ['b*']),
    excludedNamespaces: fc.constantFrom([], ['c']),
    includedResources: fc.constantFrom([], ['configmaps', 'pvc', 'pv'], ['secrets'], ['pods', 'clusterroles'], ['*']),
    excludedResources: fc.constantFrom([], ['serviceaccounts'], ['persistentvolumes']),
    includeClusterResources: fc.constantFrom(true, false, null),
    labelSelector: fc.constantFrom(null, { matchLabels: { app: 'web' } }),
    orLabelSelectors: fc.constant([]),
    namespaceMapping: fc.constantFrom<Record<string, string>[]>({}, { a: 'b' }, { a: 'z' }),
    restorePVs: fc.boolean(),
  });
  const arbPvbs = fc.array(
    fc.record({
      podNamespace: fc.constantFrom(...namespaces),
      podName: fc.constantFrom('p0', 'p1', 'p2'),
      volume: fc.constant('data'),
      phase: fc.constantFrom('Completed', 'Failed'),
      snapshotID: fc.constant('s1'),
    }),
    { maxLength: 4 },
  );
  const refKey = (i: { group: string; resource: string; namespace: string | null; name: string } | undefined) =>
    i ? `${i.group}/${i.resource}/${i.namespace ?? ''}/${i.name}` : '';
  const unique = (items: BackedUpItem[]) => [...new Map(items.map((i) => [refKey(i), i])).values()];

  it('selects, plans volumes and counts skips as selectRestoreItems over the whole backup', () => {
    fc.assert(
      fc.property(fc.array(arbItem, { maxLength: 40 }).map(unique), arbSpec, arbPvbs, (backup, spec, pvbs) => {
        const whole = selectRestoreItems(backup, spec, pvbs);
        const streamed = streamRestoreSelection(spec, pvbs);
        for (const i of backup)
          if (!streamed.passOver({ group: i.group, resource: i.resource, namespace: i.namespace, name: i.name })) streamed.add(i);
        const result = streamed.result();
        expect(result.items).toEqual(whole.items);
        expect(result.volumes).toEqual(whole.volumes);
        expect(result.skippedCount).toBe(whole.skipped.length);
        const lines = (groups: SkippedRestoreGroup[]) => groups.map((g) => `${g.reason}|${g.message}|${g.count}|${refKey(g.item)}`).sort();
        expect(lines(result.skipped)).toEqual(lines(groupSkippedItems(whole.skipped)));
      }),
      { numRuns: 2000 },
    );
  });

  it('parses none of the items of namespaces not restored, nor cluster-scoped kinds not restored', () => {
    const backup = [
      item('namespaces', null, 'a'),
      item('namespaces', null, 'b'),
      ...Array.from({ length: 50 }, (_, i) => item('configmaps', 'b', `cm-${i}`)),
      item('configmaps', 'a', 'kept'),
      item('storageclasses.storage.k8s.io', null, 'fast'),
      item('nodes', null, 'n1'),
    ];
    const streamed = streamRestoreSelection({ ...everything, includedNamespaces: ['a'] }, []);
    const read = backup.filter((i) => !streamed.passOver(i));
    expect(read.map(refKey)).toEqual(['/namespaces//a', '/configmaps/a/kept']);
    for (const i of read) streamed.add(i);
    const result = streamed.result();
    expect(result.items.map(refKey).sort()).toEqual(['/configmaps/a/kept', '/namespaces//a']);
    expect(result.skippedCount).toBe(53);
    expect(result.skipped.find((g) => g.message === 'namespace b is not restored')).toMatchObject({ count: 51 });
  });
});
