import { describe, expect, it } from 'vitest';
import { validateRestoreRequest } from './restore-spec.schema.js';

function problemsOf(request: unknown) {
  const result = validateRestoreRequest(request);
  if (result.ok) throw new Error('expected validation to fail');
  return result.problems;
}

function validSpecOf(request: unknown) {
  const result = validateRestoreRequest(request);
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result;
}

describe('validateRestoreRequest: defaults', () => {
  it("applies Velero's defaults (restorePVs true, policy none, itemOperationTimeout 4h)", () => {
    expect(validateRestoreRequest({ spec: { backupName: 'nightly' } })).toEqual({
      ok: true,
      name: null,
      value: {
        backupName: 'nightly',
        includedNamespaces: [],
        excludedNamespaces: [],
        includedResources: [],
        excludedResources: [],
        includeClusterResources: null,
        labelSelector: null,
        orLabelSelectors: [],
        namespaceMapping: {},
        restorePVs: true,
        existingResourcePolicy: 'none',
        preserveNodePorts: false,
        hooks: { resources: [] },
        itemOperationTimeoutMs: 4 * 3_600_000,
      },
    });
  });

  it('fills exec hook defaults: first container, onError Continue, execTimeout 30s, no wait limit', () => {
    const result = validSpecOf({
      name: 'r1',
      spec: {
        backupName: 'b1',
        itemOperationTimeout: '90m',
        hooks: {
          resources: [
            {
              name: 'db',
              includedNamespaces: ['shop'],
              postHooks: [
                { exec: { command: ['psql', '-c', 'select 1'] } },
                {
                  exec: {
                    container: 'postgres',
                    command: ['x'],
                    onError: 'Fail',
                    execTimeout: '1m',
                    waitTimeout: '5m',
                    waitForReady: true,
                  },
                },
                { init: { initContainers: [{ name: 'prep', image: 'alpine:3', command: ['sh', '-c', 'date'] }] } },
              ],
            },
          ],
        },
      },
    });
    expect(result.name).toBe('r1');
    expect(result.value.itemOperationTimeoutMs).toBe(90 * 60_000);
    expect(result.value.hooks.resources[0]?.postHooks).toEqual([
      {
        exec: {
          container: null,
          command: ['psql', '-c', 'select 1'],
          onError: 'Continue',
          execTimeoutMs: 30_000,
          waitTimeoutMs: 0,
          waitForReady: false,
        },
      },
      {
        exec: { container: 'postgres', command: ['x'], onError: 'Fail', execTimeoutMs: 60_000, waitTimeoutMs: 300_000, waitForReady: true },
      },
      { init: { initContainers: [{ name: 'prep', image: 'alpine:3', command: ['sh', '-c', 'date'] }] } },
    ]);
  });

  it.each([
    ['restorePVs false', { restorePVs: false }, { restorePVs: false }],
    ['restorePVs null = default', { restorePVs: null }, { restorePVs: true }],
    ['policy update', { existingResourcePolicy: 'update' }, { existingResourcePolicy: 'update' }],
    ['preserveNodePorts', { preserveNodePorts: true }, { preserveNodePorts: true }],
    ['namespaceMapping', { namespaceMapping: { shop: 'shop-copy' } }, { namespaceMapping: { shop: 'shop-copy' } }],
    ['namespace globs', { includedNamespaces: ['shop-*', 'media'] }, { includedNamespaces: ['shop-*', 'media'] }],
    ['itemOperationTimeout 0 = default', { itemOperationTimeout: '0' }, null],
  ])('accepts %s', (_name, fields, expected) => {
    const result = validateRestoreRequest({ spec: { backupName: 'b', ...fields } });
    if (expected === null) {
      // 0 is below the 1 s minimum
      expect(result.ok).toBe(false);
      return;
    }
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.value).toMatchObject(expected);
  });
});

describe('validateRestoreRequest: problems, every one at once, each naming its field', () => {
  it('reports every bad field of one request together', () => {
    const problems = problemsOf({
      name: 'Bad_Name',
      spec: {
        includedNamespaces: ['shop['],
        includedResources: ['Pods'],
        namespaceMapping: { shop: 'Shop_Copy' },
        existingResourcePolicy: 'replace',
        itemOperationTimeout: 'soon',
        restorePVs: 'yes',
        labelSelector: { matchLabels: { app: 'web' } },
        orLabelSelectors: [{ matchLabels: { app: 'db' } }],
      },
    });
    const paths = problems.map((problem) => problem.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'name',
        'spec.backupName',
        'spec.includedNamespaces[0]',
        'spec.includedResources[0]',
        'spec.namespaceMapping.shop',
        'spec.existingResourcePolicy',
        'spec.itemOperationTimeout',
        'spec.restorePVs',
        'spec.orLabelSelectors',
      ]),
    );
    const byPath = Object.fromEntries(problems.map((problem) => [problem.path, problem.message]));
    expect(byPath['spec.backupName']).toMatch(/required/);
    expect(byPath['spec.namespaceMapping.shop']).toMatch(/target namespace "Shop_Copy" must be lowercase/);
    expect(byPath['spec.existingResourcePolicy']).toBe('must be "none" or "update" (got "replace")');
    expect(byPath['spec.itemOperationTimeout']).toMatch(/not a duration/);
  });

  it.each([
    [
      'a source namespace that is not a name',
      { namespaceMapping: { 'bad ns': 'ok' } },
      'spec.namespaceMapping["bad ns"]',
      /source namespace/,
    ],
    ['a target longer than 63', { namespaceMapping: { a: 'x'.repeat(64) } }, 'spec.namespaceMapping.a', /64 characters long/],
    [
      'two sources onto one target',
      { namespaceMapping: { a: 'same', b: 'same' } },
      'spec.namespaceMapping.b',
      /"a" and "b" all map to "same"/,
    ],
    ['"*" with other namespaces', { includedNamespaces: ['*', 'shop'] }, 'spec.includedNamespaces', /"\*" already means all/],
    [
      'a namespace both included and excluded',
      { includedNamespaces: ['shop'], excludedNamespaces: ['shop'] },
      'spec.excludedNamespaces',
      /both included and excluded/,
    ],
    [
      'a bad label selector operator',
      { labelSelector: { matchExpressions: [{ key: 'a', operator: 'Has' }] } },
      'spec.labelSelector.matchExpressions[0].operator',
      /must be one of In, NotIn, Exists, DoesNotExist/,
    ],
    [
      'a hook with neither exec nor init',
      { hooks: { resources: [{ name: 'h', postHooks: [{}] }] } },
      'spec.hooks.resources[0].postHooks[0]',
      /give exec/,
    ],
    [
      'a hook with both exec and init',
      {
        hooks: {
          resources: [{ name: 'h', postHooks: [{ exec: { command: ['x'] }, init: { initContainers: [{ name: 'a', image: 'b' }] } }] }],
        },
      },
      'spec.hooks.resources[0].postHooks[0]',
      /not both/,
    ],
    [
      'an empty hook command',
      { hooks: { resources: [{ name: 'h', postHooks: [{ exec: { command: [] } }] }] } },
      'spec.hooks.resources[0].postHooks[0].exec.command',
      /non-empty array/,
    ],
    [
      'a bad onError',
      { hooks: { resources: [{ name: 'h', postHooks: [{ exec: { command: ['x'], onError: 'Ignore' } }] }] } },
      'spec.hooks.resources[0].postHooks[0].exec.onError',
      /"Continue" or "Fail"/,
    ],
    [
      'a bad waitTimeout',
      { hooks: { resources: [{ name: 'h', postHooks: [{ exec: { command: ['x'], waitTimeout: '5 minutes' } }] }] } },
      'spec.hooks.resources[0].postHooks[0].exec.waitTimeout',
      /not a duration/,
    ],
    [
      'waitForReady not a boolean',
      { hooks: { resources: [{ name: 'h', postHooks: [{ exec: { command: ['x'], waitForReady: 'yes' } }] }] } },
      'spec.hooks.resources[0].postHooks[0].exec.waitForReady',
      /true or false/,
    ],
    [
      'an init container without image',
      { hooks: { resources: [{ name: 'h', postHooks: [{ init: { initContainers: [{ name: 'prep' }] } }] }] } },
      'spec.hooks.resources[0].postHooks[0].init.initContainers[0].image',
      /init container image/,
    ],
    [
      'an init container with a bad name',
      { hooks: { resources: [{ name: 'h', postHooks: [{ init: { initContainers: [{ name: 'Prep', image: 'a' }] } }] }] } },
      'spec.hooks.resources[0].postHooks[0].init.initContainers[0].name',
      /must be lowercase/,
    ],
    [
      'an init hook timeout (not supported)',
      { hooks: { resources: [{ name: 'h', postHooks: [{ init: { initContainers: [{ name: 'a', image: 'b' }], timeout: '1m' } }] }] } },
      'spec.hooks.resources[0].postHooks[0].init.timeout',
      /not supported: Stowage does not wait for init hook containers/,
    ],
    ['namespaceMapping not an object', { namespaceMapping: ['shop:copy'] }, 'spec.namespaceMapping', /must be an object \(got an array\)/],
    ['a hook spec without name', { hooks: { resources: [{ postHooks: [] }] } }, 'spec.hooks.resources[0].name', /a name for this hook set/],
    ['a misspelt field', { namespaceMappings: { a: 'b' } }, 'spec.namespaceMappings', /did you mean "namespaceMapping"/],
    [
      'a Velero field Stowage does not support',
      { scheduleName: 'daily' },
      'spec.scheduleName',
      /unknown field: give the backup by backupName/,
    ],
    [
      'a misspelt exec field',
      { hooks: { resources: [{ name: 'h', postHooks: [{ exec: { command: ['x'], timeout: '1m' } }] }] } },
      'spec.hooks.resources[0].postHooks[0].exec.timeout',
      /allowed here: container, command, onError, execTimeout/,
    ],
  ])('names the field for %s', (_name, fields, path, message) => {
    const problems = problemsOf({ spec: { backupName: 'b', ...fields } });
    const problem = problems.find((p) => p.path === path);
    expect(problem, JSON.stringify(problems)).toBeDefined();
    expect(problem?.message).toMatch(message);
  });

  it('refuses a request that is not an object, and one without spec', () => {
    expect(problemsOf('restore please')).toEqual([{ path: '', message: 'must be an object (a restore request: {name, spec})' }]);
    expect(problemsOf({ name: 'r' })).toEqual([{ path: 'spec', message: 'is required (the restore spec)' }]);
  });
});
