import { describe, expect, it } from 'vitest';
import { fsBackupTimeoutProblem } from './backup-vs-prune-grace.js';

describe('fsBackupTimeoutProblem', () => {
  it('accepts a timeout shorter than the grace', () => {
    expect(fsBackupTimeoutProblem(4 * 3_600_000, 24 * 3_600_000)).toBeUndefined();
  });

  it('refuses a timeout equal to or above the grace, naming both settings and their values', () => {
    for (const timeout of [3_600_000, 5 * 3_600_000]) {
      const problem = fsBackupTimeoutProblem(timeout, 3_600_000);
      expect(problem?.path).toBe('spec.fsBackupTimeout');
      expect(problem?.message).toMatch(/fsBackupTimeout \d+h0m0s/);
      expect(problem?.message).toContain('STOWAGE_PRUNE_GRACE 1h0m0s');
    }
  });
});
