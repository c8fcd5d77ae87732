import { describe, expect, it } from 'vitest';
import { bar, formatBytes, formatDuration, formatTable, msBetween } from './format.js';

describe('format', () => {
  it('sizes and durations read like a human would write them', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(3 * 1024 * 1024)).toBe('3.0 MiB');
    expect(formatBytes(undefined)).toBe('-');
    expect(formatDuration(42)).toBe('42 ms');
    expect(formatDuration(1_234)).toBe('1.23 s');
    expect(formatDuration(-5)).toBe('-5 ms');
    expect(formatDuration(125_000)).toBe('2m05s');
    expect(msBetween('2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.500Z')).toBe(1500);
    expect(msBetween(undefined, '2026-01-01T00:00:00Z')).toBeUndefined();
  });

  it('aligns table columns and draws bars', () => {
    expect(formatTable(['A', 'LONG'], [['xyz', '1']])).toEqual(['A    LONG', 'xyz  1']);
    expect(bar(1, 2, 4)).toBe('[██░░]');
    expect(bar(3, 0, 2)).toBe('[░░]');
  });
});
