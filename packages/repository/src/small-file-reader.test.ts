import { describe, expect, it } from 'vitest';
import { defaultReadThreads } from './small-file-reader.js';

describe('STOWAGE_REPO_THREADS', () => {
  it('defaults by core count (2 to 8), takes a whole number, and refuses anything else naming the variable', () => {
    const byDefault = defaultReadThreads({});
    expect(byDefault).toBeGreaterThanOrEqual(2);
    expect(byDefault).toBeLessThanOrEqual(8);
    expect(defaultReadThreads({ STOWAGE_REPO_THREADS: '3' })).toBe(3);
    for (const bad of ['0', '-1', '2.5', 'many', '1000']) {
      expect(() => defaultReadThreads({ STOWAGE_REPO_THREADS: bad })).toThrow(/STOWAGE_REPO_THREADS must be a whole number/);
    }
  });
});
