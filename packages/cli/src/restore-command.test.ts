import { describe, expect, it } from 'vitest';
import type { BackupEvent } from './api-types.js';
import { restoreProgressLine } from './restore-command.js';

const ev = (type: string, data: Record<string, unknown>): BackupEvent => ({ id: '1-0', type, at: '2026-01-01T00:00:00Z', data });

describe('restoreProgressLine: a PVR that ended', () => {
  const totals = { items: 0, done: 0 };
  it('Completed: the volume and its phase', () => {
    expect(restoreProgressLine(ev('pvr.phase', { pod: 'shop/cache', volume: 'redis-data', to: 'Completed' }), totals)).toBe(
      'volume shop/cache redis-data: Completed',
    );
  });

  it('Failed: says why, from the PVR status message on the event', () => {
    expect(
      restoreProgressLine(ev('pvr.phase', { pod: 'shop/reporter', volume: 'reports', to: 'Failed', message: 'the disk is full' }), totals),
    ).toBe('volume shop/reporter reports: Failed (the disk is full)');
  });

  it('still running: no line', () => {
    expect(restoreProgressLine(ev('pvr.phase', { pod: 'shop/reporter', volume: 'reports', to: 'InProgress' }), totals)).toBeUndefined();
  });
});
