import { describe, expect, it } from 'vitest';
import { pod, specOf } from '../test/builders.js';
import { parseHookCommand, type ResolvedHook, resolvePodHooks } from './hooks.js';

const specHooks = specOf({
  hooks: {
    resources: [
      {
        name: 'freeze-db',
        includedNamespaces: ['prod-*'],
        labelSelector: { matchLabels: { app: 'db' } },
        pre: [
          { exec: { command: ['fsfreeze', '-f', '/data'], onError: 'Fail' } },
          { exec: { container: 'sidecar', command: ['sync'], timeout: '10s' } },
        ],
        post: [{ exec: { command: ['fsfreeze', '-u', '/data'], onError: 'Continue' } }],
      },
      { name: 'everyone', pre: [{ exec: { command: ['echo', 'hi'] } }] },
      { name: 'not-pods', includedResources: ['deployments.apps'], pre: [{ exec: { command: ['never'] } }] },
      { name: 'excluded-ns', excludedNamespaces: ['prod-eu'], pre: [{ exec: { command: ['never-in-prod-eu'] } }] },
    ],
  },
});

const dbPod = (annotations?: Record<string, string>, containers = ['db', 'sidecar'], phase = 'Running') =>
  pod('db-0', { namespace: 'prod-eu', labels: { app: 'db' }, containers, phase, ...(annotations ? { annotations } : {}) });

function summary(hooks: ResolvedHook[]) {
  return hooks.map((hook) => ({
    source: hook.source,
    specName: hook.specName,
    index: hook.index,
    container: hook.container,
    command: hook.command.join(' '),
  }));
}

describe('resolvePodHooks: spec hooks', () => {
  it('applies matching specs in spec order, each list in order, with defaults', () => {
    const result = resolvePodHooks(dbPod(), specHooks, 'pre');
    expect(result.status).toBe('resolved');
    expect(summary(result.hooks)).toEqual([
      { source: 'spec', specName: 'freeze-db', index: 0, container: 'db', command: 'fsfreeze -f /data' },
      { source: 'spec', specName: 'freeze-db', index: 1, container: 'sidecar', command: 'sync' },
      { source: 'spec', specName: 'everyone', index: 0, container: 'db', command: 'echo hi' },
    ]);
    expect(result.hooks.map((hook) => [hook.onError, hook.timeoutMs])).toEqual([
      ['Fail', 30_000],
      ['Fail', 10_000],
      ['Fail', 30_000],
    ]);
  });

  it.each<[string, ReturnType<typeof pod>, string[]]>([
    ['label mismatch', pod('web', { namespace: 'prod-eu', labels: { app: 'web' } }), ['everyone']],
    ['namespace mismatch', pod('db', { namespace: 'dev', labels: { app: 'db' } }), ['everyone', 'excluded-ns']],
  ])('matches by namespace, resource and labels: %s', (_case, target, specNames) => {
    expect(resolvePodHooks(target, specHooks, 'pre').hooks.map((hook) => hook.specName)).toEqual(specNames);
  });

  it('resolves the post phase separately', () => {
    expect(summary(resolvePodHooks(dbPod(), specHooks, 'post').hooks)).toEqual([
      { source: 'spec', specName: 'freeze-db', index: 0, container: 'db', command: 'fsfreeze -u /data' },
    ]);
  });

  it('marks a hook on a missing container invalid instead of dropping it', () => {
    const result = resolvePodHooks(dbPod(undefined, ['db']), specHooks, 'pre');
    const invalid = result.hooks.filter((hook) => hook.invalid !== null);
    expect(invalid).toHaveLength(1);
    expect(invalid[0]).toMatchObject({
      specName: 'freeze-db',
      index: 1,
      container: 'sidecar',
      invalid: { code: 'CORE_HOOK_CONTAINER_NOT_FOUND' },
    });
    expect(invalid[0]?.invalid?.message).toContain('has no container "sidecar" (it has "db")');
    expect(result.hooks.filter((hook) => hook.invalid === null)).toHaveLength(2);
  });

  it('lets a hook target a native sidecar', () => {
    const target = dbPod(undefined, ['db']);
    target.spec.initContainers = [{ name: 'sidecar', restartPolicy: 'Always' }];
    expect(resolvePodHooks(target, specHooks, 'pre').hooks.every((hook) => hook.invalid === null)).toBe(true);
  });

  it('reports a pod without containers', () => {
    const result = resolvePodHooks(
      pod('empty', { containers: [] }),
      specOf({ hooks: { resources: [{ name: 'x', pre: [{ exec: { command: ['x'] } }] }] } }),
      'pre',
    );
    expect(result.hooks[0]?.invalid?.code).toBe('CORE_HOOK_POD_HAS_NO_CONTAINERS');
  });

  it.each(['Succeeded', 'Failed'])('skips pods in phase %s', (phase) => {
    const result = resolvePodHooks(dbPod({ 'pre.hook.backup.velero.io/command': 'x' }, ['db'], phase), specHooks, 'pre');
    expect(result).toMatchObject({ status: 'skipped', code: 'CORE_HOOK_POD_FINISHED', hooks: [] });
  });

  it('still resolves hooks for a Pending pod (the executor decides)', () => {
    expect(resolvePodHooks(dbPod(undefined, ['db', 'sidecar'], 'Pending'), specHooks, 'pre').hooks).toHaveLength(3);
  });
});

describe('resolvePodHooks: annotations', () => {
  it('replaces the spec hooks for that phase only', () => {
    const target = dbPod({
      'pre.hook.backup.velero.io/command': '["/bin/sh", "-c", "flush"]',
      'pre.hook.backup.velero.io/container': 'sidecar',
    });
    const pre = resolvePodHooks(target, specHooks, 'pre');
    expect(pre.hooks).toEqual([
      {
        phase: 'pre',
        source: 'annotation',
        specName: null,
        index: 0,
        container: 'sidecar',
        command: ['/bin/sh', '-c', 'flush'],
        onError: 'Fail',
        timeoutMs: 30_000,
        invalid: null,
      },
    ]);
    expect(resolvePodHooks(target, specHooks, 'post').hooks.map((hook) => hook.source)).toEqual(['spec']);
  });

  it('reads on-error and timeout', () => {
    const target = dbPod({
      'post.hook.backup.velero.io/command': 'unfreeze',
      'post.hook.backup.velero.io/on-error': 'Continue',
      'post.hook.backup.velero.io/timeout': '2m',
    });
    expect(resolvePodHooks(target, specHooks, 'post').hooks[0]).toMatchObject({
      command: ['unfreeze'],
      onError: 'Continue',
      timeoutMs: 120_000,
      container: 'db',
    });
  });

  it.each<[string, Record<string, string>, Partial<ResolvedHook>, string]>([
    ['a bad timeout', { 'pre.hook.backup.velero.io/timeout': 'abc' }, { timeoutMs: 30_000 }, 'pre.hook.backup.velero.io/timeout'],
    ['a bad on-error', { 'pre.hook.backup.velero.io/on-error': 'Maybe' }, { onError: 'Fail' }, 'pre.hook.backup.velero.io/on-error'],
    [
      'a timeout over the 30m cap',
      { 'pre.hook.backup.velero.io/timeout': '5h' },
      { timeoutMs: 30 * 60_000 },
      'pre.hook.backup.velero.io/timeout',
    ],
    [
      'a broken JSON command',
      { 'pre.hook.backup.velero.io/command': '["a", ' },
      { command: ['["a", '] },
      'pre.hook.backup.velero.io/command',
    ],
  ])('turns %s into a warning and uses the default', (_case, extra, expected, annotation) => {
    const result = resolvePodHooks(dbPod({ 'pre.hook.backup.velero.io/command': 'x', ...extra }), specHooks, 'pre');
    expect(result.hooks[0]).toMatchObject(expected);
    expect(result.warnings).toHaveLength(1);
    expect(result.warnings[0]).toMatchObject({ code: 'CORE_HOOK_ANNOTATION_INVALID', annotation });
  });

  it("holds a timeout annotation to the operator's cap: at it as asked, over it clamped with a warning naming the limit", () => {
    const withTimeout = (timeout: string) =>
      dbPod({ 'pre.hook.backup.velero.io/command': 'x', 'pre.hook.backup.velero.io/timeout': timeout });
    const atCap = resolvePodHooks(withTimeout('30m'), specHooks, 'pre');
    expect(atCap.hooks[0]?.timeoutMs).toBe(30 * 60_000);
    expect(atCap.warnings).toEqual([]);
    const over = resolvePodHooks(withTimeout('2h'), specHooks, 'pre', 60 * 60_000);
    expect(over.hooks[0]?.timeoutMs).toBe(60 * 60_000);
    expect(over.warnings).toEqual([
      expect.objectContaining({ annotation: 'pre.hook.backup.velero.io/timeout', message: expect.stringContaining('1h0m0s limit') }),
    ]);
    // A raised cap lets a longer one through, never past Velero's 4h.
    expect(resolvePodHooks(withTimeout('2h'), specHooks, 'pre', 3 * 3_600_000).hooks[0]?.timeoutMs).toBe(2 * 3_600_000);
    expect(resolvePodHooks(withTimeout('9h'), specHooks, 'pre', 10 * 3_600_000).hooks[0]?.timeoutMs).toBe(4 * 3_600_000);
  });

  it('marks an annotation hook on a missing container invalid', () => {
    const result = resolvePodHooks(
      dbPod({ 'pre.hook.backup.velero.io/command': 'x', 'pre.hook.backup.velero.io/container': 'ghost' }),
      specHooks,
      'pre',
    );
    expect(result.hooks[0]?.invalid?.code).toBe('CORE_HOOK_CONTAINER_NOT_FOUND');
  });

  it('uses the legacy un-prefixed keys as the pre hook when there is no pre command', () => {
    const target = dbPod({ 'hook.backup.velero.io/command': '["legacy"]', 'hook.backup.velero.io/container': 'sidecar' });
    expect(resolvePodHooks(target, specHooks, 'pre').hooks[0]).toMatchObject({
      source: 'annotation',
      command: ['legacy'],
      container: 'sidecar',
    });
    expect(resolvePodHooks(target, specHooks, 'post').hooks.every((hook) => hook.source === 'spec')).toBe(true);
  });

  it('prefers the pre. command over the legacy one', () => {
    const target = dbPod({ 'hook.backup.velero.io/command': 'legacy', 'pre.hook.backup.velero.io/command': 'modern' });
    expect(resolvePodHooks(target, specHooks, 'pre').hooks[0]?.command).toEqual(['modern']);
  });

  it('ignores an empty command annotation (spec hooks apply)', () => {
    expect(resolvePodHooks(dbPod({ 'pre.hook.backup.velero.io/command': '' }), specHooks, 'pre').hooks[0]?.source).toBe('spec');
  });
});

describe('parseHookCommand', () => {
  it.each<[string, string[]]>([
    ['["/bin/sh","-c","echo a && echo b"]', ['/bin/sh', '-c', 'echo a && echo b']],
    ['/usr/bin/flush --all', ['/usr/bin/flush --all']],
    ['[1, 2]', ['[1, 2]']],
  ])('%j → %j', (value, command) => {
    expect(parseHookCommand(value).command).toEqual(command);
  });
});
