import { describe, expect, it } from 'vitest';
import { validateBackupRequest } from './backup-spec.schema.js';
import { validateResourcePolicyDocument } from './resource-policy.schema.js';

function problemsOf(request: unknown) {
  const result = validateBackupRequest(request);
  if (result.ok) throw new Error('expected validation to fail');
  return result.problems;
}

describe('validateBackupRequest: defaults', () => {
  it('applies Velero defaults to an empty spec', () => {
    const result = validateBackupRequest({ spec: {} });
    expect(result).toEqual({
      ok: true,
      name: null,
      metadata: { labels: {}, annotations: {} },
      value: {
        includedNamespaces: [],
        excludedNamespaces: [],
        includedResources: [],
        excludedResources: [],
        includeClusterResources: null,
        labelSelector: null,
        orLabelSelectors: [],
        defaultVolumesToFsBackup: false,
        hooks: { resources: [] },
        resourcePolicy: null,
        fsBackupTimeoutMs: 4 * 3_600_000,
        snapshotVolumes: false,
        snapshotMoveData: false,
        csiSnapshotTimeoutMs: 10 * 60_000,
        ttlMs: 720 * 3_600_000,
        storageLocation: 'default',
      },
    });
  });

  it('takes the snapshot fields, and names a bad csiSnapshotTimeout', () => {
    const result = validateBackupRequest({ spec: { snapshotVolumes: true, snapshotMoveData: true, csiSnapshotTimeout: '2m' } });
    expect(result).toMatchObject({ ok: true, value: { snapshotVolumes: true, snapshotMoveData: true, csiSnapshotTimeoutMs: 120_000 } });
    const bad = validateBackupRequest({ spec: { csiSnapshotTimeout: 'soon', snapshotMoveData: 'yes' } });
    expect(bad.ok).toBe(false);
    const fields = bad.ok ? [] : bad.problems.map((p) => p.path);
    expect(fields).toEqual(expect.arrayContaining(['spec.csiSnapshotTimeout', 'spec.snapshotMoveData']));
  });

  it('converts durations and fills hook defaults', () => {
    const result = validateBackupRequest({
      name: 'nightly',
      spec: {
        fsBackupTimeout: '1h30m',
        ttl: '45s',
        hooks: {
          resources: [
            {
              name: 'freeze',
              pre: [{ exec: { command: ['fsfreeze', '-f', '/data'] } }],
              post: [{ exec: { container: 'db', command: ['x'], onError: 'Continue', timeout: '2m' } }],
            },
          ],
        },
      },
    });
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.name).toBe('nightly');
    expect(result.value.fsBackupTimeoutMs).toBe(5_400_000);
    expect(result.value.ttlMs).toBe(45_000);
    expect(result.value.hooks.resources[0]?.pre[0]?.exec).toEqual({
      container: null,
      command: ['fsfreeze', '-f', '/data'],
      onError: 'Fail',
      timeoutMs: 30_000,
    });
    expect(result.value.hooks.resources[0]?.post[0]?.exec).toEqual({
      container: 'db',
      command: ['x'],
      onError: 'Continue',
      timeoutMs: 120_000,
    });
  });

  it('uses server defaults when given', () => {
    const result = validateBackupRequest({ spec: {} }, { defaultVolumesToFsBackup: true, storageLocation: 'primary', ttlMs: 1000 });
    expect(result.ok && [result.value.defaultVolumesToFsBackup, result.value.storageLocation, result.value.ttlMs]).toEqual([
      true,
      'primary',
      1000,
    ]);
  });

  it('keeps the resource policy kind', () => {
    const inline = validateBackupRequest({
      spec: { resourcePolicy: { volumePolicies: [{ conditions: { volumeTypes: ['emptyDir'] }, action: { type: 'skip' } }] } },
    });
    expect(inline.ok && inline.value.resourcePolicy).toEqual({
      kind: 'Inline',
      volumePolicies: [{ conditions: { volumeTypes: ['emptyDir'] }, action: { type: 'skip' } }],
    });
    const ref = validateBackupRequest({ spec: { resourcePolicy: { kind: 'configmap', name: 'policies' } } });
    expect(ref.ok && ref.value.resourcePolicy).toEqual({ kind: 'ConfigMap', name: 'policies' });
  });
});

describe('validateBackupRequest: problems', () => {
  it.each<[string, unknown, string, RegExp]>([
    ['a 64-character name', { name: 'a'.repeat(64), spec: {} }, 'name', /64 characters long; the limit is 63/],
    ['an uppercase name', { name: 'Nightly', spec: {} }, 'name', /must be lowercase/],
    ['a missing spec', {}, 'spec', /is required/],
    ['an unknown field with a typo', { spec: { includedNamespace: ['a'] } }, 'spec.includedNamespace', /did you mean "includedNamespaces"/],
    [
      'an unsupported Velero field',
      { spec: { volumeSnapshotLocations: ['aws'] } },
      'spec.volumeSnapshotLocations',
      /native volume snapshotters are not supported/,
    ],
    [
      'an empty hook command',
      { spec: { hooks: { resources: [{ name: 'h', pre: [{ exec: { command: [] } }] }] } } },
      'spec.hooks.resources[0].pre[0].exec.command',
      /must be a non-empty array of strings/,
    ],
    [
      'a string hook command',
      { spec: { hooks: { resources: [{ name: 'h', post: [{ exec: { command: 'ls -l' } }] }] } } },
      'spec.hooks.resources[0].post[0].exec.command',
      /must be a non-empty array of strings/,
    ],
    [
      'a bad onError',
      { spec: { hooks: { resources: [{ name: 'h', pre: [{ exec: { command: ['x'], onError: 'Maybe' } }] }] } } },
      'spec.hooks.resources[0].pre[0].exec.onError',
      /must be "Continue", "Fail" or "FailBlock" \(got "Maybe"\)/,
    ],
    [
      'a hook timeout over 4h',
      { spec: { hooks: { resources: [{ name: 'h', pre: [{ exec: { command: ['x'], timeout: '5h' } }] }] } } },
      'spec.hooks.resources[0].pre[0].exec.timeout',
      /at most 4h/,
    ],
    ['a hook spec without a name', { spec: { hooks: { resources: [{ pre: [] }] } } }, 'spec.hooks.resources[0].name', /is required/],
    ['a bad duration', { spec: { fsBackupTimeout: '1x' } }, 'spec.fsBackupTimeout', /not a duration/],
    ['a numeric ttl', { spec: { ttl: 3600 } }, 'spec.ttl', /must be a string \(got number 3600\)/],
    [
      'a bad namespace',
      { spec: { includedNamespaces: ['Prod_NS'] } },
      'spec.includedNamespaces[0]',
      /not a namespace name or pattern: must be lowercase/,
    ],
    ['an unclosed glob', { spec: { includedNamespaces: ['prod-[ab'] } }, 'spec.includedNamespaces[0]', /never closed/],
    ['an uppercase resource', { spec: { includedResources: ['Pods'] } }, 'spec.includedResources[0]', /resource names are lowercase/],
    ['"*" in excludes', { spec: { excludedNamespaces: ['*'] } }, 'spec.excludedNamespaces', /cannot contain "\*"/],
    [
      'a namespace both included and excluded',
      { spec: { includedNamespaces: ['a'], excludedNamespaces: ['a'] } },
      'spec.excludedNamespaces',
      /both included and excluded/,
    ],
    ['"*" with other includes', { spec: { includedResources: ['*', 'pods'] } }, 'spec.includedResources', /either "\*" alone/],
    [
      'a non-boolean includeClusterResources',
      { spec: { includeClusterResources: 'yes' } },
      'spec.includeClusterResources',
      /true, false or null/,
    ],
    [
      'labelSelector and orLabelSelectors',
      { spec: { labelSelector: { matchLabels: { a: 'b' } }, orLabelSelectors: [{ matchLabels: { c: 'd' } }] } },
      'spec.orLabelSelectors',
      /either labelSelector or orLabelSelectors/,
    ],
    [
      'a bad label key',
      { spec: { labelSelector: { matchLabels: { 'bad key': 'v' } } } },
      'spec.labelSelector.matchLabels["bad key"]',
      /may contain only/,
    ],
    [
      'a bad label value',
      { spec: { labelSelector: { matchLabels: { app: 'v'.repeat(64) } } } },
      'spec.labelSelector.matchLabels.app',
      /limit is 63/,
    ],
    [
      'a bad key prefix',
      { spec: { labelSelector: { matchLabels: { 'Example.COM/app': 'v' } } } },
      'spec.labelSelector.matchLabels["Example.COM/app"]',
      /DNS subdomain/,
    ],
    [
      'In without values',
      { spec: { labelSelector: { matchExpressions: [{ key: 'tier', operator: 'In' }] } } },
      'spec.labelSelector.matchExpressions[0].values',
      /non-empty array when operator is In/,
    ],
    [
      'Exists with values',
      { spec: { labelSelector: { matchExpressions: [{ key: 'tier', operator: 'Exists', values: ['x'] }] } } },
      'spec.labelSelector.matchExpressions[0].values',
      /empty or absent/,
    ],
    [
      'an unknown operator',
      { spec: { orLabelSelectors: [{ matchExpressions: [{ key: 'tier', operator: 'Like', values: ['x'] }] }] } },
      'spec.orLabelSelectors[0].matchExpressions[0].operator',
      /must be one of In, NotIn, Exists, DoesNotExist/,
    ],
    [
      'a bad hook selector',
      { spec: { hooks: { resources: [{ name: 'h', labelSelector: { matchLabels: { 'a b': 'c' } } }] } } },
      'spec.hooks.resources[0].labelSelector.matchLabels["a b"]',
      /may contain only/,
    ],
    [
      'a policy with both forms',
      { spec: { resourcePolicy: { kind: 'ConfigMap', name: 'p', volumePolicies: [] } } },
      'spec.resourcePolicy',
      /not both/,
    ],
    ['a reference without a name', { spec: { resourcePolicy: { kind: 'ConfigMap' } } }, 'spec.resourcePolicy.name', /needs both/],
    [
      'a reference to a Secret',
      { spec: { resourcePolicy: { kind: 'Secret', name: 'p' } } },
      'spec.resourcePolicy.kind',
      /must be "ConfigMap"/,
    ],
    [
      'a single-value capacity',
      { spec: { resourcePolicy: { volumePolicies: [{ conditions: { capacity: '10Gi' }, action: { type: 'skip' } }] } } },
      'spec.resourcePolicy.volumePolicies[0].conditions.capacity',
      /lower,upper/,
    ],
    [
      'an inverted capacity',
      { spec: { resourcePolicy: { volumePolicies: [{ conditions: { capacity: '10Gi,1Gi' }, action: { type: 'skip' } }] } } },
      'spec.resourcePolicy.volumePolicies[0].conditions.capacity',
      /larger than upper/,
    ],
    [
      'an unknown action',
      { spec: { resourcePolicy: { volumePolicies: [{ conditions: {}, action: { type: 'custom' } }] } } },
      'spec.resourcePolicy.volumePolicies[0].action.type',
      /fs-backup, skip, snapshot/,
    ],
    [
      'an unknown volume type',
      { spec: { resourcePolicy: { volumePolicies: [{ conditions: { volumeTypes: ['tmpfs'] }, action: { type: 'skip' } }] } } },
      'spec.resourcePolicy.volumePolicies[0].conditions.volumeTypes[0]',
      /not a volume type/,
    ],
    [
      'csi attributes without driver',
      {
        spec: { resourcePolicy: { volumePolicies: [{ conditions: { csi: { volumeAttributes: { a: 'b' } } }, action: { type: 'skip' } }] } },
      },
      'spec.resourcePolicy.volumePolicies[0].conditions.csi.volumeAttributes',
      /needs csi.driver/,
    ],
  ])('%s', (_case, request, path, message) => {
    const problems = problemsOf(request);
    const match = problems.find((problem) => problem.path === path);
    expect(match, JSON.stringify(problems)).toBeDefined();
    expect(match?.message).toMatch(message);
  });

  it('reports every problem at once, sorted by path', () => {
    const problems = problemsOf({
      name: 'Bad_Name',
      spec: {
        bogus: 1,
        ttl: 'soon',
        includedNamespaces: ['ok', 7],
        labelSelector: { matchExpressions: [{ key: 'k', operator: 'In' }] },
        hooks: { resources: [{ name: 'h', pre: [{ exec: { command: [], onError: 'x' } }] }] },
      },
    });
    expect(problems.map((problem) => problem.path)).toEqual([
      'name',
      'spec.bogus',
      'spec.hooks.resources[0].pre[0].exec.command',
      'spec.hooks.resources[0].pre[0].exec.onError',
      'spec.includedNamespaces[1]',
      'spec.labelSelector.matchExpressions[0].values',
      'spec.ttl',
    ]);
  });

  it('rejects something that is not an object', () => {
    expect(problemsOf('backup please')[0]?.message).toMatch(/must be an object/);
  });
});

describe('validateResourcePolicyDocument', () => {
  it('accepts a v1 document', () => {
    const result = validateResourcePolicyDocument({
      version: 'v1',
      volumePolicies: [{ conditions: { storageClass: ['nfs-client'] }, action: { type: 'fs-backup' } }],
    });
    expect(result).toEqual({ ok: true, value: [{ conditions: { storageClass: ['nfs-client'] }, action: { type: 'fs-backup' } }] });
  });

  it('rejects other versions and unknown keys', () => {
    const result = validateResourcePolicyDocument({ version: 'v2', extra: true });
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.problems.map((problem) => problem.path)).toEqual(['extra', 'version']);
      expect(result.problems[1]?.message).toMatch(/must be "v1"/);
    }
  });
});
