import { describe, expect, it } from 'vitest';
import { validateBackupRequest } from './backup-spec.schema.js';
import { validateRestoreRequest } from './restore/restore-spec.schema.js';
import { validateScheduleRequest } from './schedule.schema.js';
import { DEFAULT_SPEC_LIMITS as L, type SpecKind, type SpecLimits, specLimitProblems } from './spec-limits.js';

const names = (n: number, prefix = 'ns') => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
const hook = (command: string[] = ['/bin/true']) => ({ exec: { command } });
const hooks = (n: number) => Array.from({ length: n }, () => hook());
const selector = (terms: number) => ({ matchLabels: Object.fromEntries(names(terms, 'k').map((k) => [k, 'v'])) });
const labels = (n: number) => Object.fromEntries(names(n, 'k').map((k) => [k, 'v']));

interface Bound {
  /** What the limit is called in the message. */
  limit: keyof SpecLimits;
  kind: SpecKind;
  /** The field the problem names. */
  path: string;
  /** A request whose bounded list or size is `n`. */
  request: (n: number) => unknown;
  /** The value at the limit (its size). */
  at: number;
}

const backup = (spec: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ name: 'b', spec, ...extra });
const restore = (spec: Record<string, unknown>) => ({ name: 'r', spec: { backupName: 'b', ...spec } });

const BOUNDS: Bound[] = [
  {
    limit: 'namespaces',
    kind: 'backup',
    path: 'spec.includedNamespaces',
    at: L.namespaces,
    request: (n) => backup({ includedNamespaces: names(n) }),
  },
  {
    limit: 'namespaces',
    kind: 'backup',
    path: 'spec.excludedNamespaces',
    at: L.namespaces,
    request: (n) => backup({ excludedNamespaces: names(n) }),
  },
  {
    limit: 'resources',
    kind: 'backup',
    path: 'spec.includedResources',
    at: L.resources,
    request: (n) => backup({ includedResources: names(n, 'r') }),
  },
  {
    limit: 'resources',
    kind: 'backup',
    path: 'spec.excludedResources',
    at: L.resources,
    request: (n) => backup({ excludedResources: names(n, 'r') }),
  },
  {
    limit: 'resources',
    kind: 'backup',
    path: 'spec.includedNamespaceScopedResources',
    at: L.resources,
    request: (n) => backup({ includedNamespaceScopedResources: names(n, 'r') }),
  },
  {
    limit: 'orLabelSelectors',
    kind: 'backup',
    path: 'spec.orLabelSelectors',
    at: L.orLabelSelectors,
    request: (n) => backup({ orLabelSelectors: Array.from({ length: n }, () => selector(1)) }),
  },
  {
    limit: 'labelSelectorTerms',
    kind: 'backup',
    path: 'spec.labelSelector',
    at: L.labelSelectorTerms,
    request: (n) => backup({ labelSelector: selector(n) }),
  },
  {
    limit: 'labelSelectorTerms',
    kind: 'backup',
    path: 'spec.labelSelector.matchExpressions[0].values',
    at: L.labelSelectorTerms,
    request: (n) => backup({ labelSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: names(n, 'v') }] } }),
  },
  {
    limit: 'hookSets',
    kind: 'backup',
    path: 'spec.hooks.resources',
    at: L.hookSets,
    request: (n) => backup({ hooks: { resources: names(n, 'set').map((name) => ({ name })) } }),
  },
  {
    limit: 'namespaces',
    kind: 'backup',
    path: 'spec.hooks.resources[0].includedNamespaces',
    at: L.namespaces,
    request: (n) => backup({ hooks: { resources: [{ name: 's', includedNamespaces: names(n) }] } }),
  },
  {
    limit: 'hooksPerList',
    kind: 'backup',
    path: 'spec.hooks.resources[0].pre',
    at: L.hooksPerList,
    request: (n) => backup({ hooks: { resources: [{ name: 's', pre: hooks(n) }] } }),
  },
  {
    limit: 'hooksPerList',
    kind: 'backup',
    path: 'spec.hooks.backup.post',
    at: L.hooksPerList,
    request: (n) => backup({ hooks: { backup: { post: Array.from({ length: n }, () => ({ namespace: 'ns', command: ['/bin/true'] })) } } }),
  },
  {
    limit: 'hooks',
    kind: 'backup',
    path: 'spec.hooks',
    at: L.hooks,
    // hook sets of hooksPerList pre hooks each, the last one short, so only the total is over
    request: (n) =>
      backup({
        hooks: {
          resources: Array.from({ length: Math.ceil(n / L.hooksPerList) }, (_, i) => ({
            name: `s${i}`,
            pre: hooks(Math.min(L.hooksPerList, n - i * L.hooksPerList)),
          })),
        },
      }),
  },
  {
    limit: 'argvBytes',
    kind: 'backup',
    path: 'spec.hooks.resources[0].post[0].exec.command',
    at: L.argvBytes,
    request: (n) => backup({ hooks: { resources: [{ name: 's', post: [hook(['/bin/echo', 'x'.repeat(n - '/bin/echo'.length)])] }] } }),
  },
  {
    limit: 'maxHookTimeoutMs',
    kind: 'backup',
    path: 'spec.hooks.resources[0].pre[0].exec.timeout',
    at: L.maxHookTimeoutMs / 1000,
    request: (n) => backup({ hooks: { resources: [{ name: 's', pre: [{ exec: { command: ['/bin/true'], timeout: `${n}s` } }] }] } }),
  },
  {
    limit: 'maxHookTimeoutMs',
    kind: 'backup',
    path: 'spec.hooks.backup.pre[0].timeout',
    at: L.maxHookTimeoutMs / 1000,
    request: (n) => backup({ hooks: { backup: { pre: [{ namespace: 'ns', command: ['/bin/true'], timeout: `${n}s` }] } } }),
  },
  {
    limit: 'volumePolicies',
    kind: 'backup',
    path: 'spec.resourcePolicy.volumePolicies',
    at: L.volumePolicies,
    request: (n) =>
      backup({ resourcePolicy: { volumePolicies: Array.from({ length: n }, () => ({ conditions: {}, action: { type: 'skip' } })) } }),
  },
  {
    limit: 'policyEntries',
    kind: 'backup',
    path: 'spec.resourcePolicy.volumePolicies[0].conditions.storageClass',
    at: L.policyEntries,
    request: (n) =>
      backup({ resourcePolicy: { volumePolicies: [{ conditions: { storageClass: names(n, 'sc') }, action: { type: 'skip' } }] } }),
  },
  {
    limit: 'policyEntries',
    kind: 'backup',
    path: 'spec.resourcePolicy.volumePolicies[0].conditions.pvcLabels',
    at: L.policyEntries,
    request: (n) => backup({ resourcePolicy: { volumePolicies: [{ conditions: { pvcLabels: labels(n) }, action: { type: 'skip' } }] } }),
  },
  { limit: 'metadataEntries', kind: 'backup', path: 'labels', at: L.metadataEntries, request: (n) => backup({}, { labels: labels(n) }) },
  {
    limit: 'metadataEntries',
    kind: 'backup',
    path: 'annotations',
    at: L.metadataEntries,
    request: (n) => backup({}, { annotations: labels(n) }),
  },
  {
    limit: 'namespaces',
    kind: 'schedule',
    path: 'spec.template.includedNamespaces',
    at: L.namespaces,
    request: (n) => ({ name: 's', spec: { schedule: '@daily', template: { includedNamespaces: names(n) } } }),
  },
  {
    limit: 'hooks',
    kind: 'schedule',
    path: 'spec.template.hooks',
    at: L.hooks,
    request: (n) => ({
      name: 's',
      spec: {
        schedule: '@daily',
        template: {
          hooks: {
            resources: Array.from({ length: Math.ceil(n / L.hooksPerList) }, (_, i) => ({
              name: `s${i}`,
              post: hooks(Math.min(L.hooksPerList, n - i * L.hooksPerList)),
            })),
          },
        },
      },
    }),
  },
  {
    limit: 'namespaces',
    kind: 'restore',
    path: 'spec.includedNamespaces',
    at: L.namespaces,
    request: (n) => restore({ includedNamespaces: names(n) }),
  },
  {
    limit: 'namespaces',
    kind: 'restore',
    path: 'spec.namespaceMapping',
    at: L.namespaces,
    request: (n) => restore({ namespaceMapping: Object.fromEntries(names(n).map((ns) => [ns, `${ns}-copy`])) }),
  },
  {
    limit: 'hooksPerList',
    kind: 'restore',
    path: 'spec.hooks.resources[0].postHooks',
    at: L.hooksPerList,
    request: (n) => restore({ hooks: { resources: [{ name: 's', postHooks: hooks(n) }] } }),
  },
  {
    limit: 'hooks',
    kind: 'restore',
    path: 'spec.hooks',
    at: L.hooks,
    request: (n) =>
      restore({
        hooks: {
          resources: Array.from({ length: Math.ceil(n / L.hooksPerList) }, (_, i) => ({
            name: `s${i}`,
            postHooks: hooks(Math.min(L.hooksPerList, n - i * L.hooksPerList)),
          })),
        },
      }),
  },
  {
    limit: 'argvBytes',
    kind: 'restore',
    path: 'spec.hooks.resources[0].postHooks[0].exec.command',
    at: L.argvBytes,
    request: (n) =>
      restore({ hooks: { resources: [{ name: 's', postHooks: [hook(['/bin/echo', 'x'.repeat(n - '/bin/echo'.length)])] }] } }),
  },
  {
    limit: 'maxHookTimeoutMs',
    kind: 'restore',
    path: 'spec.hooks.resources[0].postHooks[0].exec.execTimeout',
    at: L.maxHookTimeoutMs / 1000,
    request: (n) =>
      restore({ hooks: { resources: [{ name: 's', postHooks: [{ exec: { command: ['/bin/true'], execTimeout: `${n}s` } }] }] } }),
  },
];

const validate = (kind: SpecKind, request: unknown) =>
  kind === 'backup'
    ? validateBackupRequest(request)
    : kind === 'restore'
      ? validateRestoreRequest(request)
      : validateScheduleRequest(request);

describe('spec limits', () => {
  for (const bound of BOUNDS) {
    it(`${bound.kind} ${bound.path}: over ${bound.limit} is a problem naming the field and the limit; at it, the request is valid`, () => {
      const over = specLimitProblems(bound.kind, bound.request(bound.at + 1));
      expect(over).toHaveLength(1);
      expect(over[0]?.path).toBe(bound.path);
      expect(over[0]?.message).toContain(`limit: ${bound.limit}`);
      const limitText = bound.limit === 'maxHookTimeoutMs' ? '30m' : String(bound.at);
      expect(over[0]?.message).toContain(limitText);

      const atLimit = bound.request(bound.at);
      expect(specLimitProblems(bound.kind, atLimit)).toEqual([]);
      const validated = validate(bound.kind, atLimit);
      expect(validated.ok ? [] : validated.problems).toEqual([]);
    });
  }

  it('an operator may raise a limit: the same request then keeps to it', () => {
    const request = backup({ includedNamespaces: names(L.namespaces + 1) });
    expect(specLimitProblems('backup', request, { ...L, namespaces: L.namespaces + 1 })).toEqual([]);
  });

  it('reads hostile shapes without throwing: wrong types are left to validation', () => {
    for (const request of [null, 42, 'x', [], { spec: null }, { spec: { hooks: 'no', includedNamespaces: 'ns' } }]) {
      expect(specLimitProblems('backup', request)).toEqual([]);
      expect(specLimitProblems('restore', request)).toEqual([]);
      expect(specLimitProblems('schedule', request)).toEqual([]);
    }
  });
});
