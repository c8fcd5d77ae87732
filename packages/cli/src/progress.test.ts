import { describe, expect, it } from 'vitest';
import type { BackupEvent } from './api-types.js';
import { BackupProgress, describeEvent, ProgressRenderer, renderBars } from './progress.js';

let seq = 0;
const ev = (type: string, data: Record<string, unknown>): BackupEvent => ({ id: `${++seq}-0`, type, at: '2026-01-01T00:00:00Z', data });

describe('BackupProgress', () => {
  it('follows blocks, PVB bytes and hooks through a backup', () => {
    const p = new BackupProgress('b1', 1_000);
    p.apply(ev('backup.phase', { from: 'New', to: 'InProgress' }));
    p.apply(ev('plan.progress', { blocks: 2, items: 10 }));
    p.apply(ev('block.started', { blockId: 'b1.0' }));
    p.apply(ev('pvb.created', { pvb: 'pvb-a', blockId: 'b1.0' }));
    p.apply(ev('pvb.created', { pvb: 'pvb-b', blockId: 'b1.0' }));
    p.apply(ev('pvb.progress', { pvb: 'pvb-a', bytesDone: 50, totalBytes: 100 }));
    p.apply(ev('hook.started', { phase: 'pre' }));
    expect(p.apply(ev('hook.done', { phase: 'pre', ok: true, exitCode: 0 }))).toBe(true);
    let s = p.snapshot(3_000);
    expect(s).toMatchObject({
      phase: 'InProgress',
      elapsedMs: 2_000,
      blocks: { done: 0, started: 1, planned: 2, planDone: false },
      pvbs: { total: 2, done: 0, bytesDone: 50, totalBytes: 100 },
      hooks: { started: 1, done: 1, failed: 0 },
    });
    expect(p.apply(ev('pvb.phase', { pvb: 'pvb-a', to: 'Completed' }))).toBe(true);
    p.apply(ev('pvb.phase', { pvb: 'pvb-b', to: 'Failed' }));
    p.apply(ev('plan.done', { blocks: 2, items: 10 }));
    p.apply(ev('block.done', { blockId: 'b1.0' }));
    p.apply(ev('block.done', { blockId: 'b1.1' }));
    s = p.snapshot(4_000);
    expect(s.blocks).toEqual({ done: 2, started: 2, planned: 2, planDone: true });
    expect(s.pvbs).toEqual({ total: 2, done: 2, failed: 1, bytesDone: 100, totalBytes: 100 });
  });

  it('takes PVB bytes from the blocks endpoint without moving a finished PVB back', () => {
    const p = new BackupProgress('b1', 0);
    p.apply(ev('pvb.phase', { pvb: 'x', to: 'Completed' }));
    p.applyBlocks([
      {
        id: 'b1.0',
        state: 'WaitingForPvbs',
        pods: [],
        itemCount: 1,
        hookRuns: [],
        podVolumeBackups: [
          { name: 'x', pod: 'ns/p', node: 'n', volume: 'v', phase: 'InProgress', bytesDone: 10, totalBytes: 40 },
          { name: 'y', pod: 'ns/q', node: 'n', volume: 'v', phase: 'InProgress', bytesDone: 5, totalBytes: 10 },
        ],
      },
    ]);
    expect(p.snapshot(0).pvbs).toEqual({ total: 2, done: 1, failed: 0, bytesDone: 45, totalBytes: 50 });
  });
});

describe('ProgressRenderer', () => {
  it('redraws the bars in place on a TTY', () => {
    const out: string[] = [];
    let now = 0;
    const model = new BackupProgress('demo', 0);
    const r = new ProgressRenderer({ isTTY: true, write: (t) => out.push(t) }, model, () => now);
    r.onEvent(ev('backup.phase', { to: 'InProgress' }), true);
    now = 500;
    r.tick();
    expect(out).toHaveLength(2);
    expect(out[0]).not.toContain('\x1b[4A');
    expect(out[1]?.startsWith('\x1b[4A')).toBe(true);
    expect(out[1]).toContain('blocks');
    expect(renderBars(model.snapshot(now))).toHaveLength(4);
  });

  it('prints plain lines without escape codes when not a TTY', () => {
    const out: string[] = [];
    const model = new BackupProgress('demo', 0);
    const r = new ProgressRenderer({ isTTY: false, write: (t) => out.push(t) }, model, () => 0);
    const e = ev('hook.done', { phase: 'post', pod: 'shop/postgres-0', container: 'postgres', ok: true, exitCode: 0 });
    r.onEvent(e, model.apply(e));
    r.finish();
    const text = out.join('');
    expect(text).toContain('post hook shop/postgres-0/postgres ok (exit 0)');
    expect(text).toContain('hooks 1/0');
    expect(text).not.toContain('\x1b[');
  });
});

describe('describeEvent: a PVB that ended', () => {
  it('Failed: says why, from the message on the event', () => {
    expect(
      describeEvent(ev('pvb.phase', { pvb: 'p1', pod: 'shop/db-0', volume: 'data', node: 'node-a', to: 'Failed', message: 'disk full' })),
    ).toBe('PVB shop/db-0 volume data on node-a Failed: disk full');
  });
  it('Completed: no message', () => {
    expect(describeEvent(ev('pvb.phase', { pvb: 'p1', pod: 'shop/db-0', volume: 'data', to: 'Completed' }))).toBe(
      'PVB shop/db-0 volume data Completed',
    );
  });
});
