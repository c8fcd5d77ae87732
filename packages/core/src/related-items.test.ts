/*
 * Related items and kept namespaces, as Velero decides them. Case names are Velero's where the
 * case comes from its tables: pkg/itemblock/actions (pod_action_test.go, service_account_action_test.go)
 * and pkg/backup/item_collector_test.go (TestItemCollectorBackupNamespaces); inputs and expected
 * outcomes are ported as facts.
 */
import { describe, expect, it } from 'vitest';
import { specOf } from '../test/builders.js';
import type { ClusterItem } from './item-blocks.js';
import {
  addsCrdsOfCustomResources,
  blocksOfAddedItems,
  type ClusterRoleBindingLike,
  crdNameOf,
  decideNamespace,
  type NamespaceObject,
  relatedClusterItems,
} from './related-items.js';

const serviceAccount: ClusterItem = {
  group: '',
  resource: 'serviceaccounts',
  namespaced: true,
  object: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace: 'velero', name: 'velero' } },
};
const crb = (name: string, roleRef: string, subjects: ClusterRoleBindingLike['subjects']): ClusterRoleBindingLike => ({
  metadata: { name },
  subjects,
  roleRef: { kind: 'ClusterRole', name: roleRef },
});
const other = { kind: 'non-matching-kind', namespace: 'non-matching-ns', name: 'non-matching-name' };
const theSa = { kind: 'ServiceAccount', namespace: 'velero', name: 'velero' };

describe('a ServiceAccount pulls in the ClusterRoleBindings naming it and their ClusterRoles (Velero TestServiceAccountActionExecute)', () => {
  it.each<[string, ClusterRoleBindingLike[], string[]]>([
    ['no crbs', [], []],
    [
      'no matching crbs',
      [
        crb('crb', 'role', [
          other,
          { kind: 'non-matching-kind', namespace: 'velero', name: 'velero' },
          { kind: 'ServiceAccount', namespace: 'non-matching-ns', name: 'velero' },
          { kind: 'ServiceAccount', namespace: 'velero', name: 'non-matching-name' },
        ]),
      ],
      [],
    ],
    [
      'some matching crbs',
      [
        crb('crb-1', 'role-1', [other]),
        crb('crb-2', 'role-2', [other, theSa]),
        crb('crb-3', 'role-3', [theSa]),
        crb('crb-4', 'role-4', [theSa, other]),
      ],
      [
        'clusterrolebindings.rbac.authorization.k8s.io/crb-2',
        'clusterrolebindings.rbac.authorization.k8s.io/crb-3',
        'clusterrolebindings.rbac.authorization.k8s.io/crb-4',
        'clusterroles.rbac.authorization.k8s.io/role-2',
        'clusterroles.rbac.authorization.k8s.io/role-3',
        'clusterroles.rbac.authorization.k8s.io/role-4',
      ],
    ],
  ])('%s', (_name, bindings, expected) => {
    expect(relatedClusterItems(serviceAccount, bindings).map((r) => `${r.resource}.${r.group}/${r.name}`)).toEqual(expected);
  });
});

describe('a pod pulls in its PriorityClass (Velero pod ItemBlockAction)', () => {
  const podItem = (spec: Record<string, unknown>): ClusterItem => ({
    group: '',
    resource: 'pods',
    namespaced: true,
    object: { metadata: { namespace: 'ns', name: 'foo' }, spec } as ClusterItem['object'],
  });
  it.each<[string, Record<string, unknown>, string[]]>([
    ['no spec.volumes', {}, []],
    ['test priority class', { priorityClassName: 'testPriorityClass' }, ['priorityclasses.scheduling.k8s.io/testPriorityClass']],
  ])('%s', (_name, spec, expected) => {
    expect(relatedClusterItems(podItem(spec), []).map((r) => `${r.resource}.${r.group}/${r.name}`)).toEqual(expected);
  });
});

describe('CRDs of backed-up custom resources (Velero backupCRD)', () => {
  it.each<[string, Record<string, unknown>, boolean]>([
    ['a namespace-scoped backup adds them', { includedNamespaces: ['shop'] }, true],
    ['a backup of everything lists CRDs itself', {}, false],
    ['includeClusterResources: true lists CRDs itself', { includedNamespaces: ['shop'], includeClusterResources: true }, false],
    ['includeClusterResources: false never adds them', { includedNamespaces: ['shop'], includeClusterResources: false }, false],
    [
      'CRDs excluded by resource',
      { includedNamespaces: ['shop'], excludedResources: ['customresourcedefinitions.apiextensions.k8s.io'] },
      false,
    ],
    [
      'resources limited to the custom resource (CRDs not included, so excluded)',
      { includedNamespaces: ['shop'], includedResources: ['widgets.example.com'] },
      false,
    ],
  ])('%s', (_name, spec, adds) => {
    expect(addsCrdsOfCustomResources(specOf(spec))).toBe(adds);
  });

  it('the CRD of a resource is named <plural>.<group>; the core group has none', () => {
    expect(crdNameOf({ group: 'example.com', resource: 'widgets' })).toBe('widgets.example.com');
    expect(crdNameOf({ group: '', resource: 'configmaps' })).toBeUndefined();
  });

  it('an added item is its own block, with the id grouping gives a lone item', () => {
    const item: ClusterItem = {
      group: 'scheduling.k8s.io',
      resource: 'priorityclasses',
      namespaced: false,
      object: { metadata: { name: 'high' } },
    };
    const [block] = blocksOfAddedItems([item]);
    expect(block?.keys).toEqual(['priorityclasses.scheduling.k8s.io/high']);
    expect(block?.id).toMatch(/^blk-[0-9a-f]{16}$/);
    expect(block?.pods).toEqual([]);
  });
});

describe('which Namespace objects a backup keeps (Velero TestItemCollectorBackupNamespaces)', () => {
  const ns = (name: string, labels?: Record<string, string>, phase = 'Active'): NamespaceObject => ({
    name,
    phase,
    ...(labels ? { labels } : {}),
  });
  const byName = { matchLabels: { name: 'ns1' }, matchExpressions: [] };
  it.each<[string, Record<string, unknown>, NamespaceObject[], string[], string[]]>([
    ['ns filter by namespace IE filter', { includedNamespaces: ['ns1'] }, [ns('ns1'), ns('ns2')], [], ['ns1']],
    ['ns filter by backup labelSelector', { labelSelector: byName }, [ns('ns1', { name: 'ns1' }), ns('ns2')], [], ['ns1']],
    ['ns filter by backup orLabelSelector', { orLabelSelectors: [byName] }, [ns('ns1', { name: 'ns1' }), ns('ns2')], [], ['ns1']],
    [
      'ns not included by IE filter, but included by labelSelector',
      { excludedNamespaces: ['ns1'], labelSelector: byName },
      [ns('ns1', { name: 'ns1' }), ns('ns2')],
      [],
      // Velero's table asserts only that ns1 is tracked; its code also tracks ns2 (the filter,
      // with an exclude, is not "everything"), as the orLabelSelector case below shows with ns3.
      ['ns1', 'ns2'],
    ],
    [
      'ns not included by IE filter, but included by orLabelSelector',
      { excludedNamespaces: ['ns1', 'ns2'], orLabelSelectors: [byName] },
      [ns('ns1', { name: 'ns1' }), ns('ns2'), ns('ns3')],
      [],
      ['ns1', 'ns3'],
    ],
    ['No ns filters', {}, [ns('ns1', { name: 'ns1' }), ns('ns2')], [], ['ns1', 'ns2']],
    [
      'terminating ns should not tracked',
      { includedNamespaces: ['ns1', 'ns2'] },
      [ns('ns1', undefined, 'Terminating'), ns('ns2')],
      [],
      ['ns2'],
    ],
    // Stowage's issue #17: the namespaces of selected items are kept although their labels do not match
    [
      'a namespace holding items selected by labelSelector is kept',
      { labelSelector: { matchLabels: { app: 'web' }, matchExpressions: [] } },
      [ns('shop'), ns('empty')],
      ['shop'],
      ['shop'],
    ],
    [
      'a namespace holding items selected by orLabelSelectors is kept',
      { orLabelSelectors: [{ matchLabels: { app: 'web' }, matchExpressions: [] }] },
      [ns('shop'), ns('empty')],
      ['shop'],
      ['shop'],
    ],
    [
      'the exclude label wins over held items',
      { labelSelector: byName },
      [ns('shop', { 'velero.io/exclude-from-backup': 'true' })],
      ['shop'],
      [],
    ],
    ['namespaces excluded as a resource are never kept', { excludedResources: ['namespaces'] }, [ns('ns1')], ['ns1'], []],
  ])('%s', (_name, spec, namespaces, withItems, expected) => {
    const selection = specOf(spec);
    const kept = namespaces.filter((n) => decideNamespace(n, selection, new Set(withItems)).kept).map((n) => n.name);
    expect(kept).toEqual(expected);
  });
});
