import { describe, expect, it } from 'vitest';
import { workerLockTimingFromEnv } from './workers.js';

describe('workerLockTimingFromEnv', () => {
  it('unset or blank → BullMQ defaults (nothing set)', () => {
    expect(workerLockTimingFromEnv({})).toEqual({ ok: true, lock: {} });
    expect(workerLockTimingFromEnv({ STOWAGE_LOCK_DURATION_MS: ' ', STOWAGE_STALLED_INTERVAL_MS: '' })).toEqual({ ok: true, lock: {} });
  });

  it('reads both values in ms', () => {
    expect(workerLockTimingFromEnv({ STOWAGE_LOCK_DURATION_MS: '4000', STOWAGE_STALLED_INTERVAL_MS: '1500' })).toEqual({
      ok: true,
      lock: { durationMs: 4000, stalledIntervalMs: 1500 },
    });
  });

  it('lists every bad value at once, naming the variable', () => {
    const result = workerLockTimingFromEnv({ STOWAGE_LOCK_DURATION_MS: '4s', STOWAGE_STALLED_INTERVAL_MS: '10' });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems).toHaveLength(2);
    expect(result.problems[0]).toMatch(/^STOWAGE_LOCK_DURATION_MS: must be a whole number/);
    expect(result.problems[1]).toMatch(/^STOWAGE_STALLED_INTERVAL_MS: must be a whole number/);
  });
});
