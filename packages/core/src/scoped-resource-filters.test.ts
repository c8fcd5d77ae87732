/*
 * Velero's scoped resource filters on the backup spec and in a policy ConfigMap's
 * includeExcludePolicy. Case names are Velero's (pkg/util/collections includes_excludes_test.go:
 * TestNamespaceScopedShouldInclude, TestClusterScopedShouldInclude, TestValidateScopedIncludesExcludes,
 * TestScopeIncludesExcludes_CombineWithPolicy; internal/resourcepolicies for the policy rules);
 * inputs and outcomes are ported as facts. Velero's glob cases (`*s`, `*.bar`) are left out:
 * Stowage's resource entries are names, not patterns, and such entries are rejected.
 */
import { describe, expect, it } from 'vitest';
import { specOf } from '../test/builders.js';
import { validateBackupRequest } from './backup-spec.schema.js';
import { addsCrdsOfCustomResources } from './related-items.js';
import { applyIncludeExcludePolicy, type IncludeExcludePolicy, validateResourcePolicies } from './resource-policy.schema.js';
import {
  clusterScopedListed,
  isItemIncluded,
  isRelatedItemIncluded,
  isResourceIncluded,
  type SelectionSpec,
} from './resource-selection.js';

/** Is a listed item of this resource in the backup (as Velero's ScopeIncludesExcludes.ShouldInclude)? */
function listed(resource: { group: string; resource: string; namespaced: boolean }, spec: SelectionSpec): boolean {
  return isItemIncluded({ ...resource, namespace: resource.namespaced ? 'default' : null, name: 'x' }, spec);
}
const pods = { group: '', resource: 'pods', namespaced: true };
const pvs = { group: '', resource: 'persistentvolumes', namespaced: false };
const namespaces = { group: '', resource: 'namespaces', namespaced: false };

describe('namespace-scoped filter (Velero TestNamespaceScopedShouldInclude)', () => {
  it.each<[string, string[], string[], boolean]>([
    ['empty string should include every item', [], [], true],
    ['include * should include every item', ['*'], [], true],
    ['item in includes list should include item', ['foo', 'bar', 'pods'], [], true],
    ['item not in includes list should not include item', ['foo', 'baz'], [], false],
    ['include *, excluded item should not include item', ['*'], ['pods'], false],
    ['include *, exclude foo, bar should be included', ['*'], ['foo'], true],
    ['an item both included and excluded should not be included', ['pods'], ['pods'], false],
    ['exclude * should include nothing', [], ['*'], false],
  ])('%s', (_name, includes, excludes, want) => {
    // built without validation: some of Velero's inputs (an item both included and excluded) are rejected by it
    const spec = { ...specOf({}), includedNamespaceScopedResources: includes, excludedNamespaceScopedResources: excludes };
    expect(listed(pods, spec)).toBe(want);
  });
});

describe('cluster-scoped filter (Velero TestClusterScopedShouldInclude)', () => {
  it.each<[string, string[], string[], string[], typeof pvs, boolean]>([
    ['empty string should include nothing', [], [], ['default'], pvs, false],
    ['include * should include every item', ['*'], [], [], pvs, true],
    ['item in includes list should include item', ['namespaces', 'bar', 'baz'], [], [], namespaces, true],
    ['item not in includes list should not include item', ['foo', 'baz'], [], ['default'], pvs, false],
    ['include *, excluded item should not include item', ['*'], ['namespaces'], [], namespaces, false],
    ['include *, exclude foo, bar should be included', ['*'], ['foo'], [], namespaces, true],
    ['an item both included and excluded should not be included', ['namespaces'], ['namespaces'], [], namespaces, false],
    ['exclude * should include nothing', [], ['*'], [], namespaces, false],
    ['even namespaces is not in the include list, it should also be involved.', ['foo', 'baz'], [], [], namespaces, true],
    ['When all namespaces and namespace scope resources are included, cluster resource should be included.', [], [], ['*'], pvs, true],
    [
      'When all namespaces and namespace scope resources are included, but cluster resource is excluded.',
      [],
      ['persistentvolumes'],
      ['*'],
      pvs,
      false,
    ],
  ])('%s', (_name, includes, excludes, nsIncludes, item, want) => {
    const spec = {
      ...specOf({ includedNamespaces: nsIncludes }),
      includedClusterScopedResources: includes,
      excludedClusterScopedResources: excludes,
    };
    expect(listed(item, spec)).toBe(want);
  });

  it('a PV pulled in by its PVC is kept unless the cluster excludes name it', () => {
    const spec = specOf({ includedNamespaces: ['shop'], includedNamespaceScopedResources: ['pods', 'persistentvolumeclaims'] });
    expect(clusterScopedListed(pvs, spec)).toBe(false);
    expect(isRelatedItemIncluded({ ...pvs, name: 'pv-1' }, spec)).toBe(true);
    expect(isRelatedItemIncluded({ ...pvs, name: 'pv-1' }, { ...spec, excludedClusterScopedResources: ['persistentvolumes'] })).toBe(false);
    expect(isResourceIncluded({ group: '', resource: 'configmaps', namespaced: true }, spec)).toBe(false);
  });

  it('CRDs of custom resources follow the same rule (added unless listed or excluded)', () => {
    expect(addsCrdsOfCustomResources(specOf({ includedNamespaces: ['shop'], includedNamespaceScopedResources: ['*'] }))).toBe(true);
    expect(
      addsCrdsOfCustomResources(
        specOf({ includedNamespaces: ['shop'], excludedClusterScopedResources: ['customresourcedefinitions.apiextensions.k8s.io'] }),
      ),
    ).toBe(false);
    expect(addsCrdsOfCustomResources(specOf({ includedClusterScopedResources: ['crds'] }))).toBe(false);
  });
});

describe('scoped filters on the spec: validation (Velero TestValidateScopedIncludesExcludes and the mixing rule)', () => {
  const problemsOf = (spec: Record<string, unknown>) => {
    const res = validateBackupRequest({ spec });
    return res.ok ? [] : res.problems.map((p) => `${p.path}: ${p.message}`);
  };
  it.each<[string, Record<string, unknown>, RegExp | null]>([
    ['empty includes is valid', { includedNamespaceScopedResources: [] }, null],
    ['asterisk includes is valid', { includedNamespaceScopedResources: ['*'] }, null],
    [
      'include everything not allowed with other includes',
      { includedClusterScopedResources: ['*', 'foo'] },
      /includedClusterScopedResources: list either "\*" alone/,
    ],
    ['empty excludes is valid', { excludedClusterScopedResources: [] }, null],
    ['asterisk excludes is valid', { excludedClusterScopedResources: ['*'] }, null],
    [
      'exclude everything not allowed with other excludes',
      { excludedNamespaceScopedResources: ['*', 'foo'] },
      /excludedNamespaceScopedResources: list either "\*" alone/,
    ],
    [
      "asterisk excludes doesn't work with non-empty includes",
      { includedClusterScopedResources: ['foo'], excludedClusterScopedResources: ['*'] },
      /when it is "\*"/,
    ],
    [
      'excludes cannot contain items in includes',
      { includedNamespaceScopedResources: ['foo', 'bar'], excludedNamespaceScopedResources: ['bar'] },
      /"bar" is both included and excluded/,
    ],
    [
      'old and new filters cannot be used together',
      { includedResources: ['pods'], includedClusterScopedResources: ['storageclasses.storage.k8s.io'] },
      /old resource filters.*cannot be used together/,
    ],
    [
      'includeClusterResources counts as an old filter',
      { includeClusterResources: true, excludedNamespaceScopedResources: ['secrets'] },
      /cannot be used together/,
    ],
  ])('%s', (_name, spec, problem) => {
    const problems = problemsOf(spec);
    if (problem === null) expect(problems).toEqual([]);
    else expect(problems).toEqual(expect.arrayContaining([expect.stringMatching(problem)]));
  });

  it('a valid spec keeps the scoped filters (they were rejected as unknown before)', () => {
    const res = validateBackupRequest({
      spec: { includedNamespaceScopedResources: ['pods'], excludedClusterScopedResources: ['persistentvolumes'] },
    });
    expect(res.ok && res.value).toMatchObject({
      includedNamespaceScopedResources: ['pods'],
      excludedClusterScopedResources: ['persistentvolumes'],
    });
  });
});

describe('includeExcludePolicy in a policy ConfigMap (Velero TestScopeIncludesExcludes_CombineWithPolicy)', () => {
  const policy = (p: Partial<IncludeExcludePolicy>): IncludeExcludePolicy => ({
    includedClusterScopedResources: [],
    excludedClusterScopedResources: [],
    includedNamespaceScopedResources: [],
    excludedNamespaceScopedResources: [],
    ...p,
  });
  const combined = (spec: Record<string, unknown>, p: IncludeExcludePolicy) => {
    const res = applyIncludeExcludePolicy(specOf(spec), p);
    if (!res.ok) throw new Error(res.message);
    return res.value;
  };
  const ns = (resource: string) => ({ group: '', resource, namespaced: true });
  const cluster = (group: string, resource: string) => ({ group, resource, namespaced: false });
  const crds = cluster('apiextensions.k8s.io', 'customresourcedefinitions');

  it('policy includes excludes should be merged to the original includes excludes when there is no conflict', () => {
    const spec = combined(
      {
        includedNamespaceScopedResources: ['pods'],
        excludedNamespaceScopedResources: ['configmaps'],
        excludedClusterScopedResources: ['crds'],
      },
      policy({
        includedNamespaceScopedResources: ['deployments'],
        excludedNamespaceScopedResources: ['secrets'],
        includedClusterScopedResources: ['persistentvolumes'],
      }),
    );
    expect(listed(pvs, spec)).toBe(true);
    expect(isResourceIncluded(crds, spec)).toBe(false);
    expect(isResourceIncluded({ group: 'apps', resource: 'deployments', namespaced: true }, spec)).toBe(true);
    expect(isResourceIncluded(ns('configmaps'), spec)).toBe(false);
    expect(isResourceIncluded(ns('secrets'), spec)).toBe(false);
  });

  it('when there are conflicts, the existing includes excludes filters have higher priorities', () => {
    const spec = combined(
      {
        includedNamespaceScopedResources: ['pods', 'deployments'],
        excludedNamespaceScopedResources: ['configmaps'],
        includedClusterScopedResources: ['crds'],
        excludedClusterScopedResources: ['persistentvolumes'],
      },
      policy({
        includedNamespaceScopedResources: ['configmaps'],
        excludedNamespaceScopedResources: ['pods', 'secrets'],
        includedClusterScopedResources: ['persistentvolumes'],
        excludedClusterScopedResources: ['crds'],
      }),
    );
    expect(listed(crds, spec)).toBe(true);
    expect(listed(pvs, spec)).toBe(false);
    expect(isResourceIncluded(ns('pods'), spec)).toBe(true);
    expect(isResourceIncluded(ns('configmaps'), spec)).toBe(false);
    expect(isResourceIncluded(ns('secrets'), spec)).toBe(false);
  });

  it("verify the case when there's '*' in the original include filter", () => {
    const spec = combined(
      { includedNamespaceScopedResources: ['*'] },
      policy({ includedNamespaceScopedResources: ['deployments', 'pods'], excludedNamespaceScopedResources: ['configmaps', 'secrets'] }),
    );
    expect(isResourceIncluded(ns('configmaps'), spec)).toBe(true);
    expect(isResourceIncluded(ns('secrets'), spec)).toBe(true);
  });

  it('a backup with the old filters cannot take an includeExcludePolicy', () => {
    const res = applyIncludeExcludePolicy(
      specOf({ includedResources: ['pods'] }),
      policy({ excludedNamespaceScopedResources: ['secrets'] }),
    );
    expect(res).toEqual({
      ok: false,
      message: expect.stringMatching(/old resource filters; they cannot be used with an includeExcludePolicy/),
    });
  });

  it.each<[string, Record<string, unknown>, RegExp | null]>([
    [
      'a document with includeExcludePolicy is accepted',
      { version: 'v1', includeExcludePolicy: { excludedNamespaceScopedResources: ['secrets'] } },
      null,
    ],
    [
      '"*" is not allowed in a policy',
      { version: 'v1', includeExcludePolicy: { includedClusterScopedResources: ['*'] } },
      /cannot use "\*"/,
    ],
    [
      'excludes list cannot contain an item in the includes list',
      { version: 'v1', includeExcludePolicy: { includedNamespaceScopedResources: ['pods'], excludedNamespaceScopedResources: ['pods'] } },
      /"pods" is both included and excluded/,
    ],
    [
      'unknown fields are named',
      { version: 'v1', includeExcludePolicy: { includedResources: ['pods'] } },
      /includeExcludePolicy\.includedResources: unknown field/,
    ],
  ])('%s', (_name, document, problem) => {
    const res = validateResourcePolicies(document);
    if (problem === null)
      expect(res).toMatchObject({ ok: true, value: { includeExcludePolicy: { excludedNamespaceScopedResources: ['secrets'] } } });
    else
      expect(res.ok ? [] : res.problems.map((p) => `${p.path}: ${p.message}`)).toEqual(
        expect.arrayContaining([expect.stringMatching(problem)]),
      );
  });
});
