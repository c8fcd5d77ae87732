import { describe, expect, it } from 'vitest';
import type { Backup, Block } from './api-types.js';
import { buildBackupReport, postHookLags } from './backup-report.js';

const block = (over: Partial<Block>): Block => ({
  id: 'b.0',
  state: 'Completed',
  pods: [],
  itemCount: 0,
  podVolumeBackups: [],
  hookRuns: [],
  ...over,
});
const pvb = (name: string, phase: string, completionTimestamp?: string) => ({
  name,
  pod: 'shop/postgres-0',
  node: 'node-a',
  volume: 'data',
  phase,
  totalBytes: 100,
  bytesDone: phase === 'Completed' ? 100 : 10,
  startTimestamp: '2026-01-01T00:00:00.000Z',
  ...(completionTimestamp ? { completionTimestamp } : {}),
});
const post = (startedAt: string) => ({
  pod: 'shop/postgres-0',
  container: 'postgres',
  phase: 'post' as const,
  source: 'annotation',
  command: ['fsfreeze', '-u'],
  outcome: 'exited',
  exitCode: 0,
  startedAt,
  endedAt: startedAt,
});

describe('postHookLags', () => {
  it('measures from the block’s last PVB completion to the hook start', () => {
    const lags = postHookLags([
      block({
        podVolumeBackups: [pvb('a', 'Completed', '2026-01-01T00:00:01.000Z'), pvb('b', 'Failed', '2026-01-01T00:00:02.000Z')],
        hookRuns: [post('2026-01-01T00:00:02.040Z')],
      }),
    ]);
    expect(lags).toEqual([expect.objectContaining({ blockPvbs: 2, lastPvbCompletedAt: '2026-01-01T00:00:02.000Z', lagMs: 40 })]);
  });

  it('reports a hook that started before a PVB ended as a negative lag, and unknowns as null', () => {
    const early = postHookLags([
      block({ podVolumeBackups: [pvb('a', 'Completed', '2026-01-01T00:00:05.000Z')], hookRuns: [post('2026-01-01T00:00:04.000Z')] }),
    ]);
    expect(early[0]?.lagMs).toBe(-1000);
    const none = postHookLags([block({ hookRuns: [post('2026-01-01T00:00:04.000Z')] })]);
    expect(none[0]).toMatchObject({ blockPvbs: 0, lastPvbCompletedAt: null, lagMs: null });
    const running = postHookLags([block({ podVolumeBackups: [pvb('a', 'InProgress')], hookRuns: [post('2026-01-01T00:00:04.000Z')] })]);
    expect(running[0]?.lagMs).toBeNull();
  });
});

describe('buildBackupReport', () => {
  it('adds up PVBs, bytes and hook runs', () => {
    const backup: Backup = {
      name: 'b',
      uid: 'u',
      phase: 'Completed',
      spec: {},
      progress: { totalItems: 7, itemsBackedUp: 7 },
      hookStatus: { hooksAttempted: 2, hooksFailed: 0 },
      podVolumeBackups: { total: 2, New: 0, InProgress: 0, Completed: 2, Failed: 0, Canceling: 0, Canceled: 0 },
      errors: 0,
      warnings: 1,
      createdAt: '2026-01-01T00:00:00.000Z',
      startedAt: '2026-01-01T00:00:00.500Z',
      completedAt: '2026-01-01T00:00:03.000Z',
    };
    const report = buildBackupReport(backup, [
      block({ podVolumeBackups: [pvb('a', 'Completed', '2026-01-01T00:00:01.000Z')], hookRuns: [post('2026-01-01T00:00:01.010Z')] }),
      block({ id: 'b.1', podVolumeBackups: [pvb('c', 'Completed', '2026-01-01T00:00:01.500Z')] }),
    ]);
    expect(report).toMatchObject({
      phase: 'Completed',
      durationMs: 2500,
      items: { total: 7, backedUp: 7 },
      blocks: 2,
      pvbs: { total: 2, byPhase: { Completed: 2 }, bytes: 200 },
      hooks: { attempted: 2, failed: 0 },
      warnings: 1,
    });
    expect(report.pvbs.list[0]).toMatchObject({ blockId: 'b.0', durationMs: 1000 });
    expect(report.postHookLags).toHaveLength(1);
  });
});
