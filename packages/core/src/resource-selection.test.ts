import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { specOf } from '../test/builders.js';
import {
  EXCLUDE_FROM_BACKUP_LABEL,
  explainItemExclusion,
  explainRelatedItemExclusion,
  isItemIncluded,
  isNamespaceIncluded,
  isRelatedItemIncluded,
  namespacesListedOneByOne,
  type SelectableItem,
  selectsEverything,
} from './resource-selection.js';

const podIn = (namespace: string, labels?: Record<string, string>): SelectableItem => ({
  group: '',
  resource: 'pods',
  namespaced: true,
  namespace,
  name: 'p',
  ...(labels ? { labels } : {}),
});
const deployment: SelectableItem = { group: 'apps', resource: 'deployments', namespaced: true, namespace: 'prod', name: 'web' };
const pvItem: SelectableItem = { group: '', resource: 'persistentvolumes', namespaced: false, name: 'pv-1' };
const storageClass: SelectableItem = { group: 'storage.k8s.io', resource: 'storageclasses', namespaced: false, name: 'fast' };
const namespaceObject = (name: string): SelectableItem => ({ group: '', resource: 'namespaces', namespaced: false, name });

describe('isItemIncluded: namespaces', () => {
  it.each<[string, Record<string, unknown>, string, boolean]>([
    ['all by default', {}, 'anything', true],
    ['"*" means all', { includedNamespaces: ['*'] }, 'anything', true],
    ['listed', { includedNamespaces: ['prod'] }, 'prod', true],
    ['not listed', { includedNamespaces: ['prod'] }, 'dev', false],
    ['glob', { includedNamespaces: ['prod-*'] }, 'prod-eu', true],
    ['excluded wins over included glob', { includedNamespaces: ['prod-*'], excludedNamespaces: ['prod-eu'] }, 'prod-eu', false],
    ['excluded by glob', { excludedNamespaces: ['kube-*'] }, 'kube-system', false],
    ['other namespaces stay in', { excludedNamespaces: ['kube-*'] }, 'default', true],
  ])('%s', (_case, spec, namespace, expected) => {
    expect(isItemIncluded(podIn(namespace), specOf(spec))).toBe(expected);
  });

  // Decisions are remembered per pair of lists: filters sharing one list must not share answers.
  it('answers each filter for itself when filters share a list, asked many times', () => {
    const included = ['prod', 'prod-*', 'dev'];
    const noExcludes: string[] = [];
    const withExcludes = ['prod-eu'];
    for (let round = 0; round < 3; round++) {
      expect(isNamespaceIncluded('prod-eu', { includedNamespaces: included, excludedNamespaces: noExcludes })).toBe(true);
      expect(isNamespaceIncluded('prod-eu', { includedNamespaces: included, excludedNamespaces: withExcludes })).toBe(false);
      expect(isNamespaceIncluded('prod-eu', { includedNamespaces: ['dev'], excludedNamespaces: noExcludes })).toBe(false);
      expect(isNamespaceIncluded('dev', { includedNamespaces: ['dev'], excludedNamespaces: withExcludes })).toBe(true);
    }
  });
});

describe('isItemIncluded: resources', () => {
  it.each<[string, Record<string, unknown>, SelectableItem, boolean]>([
    ['plural core resource', { includedResources: ['pods'] }, podIn('a'), true],
    ['short name', { includedResources: ['po'] }, podIn('a'), true],
    ['other resource not listed', { includedResources: ['pods'] }, deployment, false],
    ['resource.group', { includedResources: ['deployments.apps'] }, deployment, true],
    ['kind-like alias', { includedResources: ['deployment'] }, deployment, true],
    ['group-less name matches any group', { includedResources: ['deployments'] }, deployment, true],
    ['wrong group', { includedResources: ['deployments.extensions'] }, deployment, false],
    ['excluded wins', { excludedResources: ['pods'] }, podIn('a'), false],
    ['excluded by short name', { excludedResources: ['deploy'] }, deployment, false],
  ])('%s', (_case, spec, item, expected) => {
    expect(isItemIncluded(item, specOf(spec))).toBe(expected);
  });
});

describe('isItemIncluded: labels', () => {
  it.each<[string, Record<string, unknown>, Record<string, string> | undefined, boolean]>([
    ['no selector', {}, undefined, true],
    ['selector matches', { labelSelector: { matchLabels: { app: 'web' } } }, { app: 'web' }, true],
    ['selector does not match', { labelSelector: { matchLabels: { app: 'web' } } }, { app: 'db' }, false],
    ['no labels, selector set', { labelSelector: { matchLabels: { app: 'web' } } }, undefined, false],
    [
      'any of orLabelSelectors',
      { orLabelSelectors: [{ matchLabels: { app: 'web' } }, { matchLabels: { app: 'db' } }] },
      { app: 'db' },
      true,
    ],
    ['none of orLabelSelectors', { orLabelSelectors: [{ matchLabels: { app: 'web' } }] }, { app: 'cache' }, false],
    ['exclude label always wins', {}, { 'velero.io/exclude-from-backup': 'true' }, false],
  ])('%s', (_case, spec, labels, expected) => {
    expect(isItemIncluded(podIn('a', labels), specOf(spec))).toBe(expected);
  });
});

describe('cluster-scoped items', () => {
  it.each<[string, boolean | null, Record<string, unknown>, boolean, boolean]>([
    // case, includeClusterResources, namespace filter, listed?, pulled in by a PVC?
    ['true: listed and related', true, { includedNamespaces: ['prod'] }, true, true],
    ['null, all namespaces: listed', null, {}, true, true],
    ['null, some namespaces: only via PVC', null, { includedNamespaces: ['prod'] }, false, true],
    ['null, excluded namespaces: only via PVC', null, { excludedNamespaces: ['dev'] }, false, true],
    ['false: never, not even via PVC', false, {}, false, false],
  ])('%s', (_case, includeClusterResources, filter, listed, related) => {
    const spec = specOf({ ...filter, includeClusterResources });
    expect(isItemIncluded(pvItem, spec)).toBe(listed);
    expect(explainRelatedItemExclusion(pvItem, spec) === null).toBe(related);
  });

  it('reports why', () => {
    expect(explainItemExclusion(storageClass, specOf({ includedNamespaces: ['prod'] }))).toBe('cluster-scoped-not-included');
    expect(explainItemExclusion(storageClass, specOf({ includeClusterResources: true, excludedResources: ['sc'] }))).toBe(
      'resource-excluded',
    );
  });

  it('namespace objects follow the namespace filter, not includeClusterResources', () => {
    const spec = specOf({ includedNamespaces: ['prod'], includeClusterResources: false });
    expect(isItemIncluded(namespaceObject('prod'), spec)).toBe(true);
    expect(isItemIncluded(namespaceObject('dev'), spec)).toBe(false);
  });

  it('related items ignore the label selector but not resource filters', () => {
    const spec = specOf({ labelSelector: { matchLabels: { app: 'web' } }, excludedResources: ['secrets'] });
    expect(
      explainRelatedItemExclusion({ group: '', resource: 'persistentvolumeclaims', namespaced: true, namespace: 'a', name: 'c' }, spec),
    ).toBeNull();
    expect(explainRelatedItemExclusion({ group: '', resource: 'secrets', namespaced: true, namespace: 'a', name: 's' }, spec)).toBe(
      'resource-excluded',
    );
  });
});

describe('selectsEverything', () => {
  const items = fc.record({
    group: fc.constantFrom('', 'apps', 'storage.k8s.io'),
    resource: fc.constantFrom('pods', 'persistentvolumes', 'namespaces', 'deployments', 'configmaps'),
    namespaced: fc.boolean(),
    namespace: fc.constantFrom(null, '', 'prod', 'kube-system'),
    name: fc.constantFrom('a', 'prod'),
    labels: fc.constantFrom<Record<string, string> | undefined>(
      undefined,
      { app: 'x' },
      { [EXCLUDE_FROM_BACKUP_LABEL]: 'true' },
      { [EXCLUDE_FROM_BACKUP_LABEL]: 'false' },
    ),
  });
  const specs = fc.record({
    includedNamespaces: fc.constantFrom([], ['*'], ['prod']),
    excludedNamespaces: fc.constantFrom([], ['kube-*']),
    includedResources: fc.constantFrom([], ['*'], ['pods']),
    excludedResources: fc.constantFrom([], ['configmaps']),
    includeClusterResources: fc.constantFrom(null, true, false),
    labelSelector: fc.constantFrom(undefined, { matchLabels: { app: 'x' } }),
  });

  // grouping skips the selection functions when this is true, so it must agree with them
  it('when true, only the exclude label keeps an item out, listed or related', () => {
    fc.assert(
      fc.property(specs, items, (rawSpec, { labels, ...item }) => {
        const spec = specOf(rawSpec);
        const selectable: SelectableItem = { ...item, ...(labels ? { labels } : {}) };
        if (!selectsEverything(spec)) return;
        const expected = labels?.[EXCLUDE_FROM_BACKUP_LABEL] !== 'true';
        expect(isItemIncluded(selectable, spec)).toBe(expected);
        expect(isRelatedItemIncluded(selectable, spec)).toBe(expected);
      }),
      { numRuns: 2000 },
    );
  });

  it.each<[Record<string, unknown>, boolean]>([
    [{}, true],
    [{ includedNamespaces: ['*'], includedResources: ['*'], includeClusterResources: true }, true],
    [{ includeClusterResources: false }, false],
    [{ excludedNamespaces: ['kube-*'] }, false],
    [{ includedResources: ['pods'] }, false],
    [{ excludedResources: ['configmaps'] }, false],
    [{ labelSelector: { matchLabels: { app: 'x' } } }, false],
    [{ orLabelSelectors: [{ matchLabels: { app: 'x' } }] }, false],
  ])('%j → %s', (spec, expected) => {
    expect(selectsEverything(specOf(spec))).toBe(expected);
  });
});

describe('namespacesListedOneByOne', () => {
  it.each<[string, Record<string, unknown>, number, string[] | undefined]>([
    ['every namespace: whole-cluster lists', {}, 10, undefined],
    ['"*": whole-cluster lists', { includedNamespaces: ['*'] }, 10, undefined],
    ['a name and "*"', { includedNamespaces: ['shop', '*'] }, 10, undefined],
    ['one name', { includedNamespaces: ['shop'] }, 10, ['shop']],
    ['names sorted, repeats once', { includedNamespaces: ['web', 'shop', 'web'] }, 10, ['shop', 'web']],
    ['a glob among names', { includedNamespaces: ['shop', 'team-?'] }, 10, undefined],
    ['a class glob', { includedNamespaces: ['team-[ab]'] }, 10, undefined],
    ['more names than the limit', { includedNamespaces: ['a', 'b', 'c'] }, 2, undefined],
    ['the limit counts what the excludes leave', { includedNamespaces: ['a', 'b', 'c'], excludedNamespaces: ['c'] }, 2, ['a', 'b']],
    ['an exclude glob', { includedNamespaces: ['kube-system', 'shop'], excludedNamespaces: ['kube-*'] }, 10, ['shop']],
    ['everything named is excluded: nothing to list', { includedNamespaces: ['shop'], excludedNamespaces: ['shop'] }, 10, []],
    ['limit 0: always whole-cluster lists', { includedNamespaces: ['shop'] }, 0, undefined],
  ])('%s', (_label, spec, max, expected) => {
    // A plain filter: validation refuses some of these specs (an include also excluded), the rule still answers.
    expect(namespacesListedOneByOne({ includedNamespaces: [], excludedNamespaces: [], ...spec }, max)).toEqual(expected);
  });

  // The plan lists these namespaces in place of the whole cluster, so no included namespace may be missing.
  it('lists every namespace the filter includes, whenever it answers', () => {
    const names = fc.constantFrom('a', 'b', 'kube-a', 'team-1', 'team-2');
    fc.assert(
      fc.property(
        fc.array(fc.oneof(names, fc.constantFrom('*', 'team-*', 'kube-?')), { maxLength: 4 }),
        fc.array(fc.oneof(names, fc.constantFrom('team-*', 'kube-?')), { maxLength: 2 }),
        fc.integer({ min: 0, max: 4 }),
        (includedNamespaces, excludedNamespaces, max) => {
          const spec = { includedNamespaces, excludedNamespaces };
          const listed = namespacesListedOneByOne(spec, max);
          if (listed === undefined) return;
          for (const ns of ['a', 'b', 'kube-a', 'team-1', 'team-2', 'other']) {
            expect(listed.includes(ns)).toBe(isNamespaceIncluded(ns, spec));
          }
        },
      ),
    );
  });
});
