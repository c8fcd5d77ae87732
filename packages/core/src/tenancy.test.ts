import { describe, expect, it } from 'vitest';
import { validateBackupRequest } from './backup-spec.schema.js';
import { isDns1123Label } from './names.js';
import { validateRestoreRequest } from './restore/restore-spec.schema.js';
import {
  confineBackupSpec,
  describeRefusal,
  describeRequester,
  mappedRestoreAttributes,
  mappedTargetNamespaces,
  namespacedBackupProblems,
  namespacedRestoreProblems,
  podExecAttributes,
  runKey,
  runKeyScopes,
  serviceAccountRequester,
  specHookNamespaces,
} from './tenancy.js';

function backupSpec(spec: Record<string, unknown>) {
  const v = validateBackupRequest({ spec });
  if (!v.ok) throw new Error(JSON.stringify(v.problems));
  return v.value;
}

function restoreSpec(spec: Record<string, unknown>) {
  const v = validateRestoreRequest({ spec: { backupName: 'x', ...spec } });
  if (!v.ok) throw new Error(JSON.stringify(v.problems));
  return v.value;
}

describe('runKey', () => {
  it('is the name itself for a cluster-scoped run', () => {
    expect(runKey(null, 'nightly')).toBe('nightly');
    expect(runKey(undefined, 'nightly')).toBe('nightly');
  });

  it('keeps namespaced runs apart that a plain join would not', () => {
    expect(runKey('a', 'b-c')).not.toBe(runKey('a-b', 'c'));
    expect(runKey('a', 'x')).toMatch(/^a-x-[0-9a-f]{8}$/);
    expect(runKey('a', 'x')).toBe(runKey('a', 'x'));
  });

  it('is always a DNS-1123 label, however long the namespace and name', () => {
    const key = runKey('n'.repeat(63), `${'x'.repeat(62)}-`);
    expect(key.length).toBeLessThanOrEqual(63);
    expect(isDns1123Label(key)).toBe(true);
    expect(runKey('n'.repeat(63), 'a')).not.toBe(runKey('n'.repeat(63), 'b'));
  });
});

describe('runKeyScopes', () => {
  it("reads a namespaced run's namespace from its name, before the run is looked up", () => {
    expect(runKeyScopes(runKey('b', 'nightly'))).toEqual(['b', undefined]);
    expect(runKeyScopes(runKey('a-b', 'c'))).toEqual(['a-b', undefined]);
    expect(runKeyScopes(runKey('a', 'b-c'))).toEqual(['a', undefined]);
  });

  it('a name that no split re-derives is cluster-scoped first, or a cut key of a namespace it begins with', () => {
    expect(runKeyScopes('nightly')).toEqual([undefined]);
    expect(runKeyScopes('b-nightly-0123abcd')).toEqual([undefined, 'b']);
    const cut = runKey('team', `${'x'.repeat(60)}`);
    expect(cut.length).toBe(63);
    expect(runKeyScopes(cut)).toEqual([undefined, 'team']);
  });
});

describe('namespacedBackupProblems', () => {
  it('accepts a spec that names only its own namespace or none, and narrows it', () => {
    for (const spec of [{}, { includedNamespaces: ['a'] }, { includedNamespaces: ['*'] }, { includeClusterResources: false }]) {
      expect(namespacedBackupProblems(backupSpec(spec), 'a')).toEqual([]);
      expect(confineBackupSpec(backupSpec(spec), 'a').includedNamespaces).toEqual(['a']);
    }
  });

  it('names every field that reaches beyond the namespace', () => {
    const spec = backupSpec({
      includedNamespaces: ['b', 'a*'],
      excludedNamespaces: ['a'],
      includeClusterResources: true,
      resourcePolicy: { kind: 'ConfigMap', name: 'policies' },
    });
    const paths = namespacedBackupProblems(spec, 'a').map((p) => p.path);
    expect(paths).toEqual([
      'spec.includedNamespaces[0]',
      'spec.includedNamespaces[1]',
      'spec.excludedNamespaces[0]',
      'spec.includeClusterResources',
      'spec.resourcePolicy',
    ]);
    expect(namespacedBackupProblems(spec, 'a')[0]?.message).toContain('"b" is outside this resource\'s namespace "a"');
  });

  it('refuses cluster-scoped resource filters', () => {
    const spec = backupSpec({ includedClusterScopedResources: ['persistentvolumes'] });
    expect(namespacedBackupProblems(spec, 'a').map((p) => p.path)).toEqual(['spec.includedClusterScopedResources[0]']);
  });
});

describe('namespacedRestoreProblems', () => {
  it('accepts its own namespace mapped anywhere; the targets are for the API server to judge', () => {
    const spec = restoreSpec({ namespaceMapping: { a: 'b' } });
    expect(namespacedRestoreProblems(spec, 'a')).toEqual([]);
    expect(mappedTargetNamespaces(spec)).toEqual(['b']);
    expect(mappedTargetNamespaces(restoreSpec({ namespaceMapping: { a: 'a' } }))).toEqual([]);
  });

  it('refuses other namespaces and cluster-scoped items', () => {
    const spec = restoreSpec({ includedNamespaces: ['b'], includeClusterResources: true, namespaceMapping: { c: 'a' } });
    expect(namespacedRestoreProblems(spec, 'a').map((p) => p.path)).toEqual([
      'spec.includedNamespaces[0]',
      'spec.includeClusterResources',
      'spec.namespaceMapping["c"]',
    ]);
  });
});

describe('requesters and refusals', () => {
  it('names a service account as the API server does', () => {
    const sa = serviceAccountRequester('a', 'default');
    expect(sa).toEqual({
      kind: 'user',
      username: 'system:serviceaccount:a:default',
      groups: ['system:serviceaccounts', 'system:serviceaccounts:a', 'system:authenticated'],
    });
    expect(describeRequester(sa)).toBe('ServiceAccount "a/default"');
    expect(describeRequester({ kind: 'user', username: 'alice', groups: [] })).toBe('User "alice"');
    expect(describeRequester({ kind: 'stowage', via: 'static-token' })).toContain('cluster-admin equivalent');
  });

  it('words a refused exec the way kube-apiserver does, naming pods/exec', () => {
    const message = describeRefusal({ kind: 'user', username: 'alice', groups: [] }, podExecAttributes('kube-system', 'etcd-0'));
    expect(message).toBe('User "alice" cannot create resource "pods/exec" in API group "" in the namespace "kube-system"');
  });
});

describe('specHookNamespaces', () => {
  const exec = { exec: { command: ['/bin/true'] } };
  it('names every backup-level hook namespace and the named namespaces a hook set reaches', () => {
    const spec = backupSpec({
      includedNamespaces: ['a', 'b'],
      hooks: {
        backup: { pre: [{ name: 'freeze', namespace: 'kube-system', command: ['/bin/true'] }] },
        resources: [
          { name: 'all', pre: [exec] },
          { name: 'only-b', includedNamespaces: ['b', 'c'], post: [exec] },
        ],
      },
    });
    expect(specHookNamespaces(spec)).toEqual({ named: ['a', 'b', 'kube-system'], open: false });
  });

  it('is open when neither the backup nor the hook set names its namespaces', () => {
    const spec = backupSpec({ includedNamespaces: ['app-*'], hooks: { resources: [{ name: 'h', pre: [exec] }] } });
    expect(specHookNamespaces(spec)).toEqual({ named: [], open: true });
  });

  it('names nothing for a spec without hooks, however wide', () => {
    expect(specHookNamespaces(backupSpec({}))).toEqual({ named: [], open: false });
  });
});

describe('mappedRestoreAttributes', () => {
  const list = {
    'v1/ConfigMap': ['a/settings', 'c/other'],
    'apps/v1/Deployment': ['a/web'],
    'v1/Secret': ['c/key'],
    'x.io/v1/Widget': ['a/w'],
  };
  const known: Record<string, { group: string; resource: string }> = {
    'v1/ConfigMap': { group: '', resource: 'configmaps' },
    'apps/v1/Deployment': { group: 'apps', resource: 'deployments' },
    'v1/Secret': { group: '', resource: 'secrets' },
  };
  it('asks create for every kind of the source namespace in its target, and names kinds the cluster does not serve', () => {
    const spec = restoreSpec({ namespaceMapping: { a: 'b', c: 'c' } });
    const got = mappedRestoreAttributes(spec, list, (k) => known[k]);
    expect(got.attributes).toEqual([
      { verb: 'create', group: '', resource: 'configmaps', namespace: 'b' },
      { verb: 'create', group: 'apps', resource: 'deployments', namespace: 'b' },
    ]);
    expect(got.unknownKinds).toEqual(['x.io/v1/Widget']);
  });
  it("leaves out kinds the restore's resource filters exclude", () => {
    const spec = restoreSpec({ namespaceMapping: { a: 'b' }, excludedResources: ['deployments.apps'] });
    expect(mappedRestoreAttributes(spec, list, (k) => known[k]).attributes).toEqual([
      { verb: 'create', group: '', resource: 'configmaps', namespace: 'b' },
    ]);
  });
});
