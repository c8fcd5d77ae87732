import { describe, expect, it } from 'vitest';
import { resolveRestoreHooks } from './restore-hooks.js';
import type { RestoreResourceHookSpec } from './restore-spec.schema.js';
import { pod } from './test-objects.js';

const P = 'post.hook.restore.velero.io/';
const I = 'init.hook.restore.velero.io/';

function hookSpec(overrides: Partial<RestoreResourceHookSpec>): RestoreResourceHookSpec {
  return {
    name: 'h',
    includedNamespaces: [],
    excludedNamespaces: [],
    includedResources: [],
    excludedResources: [],
    labelSelector: null,
    postHooks: [],
    ...overrides,
  };
}

const exec = (
  command: string[],
  extra: Partial<{ container: string | null; onError: 'Continue' | 'Fail'; waitForReady: boolean }> = {},
) => ({
  exec: { container: null, command, onError: 'Continue' as const, execTimeoutMs: 30_000, waitTimeoutMs: 0, waitForReady: false, ...extra },
});

const twoContainers = { containers: [{ name: 'postgres' }, { name: 'sidecar' }] };

describe('resolveRestoreHooks: exec hooks', () => {
  it('reads every annotation (Velero defaults otherwise)', () => {
    const restored = pod('shop', 'db', twoContainers, {
      annotations: {
        [`${P}command`]: '["/bin/bash", "-c", "psql < /backup/backup.sql"]',
        [`${P}container`]: 'sidecar',
        [`${P}on-error`]: 'Fail',
        [`${P}exec-timeout`]: '45s',
        [`${P}wait-timeout`]: '5m',
        [`${P}wait-for-ready`]: 'true',
      },
    });
    expect(resolveRestoreHooks(restored.object, { hooks: { resources: [] } })).toEqual({
      execHooks: [
        {
          source: 'annotation',
          specName: null,
          index: 0,
          container: 'sidecar',
          command: ['/bin/bash', '-c', 'psql < /backup/backup.sql'],
          onError: 'Fail',
          execTimeoutMs: 45_000,
          waitTimeoutMs: 300_000,
          waitForReady: true,
          invalid: null,
        },
      ],
      initContainers: [],
      warnings: [],
    });
  });

  it.each<
    [
      string,
      Record<string, string>,
      Partial<{
        container: string;
        command: string[];
        onError: string;
        execTimeoutMs: number;
        waitTimeoutMs: number;
        waitForReady: boolean;
      }>,
      string[],
    ]
  >([
    [
      'defaults: first container, Continue, 30s, no wait limit',
      { [`${P}command`]: 'date' },
      { container: 'postgres', command: ['date'], onError: 'Continue', execTimeoutMs: 30_000, waitTimeoutMs: 0, waitForReady: false },
      [],
    ],
    [
      'a bad on-error falls back to Continue with a warning',
      { [`${P}command`]: 'date', [`${P}on-error`]: 'Explode' },
      { onError: 'Continue' },
      [`${P}on-error`],
    ],
    [
      'a bad exec-timeout falls back to 30s with a warning',
      { [`${P}command`]: 'date', [`${P}exec-timeout`]: 'soon' },
      { execTimeoutMs: 30_000 },
      [`${P}exec-timeout`],
    ],
    [
      'an exec-timeout over the 30m cap on hook timeouts is clamped to it, with a warning',
      { [`${P}command`]: 'date', [`${P}exec-timeout`]: '4h' },
      { execTimeoutMs: 30 * 60_000 },
      [`${P}exec-timeout`],
    ],
    ['an exec-timeout at the cap is kept', { [`${P}command`]: 'date', [`${P}exec-timeout`]: '30m' }, { execTimeoutMs: 30 * 60_000 }, []],
    [
      'a bad wait-timeout means no limit, with a warning',
      { [`${P}command`]: 'date', [`${P}wait-timeout`]: '-5m' },
      { waitTimeoutMs: 0 },
      [`${P}wait-timeout`],
    ],
    ['wait-for-ready accepts Go booleans ("1")', { [`${P}command`]: 'date', [`${P}wait-for-ready`]: '1' }, { waitForReady: true }, []],
    [
      'a bad wait-for-ready is false with a warning',
      { [`${P}command`]: 'date', [`${P}wait-for-ready`]: 'maybe' },
      { waitForReady: false },
      [`${P}wait-for-ready`],
    ],
    ['a broken JSON command is one argument, with a warning', { [`${P}command`]: '["a", 1]' }, { command: ['["a", 1]'] }, [`${P}command`]],
  ])('%s', (_name, annotations, expected, warned) => {
    const result = resolveRestoreHooks(pod('shop', 'db', twoContainers, { annotations }).object, { hooks: { resources: [] } });
    expect(result.execHooks).toHaveLength(1);
    expect(result.execHooks[0]).toMatchObject(expected);
    expect(result.warnings.map((w) => w.annotation)).toEqual(warned);
  });

  it('the annotation hook is the only exec hook: spec hooks are not used for that pod (Velero docs)', () => {
    const spec = { hooks: { resources: [hookSpec({ postHooks: [exec(['from-spec'])] })] } };
    const annotated = pod('shop', 'db', twoContainers, { annotations: { [`${P}command`]: 'from-annotation' } });
    expect(resolveRestoreHooks(annotated.object, spec).execHooks.map((h) => h.command)).toEqual([['from-annotation']]);
    expect(resolveRestoreHooks(pod('shop', 'other', twoContainers).object, spec).execHooks.map((h) => h.command)).toEqual([['from-spec']]);
  });

  it('runs spec hooks of every applicable entry in spec order, with their index', () => {
    const spec = {
      hooks: {
        resources: [
          hookSpec({
            name: 'ready',
            postHooks: [exec(['pg_isready'], { container: 'postgres', onError: 'Fail' }), exec(['psql'], { container: 'postgres' })],
          }),
          hookSpec({ name: 'other-ns', includedNamespaces: ['media'], postHooks: [exec(['never'])] }),
          hookSpec({ name: 'side', labelSelector: { matchLabels: { app: 'db' } }, postHooks: [exec(['date'], { container: 'sidecar' })] }),
          hookSpec({ name: 'not-pods', includedResources: ['deployments'], postHooks: [exec(['never'])] }),
        ],
      },
    };
    const hooks = resolveRestoreHooks(pod('shop', 'db', twoContainers, { labels: { app: 'db' } }).object, spec).execHooks;
    expect(hooks.map((h) => [h.specName, h.index, h.container, h.command[0], h.onError])).toEqual([
      ['ready', 0, 'postgres', 'pg_isready', 'Fail'],
      ['ready', 1, 'postgres', 'psql', 'Continue'],
      ['side', 0, 'sidecar', 'date', 'Continue'],
    ]);
  });

  it('matches hook specs against the namespace the pod is restored into (Velero #4720)', () => {
    const spec = { hooks: { resources: [hookSpec({ includedNamespaces: ['shop-copy'], postHooks: [exec(['date'])] })] } };
    expect(resolveRestoreHooks(pod('shop-copy', 'db', twoContainers).object, spec).execHooks).toHaveLength(1);
    expect(resolveRestoreHooks(pod('shop', 'db', twoContainers).object, spec).execHooks).toHaveLength(0);
  });

  it('marks a hook whose container the pod lacks as invalid (recorded as failed, never run)', () => {
    const spec = { hooks: { resources: [hookSpec({ postHooks: [exec(['date'], { container: 'missing' })] })] } };
    const [hook] = resolveRestoreHooks(pod('shop', 'db', twoContainers).object, spec).execHooks;
    expect(hook?.invalid?.code).toBe('CORE_HOOK_CONTAINER_NOT_FOUND');
    expect(hook?.invalid?.message).toMatch(/has no container "missing" \(it has "postgres", "sidecar"\)/);
  });
});

describe('resolveRestoreHooks: init hooks', () => {
  it('builds the init container from annotations (the annotation wins over the spec)', () => {
    const spec = { hooks: { resources: [hookSpec({ postHooks: [{ init: { initContainers: [{ name: 'from-spec', image: 'x' }] } }] })] } };
    const annotated = pod('shop', 'db', twoContainers, {
      annotations: {
        [`${I}container-image`]: 'alpine:latest',
        [`${I}container-name`]: 'restore-hook',
        [`${I}command`]: '["/bin/ash", "-c", "date"]',
      },
    });
    expect(resolveRestoreHooks(annotated.object, spec).initContainers).toEqual([
      { name: 'restore-hook', image: 'alpine:latest', command: ['/bin/ash', '-c', 'date'] },
    ]);
  });

  it('names an annotation init container without a name deterministically and keeps the image entrypoint without a command', () => {
    const annotated = pod('shop', 'db', twoContainers, { annotations: { [`${I}container-image`]: 'alpine' } });
    expect(resolveRestoreHooks(annotated.object, { hooks: { resources: [] } }).initContainers).toEqual([
      { name: 'stowage-restore-init', image: 'alpine' },
    ]);
  });

  it('warns and adds nothing when the image is missing', () => {
    const annotated = pod('shop', 'db', twoContainers, { annotations: { [`${I}container-name`]: 'x' } });
    const result = resolveRestoreHooks(annotated.object, { hooks: { resources: [] } });
    expect(result.initContainers).toEqual([]);
    expect(result.warnings.map((w) => w.annotation)).toEqual([`${I}container-image`]);
  });

  it('takes init containers of every applicable spec entry in order', () => {
    const spec = {
      hooks: {
        resources: [
          hookSpec({
            postHooks: [
              {
                init: {
                  initContainers: [
                    { name: 'a', image: 'x' },
                    { name: 'b', image: 'x' },
                  ],
                },
              },
              exec(['date']),
            ],
          }),
          hookSpec({ includedNamespaces: ['media'], postHooks: [{ init: { initContainers: [{ name: 'never', image: 'x' }] } }] }),
          hookSpec({
            postHooks: [{ init: { initContainers: [{ name: 'c', image: 'x', volumeMounts: [{ name: 'data', mountPath: '/d' }] }] } }],
          }),
        ],
      },
    };
    const result = resolveRestoreHooks(pod('shop', 'db', twoContainers).object, spec);
    expect(result.initContainers.map((c) => c.name)).toEqual(['a', 'b', 'c']);
    expect(result.initContainers[2]).toEqual({ name: 'c', image: 'x', volumeMounts: [{ name: 'data', mountPath: '/d' }] });
    expect(result.execHooks.map((h) => h.command)).toEqual([['date']]);
  });
});
