import { validateRestoreRequest } from '@stowage/core';
import { type RunningWorkers, startWorkers, submitBackup, submitRestore } from '@stowage/pipeline';
import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, namespace, node, pod } from './support/fixtures.js';
import { BACKUP_AND_RESTORE_QUEUES, type Harness, startHarness, waitFor, waitForBackupEnd, waitForRestoreEnd } from './support/harness.js';

const ALL_QUEUES = BACKUP_AND_RESTORE_QUEUES;
const FAILS = ['/bin/migrate', '--check'];
const THEN = ['/bin/warm-cache'];
const objects = [
  node('node-a'),
  namespace('shop'),
  pod({ name: 'app-0', exec: { '*': { rules: [{ command: FAILS, exitCode: 3, stderr: 'schema mismatch' }] } } }),
];

describe('post-restore exec hooks: a failing hook with onError Fail vs Continue', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: ['node-a'] });
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES });
    await submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name: 'bk1', spec: backupSpec() });
    expect(await waitForBackupEnd(h.deps.state, 'bk1')).toBe('Completed');
  });
  afterAll(async () => {
    await workers?.close();
    await h?.close();
    await redisHandle?.stop();
  });

  const restoreWithHooks = async (name: string, onError: 'Fail' | 'Continue') => {
    await h.kube.core.deleteNamespace({ name: 'shop' }).catch(() => undefined);
    await waitFor('shop gone', async () => ((await h.kube.core.readNamespace({ name: 'shop' }).catch(() => undefined)) ? undefined : true));
    const validation = validateRestoreRequest({
      name,
      spec: {
        backupName: 'bk1',
        hooks: {
          resources: [
            {
              name: 'after',
              includedNamespaces: ['shop'],
              postHooks: [{ exec: { command: FAILS, onError } }, { exec: { command: THEN } }],
            },
          ],
        },
      },
    });
    if (!validation.ok) throw new Error(JSON.stringify(validation.problems));
    await submitRestore({ restores: h.deps.restores!, connection: h.redis, queuePrefix: h.queuePrefix }, { name, spec: validation.value });
    // Read from storage: once archived, Redis keeps only the restore's record and counters.
    const ended = await waitForRestoreEnd(h.deps.restores!, h.deps.storage, name);
    return { phase: ended.phase, runs: ended.hookRuns, counters: ended.counters };
  };

  it('onError Fail: the failing hook is recorded with its exit code and stderr, the later hook is skipped; PartiallyFailed', async () => {
    const { phase, runs, counters } = await restoreWithHooks('rs-fail', 'Fail');
    expect(phase).toBe('PartiallyFailed');
    expect(runs.map((r) => [r.command.join(' '), r.outcome, r.exitCode])).toEqual([
      [FAILS.join(' '), 'exited', 3],
      [THEN.join(' '), 'skipped', undefined],
    ]);
    expect(runs[0]?.stderrTail).toContain('schema mismatch');
    expect(counters).toMatchObject({ hooksAttempted: 2, hooksFailed: 1 });
  });

  it('onError Continue: the failing hook is recorded, the later hook still runs; PartiallyFailed with the error', async () => {
    const { phase, runs, counters } = await restoreWithHooks('rs-continue', 'Continue');
    expect(phase).toBe('PartiallyFailed');
    expect(runs.map((r) => [r.command.join(' '), r.outcome, r.exitCode])).toEqual([
      [FAILS.join(' '), 'exited', 3],
      [THEN.join(' '), 'exited', 0],
    ]);
    expect(counters).toMatchObject({ hooksAttempted: 2, hooksFailed: 1 });
  });
});
