import { describe, expect, it } from 'vitest';
import { bar, formatAge, formatBytes, formatDuration, formatLocalTime, formatTable, formatTime, msBetween } from './format.js';

describe('format', () => {
  it('sizes and durations read like a human would write them', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(3 * 1024 * 1024)).toBe('3.0 MiB');
    expect(formatBytes(undefined)).toBe('-');
    // One style for every duration (Go's, as Velero and kubectl print them).
    expect(formatDuration(42)).toBe('42ms');
    expect(formatDuration(1_234)).toBe('1.2s');
    expect(formatDuration(-5)).toBe('-5ms');
    expect(formatDuration(125_400)).toBe('2m5s');
    expect(formatDuration(3_723_000)).toBe('1h2m3s');
    expect(formatDuration(undefined)).toBe('-');
    expect(formatAge(3 * 86_400_000 + 1_234_567)).toBe('72h0m0s');
    expect(formatAge(3_723_400)).toBe('1h2m0s');
    expect(msBetween('2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.500Z')).toBe(1500);
    expect(msBetween(undefined, '2026-01-01T00:00:00Z')).toBeUndefined();
  });

  it('prints times in the local time zone with their offset and age', () => {
    // TZ is read when the process starts: the suite runs in whatever zone; the offset says which.
    const iso = '2026-03-01T13:03:22.000Z';
    const local = formatLocalTime(iso);
    const at = new Date(iso);
    const offset = -at.getTimezoneOffset();
    expect(local).toMatch(/^2026-03-0[12] \d\d:03:22 [+-]\d\d:\d\d$/);
    expect(
      local.endsWith(
        `${offset >= 0 ? '+' : '-'}${String(Math.trunc(Math.abs(offset) / 60)).padStart(2, '0')}:${String(Math.abs(offset) % 60).padStart(2, '0')}`,
      ),
    ).toBe(true);
    expect(formatTime(iso, Date.parse(iso) + 300_000)).toBe(`${local} (5m0s ago)`);
    expect(formatTime(iso, Date.parse(iso) - 60_000)).toBe(`${local} (in 1m0s)`);
    expect(formatTime(undefined)).toBe('-');
  });

  it('aligns table columns and draws bars', () => {
    expect(formatTable(['A', 'LONG'], [['xyz', '1']])).toEqual(['A    LONG', 'xyz  1']);
    expect(bar(1, 2, 4)).toBe('[██░░]');
    expect(bar(3, 0, 2)).toBe('[░░]');
  });
});
