import { describe, expect, it } from 'vitest';
import type { Backup, Block, HookRun } from './api-types.js';
import { formatDescribe } from './cli.js';

const run = (over: Partial<HookRun>): HookRun => ({
  pod: 'apps/db-0',
  container: 'app',
  phase: 'pre',
  source: 'spec',
  command: ['/bin/freeze'],
  outcome: 'exited',
  exitCode: 0,
  startedAt: '2026-01-01T00:00:00.000Z',
  endedAt: '2026-01-01T00:00:00.100Z',
  ...over,
});

const backup: Backup = {
  name: 'nightly',
  uid: 'u',
  phase: 'PartiallyFailed',
  spec: {},
  progress: { totalItems: 5, itemsBackedUp: 1 },
  hookStatus: { hooksAttempted: 4, hooksFailed: 1 },
  podVolumeBackups: { total: 0, New: 0, InProgress: 0, Completed: 0, Failed: 0, Canceling: 0, Canceled: 0 },
  errors: 2,
  warnings: 0,
  createdAt: '2026-01-01T00:00:00.000Z',
  backupHooks: {
    pre: {
      doneAt: '2026-01-01T00:00:00.000Z',
      hooksRun: 1,
      hooksFailed: 0,
      runs: [run({ pod: 'gitops/flux-0', source: 'backup', hookName: 'suspend' })],
    },
    post: {
      doneAt: '2026-01-01T00:00:09.000Z',
      hooksRun: 1,
      hooksFailed: 0,
      runs: [run({ pod: 'gitops/flux-0', phase: 'post', source: 'backup', hookName: 'resume' })],
    },
  },
};

const block: Block = {
  id: 'blk-1',
  state: 'PartiallyFailed',
  pods: ['apps/db-0', 'apps/db-1'],
  itemCount: 4,
  itemsWritten: 0,
  skipped: 'pre hook db #0 in apps/db-1 failed: exited with code 2',
  podVolumeBackups: [],
  hookRuns: [
    run({ hookName: 'db', exitCode: 1, message: 'exited with code 1', try: 1, tries: 2 }),
    run({ hookName: 'db', try: 2, tries: 2 }),
    run({
      phase: 'post',
      hookName: 'db',
      command: ['/bin/thaw'],
      outcome: 'skipped',
      exitCode: undefined,
      message: 'executionPolicy OnSuccess: a PVB of the block did not complete',
    }),
  ],
};

describe('backup describe: backup-level hooks, tries, skipped blocks', () => {
  it('lists the backup hooks around the block runs, each try, and why a block or a hook was skipped', () => {
    const text = formatDescribe(backup, [block]).join('\n');
    expect(text).toMatch(/blk-1 +PartiallyFailed \(skipped\) +0\/4/);
    expect(text).toContain('Skipped blocks (1):\n  blk-1: pre hook db #0 in apps/db-1 failed: exited with code 2');
    expect(text).toContain('Backup hooks:\n  pre: 1 run, 0 failed\n  post: 1 run, 0 failed');
    const runs = text.slice(text.indexOf('Hook runs (5):')).split('\n').slice(2);
    expect(runs).toHaveLength(5);
    expect(runs[0]).toMatch(/^ {2}\(backup\) +suspend +gitops\/flux-0 +app +pre +exited +0 +- /);
    expect(runs[1]).toMatch(/^ {2}blk-1 +db +apps\/db-0 +app +pre +exited +1 +1\/2 /);
    expect(runs[2]).toMatch(/^ {2}blk-1 +db +apps\/db-0 +app +pre +exited +0 +2\/2 /);
    expect(runs[3]).toMatch(
      /^ {2}blk-1 +db +apps\/db-0 +app +post +skipped \(executionPolicy OnSuccess: a PVB of the block did not complete\) +- /,
    );
    expect(runs[4]).toMatch(/^ {2}\(backup\) +resume +gitops\/flux-0 +app +post +exited +0 /);
  });
});
