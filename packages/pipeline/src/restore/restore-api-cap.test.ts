import { describe, expect, it } from 'vitest';
import { restoreApiShares } from './restore-api-cap.js';

describe('restoreApiShares', () => {
  it.each([
    [1, 1, 1],
    [5, 1, 5],
    [10, 1, 10],
    [12, 2, 6],
    [15, 2, 7],
    [100, 10, 10],
    [250, 25, 10],
  ])('cap %i → %i restore-items jobs at once × %i requests each', (cap, jobsAtOnce, perJob) => {
    expect(restoreApiShares(cap)).toEqual({ jobsAtOnce, perJob });
  });

  it('never allows more than the cap, and uses at least half of it', () => {
    for (let cap = 1; cap <= 10_000; cap++) {
      const { jobsAtOnce, perJob } = restoreApiShares(cap);
      expect(jobsAtOnce * perJob).toBeLessThanOrEqual(cap);
      expect(jobsAtOnce * perJob * 2).toBeGreaterThanOrEqual(cap);
    }
  });

  it('refuses a cap that is not a positive integer', () => {
    expect(() => restoreApiShares(0)).toThrow(/restoreMaxInFlight must be a positive integer, got 0/);
    expect(() => restoreApiShares(2.5)).toThrow(/restoreMaxInFlight/);
  });
});
