import { describe, expect, it } from 'vitest';
import { cappedBackoffMs } from './backoff.js';

describe('cappedBackoffMs', () => {
  it('doubles from baseMs and stops at maxMs', () => {
    const delays = [0, 1, 2, 3, 4, 5, 10, 2000].map((attempt) => cappedBackoffMs(attempt, { baseMs: 100, maxMs: 1_000 }));
    expect(delays).toEqual([100, 200, 400, 800, 1_000, 1_000, 1_000, 1_000]);
  });

  it('takes at most the jitter fraction off, driven by the injected random', () => {
    const opts = { baseMs: 1_000, maxMs: 1_000, jitter: 0.5 };
    expect(cappedBackoffMs(0, { ...opts, random: () => 0 })).toBe(1_000);
    expect(cappedBackoffMs(0, { ...opts, random: () => 0.5 })).toBe(750);
    expect(cappedBackoffMs(0, { ...opts, random: () => 0.999_999 })).toBe(500);
  });

  it('rejects arguments outside its contract', () => {
    expect(() => cappedBackoffMs(-1, { baseMs: 1, maxMs: 2 })).toThrow(/QUEUE_BAD_ARGUMENT/);
    expect(() => cappedBackoffMs(1.5, { baseMs: 1, maxMs: 2 })).toThrow(/attempt/);
    expect(() => cappedBackoffMs(1, { baseMs: 1, maxMs: 2, jitter: 2 })).toThrow(/jitter/);
  });
});
