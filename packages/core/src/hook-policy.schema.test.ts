import { describe, expect, it } from 'vitest';
import { backupHookTargets } from './backup-hooks.js';
import type { BackupLevelHook } from './backup-spec.js';
import { validateBackupRequest } from './backup-spec.schema.js';
import { resolvePodHooks } from './hooks.js';
import type { Pod } from './kube-types.js';

function problemsOf(request: unknown) {
  const result = validateBackupRequest(request);
  if (result.ok) throw new Error('expected validation to fail');
  return result.problems;
}

describe('hook policy fields: retries, executionPolicy, FailBlock', () => {
  it('keeps retries (backoff in ms, default 1s), executionPolicy on post hooks and FailBlock on pre hooks', () => {
    const result = validateBackupRequest({
      spec: {
        hooks: {
          resources: [
            {
              name: 'db',
              pre: [{ exec: { command: ['/bin/freeze'], onError: 'FailBlock', retries: { max: 2, backoff: '250ms' } } }],
              post: [
                { exec: { command: ['/bin/thaw'], executionPolicy: 'OnSuccess', retries: { max: 1 } } },
                { exec: { command: ['/bin/alert'], executionPolicy: 'OnFailure', retries: { max: 0 } } },
              ],
            },
          ],
        },
      },
    });
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    const [hookSpec] = result.value.hooks.resources;
    expect(hookSpec?.pre[0]?.exec).toMatchObject({ onError: 'FailBlock', retries: { max: 2, backoffMs: 250 } });
    expect(hookSpec?.post[0]?.exec).toMatchObject({ executionPolicy: 'OnSuccess', retries: { max: 1, backoffMs: 1000 } });
    // max: 0 is no retry at all: nothing stored.
    expect(hookSpec?.post[1]?.exec.retries).toBeUndefined();
    expect(hookSpec?.post[1]?.exec.executionPolicy).toBe('OnFailure');
  });

  it('reports every problem at once, each naming its field', () => {
    const problems = problemsOf({
      spec: {
        hooks: {
          resources: [
            {
              name: 'db',
              pre: [{ exec: { command: ['/bin/freeze'], executionPolicy: 'OnSuccess', retries: { max: 11, backoff: 'soon' } } }],
              post: [{ exec: { command: ['/bin/thaw'], onError: 'FailBlock', executionPolicy: 'Sometimes', retries: { tries: 2 } } }],
            },
          ],
        },
      },
    });
    const paths = problems.map((p) => p.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'spec.hooks.resources[0].pre[0].exec.executionPolicy',
        'spec.hooks.resources[0].pre[0].exec.retries.max',
        'spec.hooks.resources[0].pre[0].exec.retries.backoff',
        'spec.hooks.resources[0].post[0].exec.onError',
        'spec.hooks.resources[0].post[0].exec.executionPolicy',
        'spec.hooks.resources[0].post[0].exec.retries.tries',
        'spec.hooks.resources[0].post[0].exec.retries.max',
      ]),
    );
    const at = (path: string) => problems.filter((p) => p.path === path).map((p) => p.message);
    expect(at('spec.hooks.resources[0].pre[0].exec.executionPolicy')).toEqual([
      'applies to post hooks only (a pre hook runs before its block has any PVB)',
    ]);
    expect(at('spec.hooks.resources[0].post[0].exec.onError')[0]).toContain('FailBlock applies to pre hooks only');
    expect(at('spec.hooks.resources[0].post[0].exec.executionPolicy')[0]).toContain('"Always", "OnSuccess" or "OnFailure"');
    expect(at('spec.hooks.resources[0].pre[0].exec.retries.max')[0]).toContain('at most 10');
  });

  it('a resolved spec hook carries retries, and executionPolicy only in the post phase', () => {
    const result = validateBackupRequest({
      spec: {
        hooks: {
          resources: [
            {
              name: 'db',
              pre: [{ exec: { command: ['/bin/freeze'], retries: { max: 3, backoff: '0s' } } }],
              post: [{ exec: { command: ['/bin/thaw'], executionPolicy: 'OnFailure' } }],
            },
          ],
        },
      },
    });
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    const pod = podNamed('db-0', {});
    const pre = resolvePodHooks(pod, result.value, 'pre');
    const post = resolvePodHooks(pod, result.value, 'post');
    expect(pre.hooks[0]).toMatchObject({ retries: { max: 3, backoffMs: 0 } });
    expect(pre.hooks[0]?.executionPolicy).toBeUndefined();
    expect(post.hooks[0]).toMatchObject({ executionPolicy: 'OnFailure' });
  });
});

describe('backup-level hooks: spec.hooks.backup', () => {
  it('fills defaults: a name from phase and position, mode all, onError Fail, 30s', () => {
    const result = validateBackupRequest({
      spec: {
        hooks: {
          backup: {
            pre: [{ namespace: 'flux-system', labelSelector: { matchLabels: { app: 'flux' } }, command: ['flux', 'suspend', '--all'] }],
            post: [
              { name: 'resume', namespace: 'flux-system', mode: 'one', container: 'cli', command: ['flux', 'resume'], onError: 'Continue' },
            ],
          },
        },
      },
    });
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.value.hooks.backup).toEqual({
      pre: [
        {
          name: 'backup-pre-0',
          namespace: 'flux-system',
          labelSelector: { matchLabels: { app: 'flux' } },
          container: null,
          mode: 'all',
          command: ['flux', 'suspend', '--all'],
          onError: 'Fail',
          timeoutMs: 30_000,
        },
      ],
      post: [
        {
          name: 'resume',
          namespace: 'flux-system',
          labelSelector: null,
          container: 'cli',
          mode: 'one',
          command: ['flux', 'resume'],
          onError: 'Continue',
          timeoutMs: 30_000,
        },
      ],
    });
    // A spec without backup hooks has none (and stores none).
    const plain = validateBackupRequest({ spec: {} });
    expect(plain.ok && plain.value.hooks.backup).toBeUndefined();
  });

  it('reports every problem of a backup hook at once, naming its field', () => {
    const problems = problemsOf({
      spec: {
        hooks: {
          backup: {
            pre: [{ labelSelector: { matchLabels: { 'bad key!': 'x' } }, mode: 'some', command: [], onError: 'FailBlock', timout: '1s' }],
            post: [{ namespace: 'Flux_System', command: ['x'], retries: { max: -1 } }],
            during: [],
          },
        },
      },
    });
    const paths = problems.map((p) => p.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'spec.hooks.backup.during',
        'spec.hooks.backup.pre[0].namespace',
        'spec.hooks.backup.pre[0].mode',
        'spec.hooks.backup.pre[0].command',
        'spec.hooks.backup.pre[0].onError',
        'spec.hooks.backup.pre[0].timout',
        'spec.hooks.backup.post[0].namespace',
        'spec.hooks.backup.post[0].retries.max',
      ]),
    );
    expect(paths.some((p) => p.startsWith('spec.hooks.backup.pre[0].labelSelector'))).toBe(true);
    const at = (path: string) => problems.filter((p) => p.path === path).map((p) => p.message);
    expect(at('spec.hooks.backup.pre[0].onError')[0]).toContain('FailBlock applies to pod pre hooks only');
    expect(at('spec.hooks.backup.pre[0].timout')[0]).toContain('did you mean "timeout"');
    expect(at('spec.hooks.backup.pre[0].namespace')[0]).toContain('is required');
  });
});

function podNamed(name: string, labels: Record<string, string>, phase = 'Running', namespace = 'flux-system'): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels, uid: `uid-${name}` },
    spec: { containers: [{ name: 'app' }, { name: 'cli' }] },
    status: { phase },
  } as Pod;
}

describe('backupHookTargets', () => {
  const hook = (over: Partial<BackupLevelHook> = {}): BackupLevelHook => ({
    name: 'h',
    namespace: 'flux-system',
    labelSelector: { matchLabels: { app: 'flux' } },
    container: null,
    mode: 'all',
    command: ['x'],
    onError: 'Fail',
    timeoutMs: 30_000,
    ...over,
  });
  const pods = [
    podNamed('flux-b', { app: 'flux' }),
    podNamed('flux-a', { app: 'flux' }),
    podNamed('flux-done', { app: 'flux' }, 'Succeeded'),
    podNamed('other', { app: 'other' }),
    podNamed('flux-elsewhere', { app: 'flux' }, 'Running', 'default'),
  ];

  it('runs in every Running pod of the namespace matching the selector, by name; mode one takes the first', () => {
    expect(backupHookTargets(hook(), pods).map((t) => t.name)).toEqual(['flux-a', 'flux-b']);
    expect(backupHookTargets(hook({ mode: 'one' }), pods).map((t) => t.name)).toEqual(['flux-a']);
    expect(backupHookTargets(hook({ labelSelector: null }), pods).map((t) => t.name)).toEqual(['flux-a', 'flux-b', 'other']);
    expect(backupHookTargets(hook({ labelSelector: { matchLabels: { app: 'none' } } }), pods)).toEqual([]);
  });

  it('uses the first container by default and marks a missing container invalid', () => {
    expect(backupHookTargets(hook({ mode: 'one' }), pods)[0]).toMatchObject({ container: 'app', invalid: null });
    expect(backupHookTargets(hook({ mode: 'one', container: 'cli' }), pods)[0]).toMatchObject({ container: 'cli', invalid: null });
    expect(backupHookTargets(hook({ mode: 'one', container: 'nope' }), pods)[0]?.invalid?.message).toContain('has no container "nope"');
  });
});
