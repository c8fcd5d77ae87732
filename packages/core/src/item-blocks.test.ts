import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { otherItem, pod, podItem, pv, pvc, pvcItem, pvItem, specOf } from '../test/builders.js';
import { type ClusterItem, groupItemBlocks, itemKey } from './item-blocks.js';
import { claimNamesOfPod, isPodRunning, type PersistentVolumeClaim, type Pod } from './kube-types.js';
import { EXCLUDE_FROM_BACKUP_LABEL, isItemIncluded, isRelatedItemIncluded, selectsEverything } from './resource-selection.js';

/** Block contents, sorted by first key so tests about membership do not depend on block order. */
const sortedKeys = (result: ReturnType<typeof groupItemBlocks>) =>
  result.blocks.map((block) => block.keys).sort((a, b) => ((a[0] ?? '') < (b[0] ?? '') ? -1 : 1));
const keysOf = (items: ClusterItem[]) => sortedKeys(groupItemBlocks(items, specOf()));

describe('groupItemBlocks: relations', () => {
  it('puts a pod with its PVC and PV', () => {
    expect(keysOf([podItem(pod('web', { claims: ['data'] })), pvcItem(pvc('data')), pvItem(pv('pv-data'))])).toEqual([
      ['pods/default/web', 'persistentvolumeclaims/default/data', 'persistentvolumes/pv-data'],
    ]);
  });

  it('puts two pods sharing a PVC in one block', () => {
    const blocks = keysOf([
      podItem(pod('a', { claims: ['shared'] })),
      podItem(pod('b', { claims: ['shared'] })),
      pvcItem(pvc('shared')),
      pvItem(pv('pv-shared')),
    ]);
    expect(blocks).toEqual([['pods/default/a', 'pods/default/b', 'persistentvolumeclaims/default/shared', 'persistentvolumes/pv-shared']]);
  });

  it('chains pods through PVCs into one component', () => {
    const blocks = keysOf([
      podItem(pod('a', { claims: ['c1'] })),
      podItem(pod('b', { claims: ['c1', 'c2'] })),
      podItem(pod('c', { claims: ['c2'] })),
      pvcItem(pvc('c1')),
      pvcItem(pvc('c2')),
      pvItem(pv('pv-c1')),
      pvItem(pv('pv-c2')),
    ]);
    expect(blocks).toHaveLength(1);
    expect(blocks[0]).toHaveLength(7);
  });

  it('keeps a listed pod that is not running with the running pod it shares a PVC with', () => {
    const blocks = keysOf([
      podItem(pod('running', { claims: ['shared'] })),
      podItem(pod('pending', { claims: ['shared'], phase: 'Pending' })),
      pvcItem(pvc('shared')),
    ]);
    expect(blocks).toEqual([['pods/default/pending', 'pods/default/running', 'persistentvolumeclaims/default/shared']]);
  });

  it('pulls in running pods through a PVC even when the label selector does not match them, but not pods that are not running', () => {
    const spec = specOf({ labelSelector: { matchLabels: { app: 'web' } } });
    const items = [
      podItem(pod('web', { claims: ['shared'], labels: { app: 'web' } })),
      podItem(pod('sidecar-reader', { claims: ['shared'] })),
      podItem(pod('finished-reader', { claims: ['shared'], phase: 'Succeeded' })),
      pvcItem(pvc('shared')),
    ];
    const result = groupItemBlocks(items, spec);
    expect(result.blocks.map((block) => block.keys)).toEqual([
      ['pods/default/sidecar-reader', 'pods/default/web', 'persistentvolumeclaims/default/shared'],
    ]);
    expect(result.excludedCount).toBe(1);
  });

  it('does not pull a PV from a PVC that is not bound', () => {
    expect(keysOf([pvcItem(pvc('pending', { volumeName: null })), pvItem(pv('pv-pending'))])).toEqual([
      ['persistentvolumeclaims/default/pending'],
      ['persistentvolumes/pv-pending'],
    ]);
  });

  it('warns about a pod that mounts a missing PVC and about a PVC bound to a missing PV', () => {
    const result = groupItemBlocks([podItem(pod('web', { claims: ['gone'] })), pvcItem(pvc('orphan'))], specOf());
    expect(result.warnings.map((warning) => [warning.code, warning.itemKey])).toEqual([
      ['CORE_GROUPING_PV_NOT_FOUND', 'persistentvolumeclaims/default/orphan'],
      ['CORE_GROUPING_PVC_NOT_FOUND', 'pods/default/web'],
    ]);
    expect(result.warnings[1]?.message).toContain('mounts PVC gone, which does not exist');
    expect(sortedKeys(result)).toEqual([['persistentvolumeclaims/default/orphan'], ['pods/default/web']]);
  });

  it('mounts a generic ephemeral volume through its generated PVC', () => {
    const blocks = keysOf([podItem(pod('web', { volumes: [{ name: 'scratch', ephemeral: {} }] })), pvcItem(pvc('web-scratch'))]);
    expect(blocks).toEqual([['pods/default/web', 'persistentvolumeclaims/default/web-scratch']]);
  });
});

describe('groupItemBlocks: filters', () => {
  const cluster = () => [podItem(pod('web', { claims: ['data'] })), pvcItem(pvc('data')), pvItem(pv('pv-data'))];

  it.each<[string, Record<string, unknown>, string[][]]>([
    // the PV is still listed on its own (all namespaces → cluster resources included)
    [
      'PVCs excluded: the pod is alone',
      { excludedResources: ['persistentvolumeclaims'] },
      [['persistentvolumes/pv-data'], ['pods/default/web']],
    ],
    [
      'PVCs excluded, one namespace: pod alone, PV not listed',
      { includedNamespaces: ['default'], excludedResources: ['persistentvolumeclaims'] },
      [['pods/default/web']],
    ],
    ['PVs excluded: pod and PVC only', { excludedResources: ['pv'] }, [['pods/default/web', 'persistentvolumeclaims/default/data']]],
    [
      'includeClusterResources false: no PV',
      { includeClusterResources: false },
      [['pods/default/web', 'persistentvolumeclaims/default/data']],
    ],
    [
      'one namespace, cluster resources auto: the PV still comes via its PVC',
      { includedNamespaces: ['default'] },
      [['pods/default/web', 'persistentvolumeclaims/default/data', 'persistentvolumes/pv-data']],
    ],
    ['namespace excluded: nothing', { excludedNamespaces: ['default'] }, []],
    ['only pods included: pod alone', { includedResources: ['pods'] }, [['pods/default/web']]],
  ])('%s', (_case, spec, expected) => {
    expect(sortedKeys(groupItemBlocks(cluster(), specOf(spec)))).toEqual(expected);
  });

  it('never includes an item that is being deleted', () => {
    const deleting = pod('old', { claims: ['data'] });
    deleting.metadata.deletionTimestamp = '2026-12-01T00:00:00Z';
    expect(keysOf([podItem(deleting), pvcItem(pvc('data'))])).toEqual([['persistentvolumeclaims/default/data']]);
  });
});

describe('groupItemBlocks: ids, order, batching', () => {
  const items = [
    otherItem('apps', 'deployments', 'web', 'default'),
    otherItem('', 'configmaps', 'settings', 'default'),
    podItem(pod('b', { claims: ['cb'] })),
    podItem(pod('a')),
    pvcItem(pvc('cb')),
    otherItem('', 'configmaps', 'other', 'default'),
  ];

  it('orders blocks with pods first, then by id, with stable ids', () => {
    const result = groupItemBlocks(items, specOf());
    const ids = result.blocks.map((block) => block.id);
    for (const id of ids) expect(id).toMatch(/^blk-[0-9a-f]{16}$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect(result.blocks.map((block) => block.pods.length > 0)).toEqual([true, true, false, false, false]);
    expect(ids.slice(0, 2)).toEqual([...ids.slice(0, 2)].sort());
    expect(ids.slice(2)).toEqual([...ids.slice(2)].sort());
    expect(groupItemBlocks([...items].reverse(), specOf()).blocks.map((block) => block.id)).toEqual(ids);
  });

  it('derives a block id from its first item, so it survives unrelated changes to the cluster', () => {
    const before = groupItemBlocks(items, specOf()).blocks.find((block) => block.keys[0] === 'pods/default/b')?.id;
    const after = groupItemBlocks([...items, podItem(pod('z'))], specOf()).blocks.find((block) => block.keys[0] === 'pods/default/b')?.id;
    expect(after).toBe(before);
  });

  it('exposes the pods of each block', () => {
    const result = groupItemBlocks(items, specOf());
    expect(result.blocks.map((block) => block.pods.map((item) => item.object.metadata.name))).toEqual([['a'], ['b'], [], [], []]);
  });

  it('batches pod-free items when asked, never pods', () => {
    const result = groupItemBlocks(items, specOf(), { unrelatedBatchSize: 2 });
    expect(sortedKeys(result).filter((keys) => keys[0]?.startsWith('pods/'))).toEqual([
      ['pods/default/a'],
      ['pods/default/b', 'persistentvolumeclaims/default/cb'],
    ]);
    const podFree = result.blocks.filter((block) => block.pods.length === 0);
    expect(podFree.map((block) => block.keys.length).sort()).toEqual([1, 2]);
    expect(podFree.flatMap((block) => block.keys).sort()).toEqual([
      'configmaps/default/other',
      'configmaps/default/settings',
      'deployments.apps/default/web',
    ]);
  });

  it('ignores a duplicate listing with a warning', () => {
    const result = groupItemBlocks([podItem(pod('a')), podItem(pod('a'))], specOf());
    expect(result.blocks).toHaveLength(1);
    expect(result.warnings.map((warning) => warning.code)).toEqual(['CORE_GROUPING_DUPLICATE_ITEM']);
  });

  // Duplicates are found per group-resource and namespace by name; with a '/' in a name or
  // namespace (not valid in Kubernetes) two different items can still have the same key.
  it.each([
    ['a namespaced and a cluster-scoped item', otherItem('', 'configmaps', 'b', 'a'), otherItem('', 'configmaps', 'a/b', null)],
    ["a '/' in the namespace or in the name", otherItem('', 'configmaps', 'c', 'a/b'), otherItem('', 'configmaps', 'b/c', 'a')],
    ['a group written into the resource', otherItem('apps', 'deployments', 'web', 'a'), otherItem('', 'deployments.apps', 'web', 'a')],
  ])('treats items with the same key as duplicates: %s', (_case, first, second) => {
    expect(itemKey(first)).toBe(itemKey(second));
    const result = groupItemBlocks([first, second], specOf());
    expect(result.blocks.map((block) => block.items)).toEqual([[first]]);
    expect(result.warnings).toEqual([expect.objectContaining({ code: 'CORE_GROUPING_DUPLICATE_ITEM', itemKey: itemKey(first) })]);
  });
});

// ---------------------------------------------------------------------------------------------
// Property tests on random clusters

interface RandomCluster {
  items: ClusterItem[];
  spec: ReturnType<typeof specOf>;
}

const namespaces = ['ns-a', 'ns-b', 'ns-c'];

const clusterArbitrary: fc.Arbitrary<RandomCluster> = fc
  .record({
    pods: fc.array(
      fc.record({
        namespace: fc.constantFrom(...namespaces),
        phase: fc.constantFrom('Running', 'Running', 'Pending', 'Succeeded'),
        claims: fc.uniqueArray(fc.integer({ min: 0, max: 7 }), { maxLength: 3 }),
        labelled: fc.boolean(),
      }),
      { maxLength: 14 },
    ),
    pvcs: fc.array(
      fc.record({
        namespace: fc.constantFrom(...namespaces),
        index: fc.integer({ min: 0, max: 7 }),
        bound: fc.boolean(),
        pvExists: fc.boolean(),
      }),
      { maxLength: 12 },
    ),
    others: fc.array(fc.record({ namespace: fc.constantFrom(...namespaces, null), index: fc.integer({ min: 0, max: 5 }) }), {
      maxLength: 5,
    }),
    spec: fc.record({
      includedNamespaces: fc.constantFrom([], ['ns-a'], ['ns-a', 'ns-b'], ['ns-*']),
      excludedNamespaces: fc.constantFrom([], ['ns-c']),
      excludedResources: fc.constantFrom([], ['persistentvolumeclaims'], ['persistentvolumes'], ['configmaps']),
      includeClusterResources: fc.constantFrom(null, true, false),
      labelled: fc.boolean(),
    }),
  })
  .map(({ pods, pvcs, others, spec }) => {
    const items: ClusterItem[] = [];
    pods.forEach((p, index) => {
      items.push(
        podItem(
          pod(`pod-${index}`, {
            namespace: p.namespace,
            phase: p.phase,
            claims: p.claims.map((c) => `claim-${c}`),
            ...(p.labelled ? { labels: { app: 'x' } } : {}),
          }),
        ),
      );
    });
    const seenPvcs = new Set<string>();
    pvcs.forEach((c, index) => {
      const name = `claim-${c.index}`;
      if (seenPvcs.has(`${c.namespace}/${name}`)) return;
      seenPvcs.add(`${c.namespace}/${name}`);
      const volumeName = c.bound ? `pv-${index}` : null;
      items.push(pvcItem(pvc(name, { namespace: c.namespace, volumeName })));
      if (c.pvExists) items.push(pvItem(pv(`pv-${index}`)));
    });
    const seenOthers = new Set<string>();
    for (const other of others) {
      const key = `${other.namespace}/${other.index}`;
      if (seenOthers.has(key)) continue;
      seenOthers.add(key);
      items.push(otherItem('', 'configmaps', `cm-${other.index}`, other.namespace));
    }
    const { labelled, ...filters } = spec;
    return { items, spec: specOf({ ...filters, ...(labelled ? { labelSelector: { matchLabels: { app: 'x' } } } : {}) }) };
  });

function blockOf(result: ReturnType<typeof groupItemBlocks>): Map<string, string> {
  const map = new Map<string, string>();
  for (const block of result.blocks) for (const key of block.keys) map.set(key, block.id);
  return map;
}

describe('groupItemBlocks: properties', () => {
  it('no item is in two blocks', () => {
    fc.assert(
      fc.property(clusterArbitrary, ({ items, spec }) => {
        const keys = groupItemBlocks(items, spec).blocks.flatMap((block) => block.keys);
        expect(new Set(keys).size).toBe(keys.length);
      }),
    );
  });

  it('every pod is with all its PVCs and their PVs (those the filters allow)', () => {
    fc.assert(
      fc.property(clusterArbitrary, ({ items, spec }) => {
        const result = groupItemBlocks(items, spec);
        const where = blockOf(result);
        const byKey = new Map(items.map((item) => [itemKey(item), item]));
        for (const block of result.blocks) {
          for (const podEntry of block.pods) {
            const podObject = podEntry.object as Pod;
            for (const claim of claimNamesOfPod(podObject)) {
              const claimItem = byKey.get(`persistentvolumeclaims/${podObject.metadata.namespace}/${claim}`);
              if (!claimItem || !isRelatedItemIncluded({ ...claimItem, namespace: podObject.metadata.namespace ?? null }, spec)) continue;
              expect(where.get(itemKey(claimItem))).toBe(block.id);
              const claimObject = claimItem.object as PersistentVolumeClaim;
              const pvItemFound = claimObject.spec.volumeName ? byKey.get(`persistentvolumes/${claimObject.spec.volumeName}`) : undefined;
              if (pvItemFound && isRelatedItemIncluded(pvItemFound, spec)) expect(where.get(itemKey(pvItemFound))).toBe(block.id);
            }
          }
        }
      }),
    );
  });

  it('pods in the backup that share a PVC share a block; running pods of a backed-up PVC are in it', () => {
    fc.assert(
      fc.property(clusterArbitrary, ({ items, spec }) => {
        const result = groupItemBlocks(items, spec);
        const where = blockOf(result);
        for (const item of items) {
          if (item.resource !== 'pods') continue;
          const podObject = item.object as Pod;
          for (const claim of claimNamesOfPod(podObject)) {
            const claimBlock = where.get(`persistentvolumeclaims/${podObject.metadata.namespace}/${claim}`);
            const podBlock = where.get(itemKey(item));
            if (claimBlock === undefined) continue;
            if (podBlock !== undefined) expect(podBlock).toBe(claimBlock);
            const claimItem = items.find(
              (candidate) => itemKey(candidate) === `persistentvolumeclaims/${podObject.metadata.namespace}/${claim}`,
            );
            const bound = (claimItem?.object as PersistentVolumeClaim | undefined)?.status?.phase === 'Bound';
            if (
              bound &&
              isPodRunning(podObject) &&
              isRelatedItemIncluded({ ...item, namespace: podObject.metadata.namespace ?? null }, spec)
            ) {
              expect(podBlock).toBe(claimBlock);
            }
          }
        }
      }),
    );
  });

  it('excluded items never appear, and every listed item that passes the filters does', () => {
    fc.assert(
      fc.property(clusterArbitrary, ({ items, spec }) => {
        const where = blockOf(groupItemBlocks(items, spec));
        for (const item of items) {
          const selectable = {
            ...item,
            namespace: item.object.metadata.namespace ?? null,
            name: item.object.metadata.name,
            labels: item.object.metadata.labels ?? {},
          };
          if (!isRelatedItemIncluded(selectable, spec)) expect(where.has(itemKey(item))).toBe(false);
          if (isItemIncluded(selectable, spec)) expect(where.has(itemKey(item))).toBe(true);
        }
      }),
    );
  });

  it('does not depend on input order', () => {
    fc.assert(
      fc.property(clusterArbitrary, fc.nat(), ({ items, spec }, seed) => {
        const shuffled =
          fc.sample(fc.shuffledSubarray(items, { minLength: items.length, maxLength: items.length }), { numRuns: 1, seed })[0] ?? items;
        const project = (result: ReturnType<typeof groupItemBlocks>) => ({
          blocks: result.blocks.map((block) => [block.id, ...block.keys]),
          warnings: result.warnings,
        });
        expect(project(groupItemBlocks(shuffled, spec))).toEqual(project(groupItemBlocks(items, spec)));
      }),
    );
  });

  it('batching never puts a pod in a batch', () => {
    fc.assert(
      fc.property(clusterArbitrary, fc.integer({ min: 2, max: 4 }), ({ items, spec }, batchSize) => {
        const plain = groupItemBlocks(items, spec);
        const batched = groupItemBlocks(items, spec, { unrelatedBatchSize: batchSize });
        const podBlocks = (result: typeof plain) => result.blocks.filter((block) => block.pods.length > 0).map((block) => block.keys);
        expect(podBlocks(batched)).toEqual(podBlocks(plain));
        expect(batched.blocks.flatMap((block) => block.keys).sort()).toEqual(plain.blocks.flatMap((block) => block.keys).sort());
      }),
    );
  });

  // Without filters, grouping decides by the exclude label alone and skips the selection
  // functions; a filter that matches nothing (excluding a resource no item is) takes the
  // full path and must give the same blocks, ids, order and warnings.
  it('a spec without filters groups exactly like one with a filter that matches nothing', () => {
    fc.assert(
      fc.property(
        clusterArbitrary,
        fc.array(fc.boolean(), { maxLength: 40 }),
        fc.constantFrom(null, true),
        fc.integer({ min: 1, max: 3 }),
        ({ items }, excludeLabels, includeClusterResources, batchSize) => {
          const labelled = items.map((item, index) =>
            excludeLabels[index]
              ? {
                  ...item,
                  object: { ...item.object, metadata: { ...item.object.metadata, labels: { [EXCLUDE_FROM_BACKUP_LABEL]: 'true' } } },
                }
              : item,
          );
          const unfiltered = specOf({ includeClusterResources });
          const noOpFilter = specOf({ includeClusterResources, excludedResources: ['widgets.example.com'] });
          expect(selectsEverything(unfiltered)).toBe(true);
          expect(selectsEverything(noOpFilter)).toBe(false);
          const options = { unrelatedBatchSize: batchSize };
          expect(groupItemBlocks(labelled, unfiltered, options)).toEqual(groupItemBlocks(labelled, noOpFilter, options));
        },
      ),
    );
  });
});
