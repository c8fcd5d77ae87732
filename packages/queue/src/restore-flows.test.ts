import { describe, expect, it } from 'vitest';
import { parseRestoreItemsJobData, restoreJobIds } from './restore-flows.js';

describe('restore job ids', () => {
  it('are deterministic, contain no ":" and are never all digits, even for a numeric restore name', () => {
    const ids = [
      restoreJobIds.plan('123'),
      restoreJobIds.finalize('123'),
      restoreJobIds.tier('123', 0),
      restoreJobIds.items('123', 2, 7),
      restoreJobIds.hooks('123', 'shop', 'db-0'),
      restoreJobIds.pvrWatch('123', '123-abcdef0123456789'),
    ];
    for (const id of ids) {
      expect(id).not.toContain(':');
      expect(id).not.toMatch(/^\d+$/);
    }
    expect(new Set(ids).size).toBe(ids.length);
    expect(restoreJobIds.items('r', 2, 7)).toBe(restoreJobIds.items('r', 2, 7));
    expect(restoreJobIds.pvrWatch('r', 'p').startsWith(restoreJobIds.pvrWatchPrefix('r'))).toBe(true);
  });

  it('refuse a part with ":" or an empty part, naming it', () => {
    expect(() => restoreJobIds.plan('a:b')).toThrow(/restore name "a:b" contains ':'/);
    expect(() => restoreJobIds.hooks('r', '', 'p')).toThrow(/namespace must not be empty/);
  });

  it('a payload missing its batch fails with the field named', () => {
    expect(() => parseRestoreItemsJobData({ restoreName: 'r', restoreUid: 'u', tier: 0 })).toThrow(/batch/);
  });
});
