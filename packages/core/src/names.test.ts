import { describe, expect, it } from 'vitest';
import {
  backupHooksJobId,
  blockJobId,
  explainDns1123Label,
  finalizeJobId,
  generateBackupName,
  isDns1123Label,
  isPostHooksJobIdOf,
  planJobId,
  postHooksJobId,
  pvbName,
  pvbWatchJobId,
} from './names.js';

describe('isDns1123Label / explainDns1123Label', () => {
  it.each([
    ['nightly', true],
    ['a', true],
    ['0abc-9', true],
    ['a'.repeat(63), true],
    ['a'.repeat(64), false],
    ['', false],
    ['Nightly', false],
    ['-start', false],
    ['end-', false],
    ['has_underscore', false],
    ['has.dot', false],
  ])('%j → %s', (name, valid) => {
    expect(isDns1123Label(name)).toBe(valid);
    expect(explainDns1123Label(name).length === 0).toBe(valid);
  });

  it('says what is wrong with a 64-character name', () => {
    expect(explainDns1123Label('a'.repeat(64))).toEqual(['is 64 characters long; the limit is 63']);
  });

  it('names the offending characters', () => {
    expect(explainDns1123Label('my_backup!').join(' ')).toContain('"_", "!"');
  });
});

describe('pvbName', () => {
  it('is deterministic and a DNS-1123 label', () => {
    const name = pvbName('nightly', 'uid-1', 'data');
    expect(name).toBe(pvbName('nightly', 'uid-1', 'data'));
    expect(name).toMatch(/^nightly-[0-9a-f]{16}$/);
    expect(isDns1123Label(name)).toBe(true);
  });

  it('differs per pod uid, volume and backup', () => {
    const names = new Set([pvbName('b', 'u1', 'v1'), pvbName('b', 'u2', 'v1'), pvbName('b', 'u1', 'v2'), pvbName('c', 'u1', 'v1')]);
    expect(names.size).toBe(4);
  });

  it.each(['a'.repeat(63), `${'x'.repeat(45)}-${'y'.repeat(17)}`, 'weird_Name.With:Stuff', '---', ''])(
    'stays a valid label for backup name %j',
    (backup) => {
      const name = pvbName(backup, 'uid', 'vol');
      expect(isDns1123Label(name)).toBe(true);
      expect(name.length).toBeLessThanOrEqual(63);
    },
  );

  it('keeps two long backups with the same prefix apart', () => {
    const prefix = 'p'.repeat(60);
    expect(pvbName(`${prefix}-a`, 'u', 'v')).not.toBe(pvbName(`${prefix}-b`, 'u', 'v'));
  });
});

describe('job ids', () => {
  const ids = [
    planJobId('nightly'),
    finalizeJobId('nightly'),
    blockJobId('nightly', 'blk-0011'),
    postHooksJobId('nightly', 'blk-0011'),
    pvbWatchJobId('nightly', 'nightly-abc'),
  ];

  it('have the documented shapes', () => {
    expect(ids).toEqual([
      'nightly.plan',
      'nightly.finalize',
      'nightly.blk-0011',
      'nightly.blk-0011.post-hooks',
      'nightly.watch.nightly-abc',
    ]);
  });

  it('a post-hooks job id is told from the other job ids of its backup', () => {
    expect(ids.map((id) => isPostHooksJobIdOf('nightly', id))).toEqual([false, false, false, true, false]);
    expect(isPostHooksJobIdOf('night', postHooksJobId('nightly', 'blk-0011'))).toBe(false);
  });

  it('a backup-level hooks job has one id per backup and phase, never taken for a post-hooks job', () => {
    expect([backupHooksJobId('nightly', 'pre'), backupHooksJobId('nightly', 'post')]).toEqual([
      'nightly.backup-hooks.pre',
      'nightly.backup-hooks.post',
    ]);
    expect(isPostHooksJobIdOf('nightly', backupHooksJobId('nightly', 'post'))).toBe(false);
    expect(ids).not.toContain(backupHooksJobId('nightly', 'pre'));
  });

  it('never contain ":" and are never all digits, even for a numeric backup name', () => {
    for (const id of [...ids, planJobId('123'), blockJobId('123', '456')]) {
      expect(id).not.toContain(':');
      expect(id).not.toMatch(/^\d+$/);
    }
  });

  it('are unique across kinds', () => {
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('throw on a ":" in an input (a caller bug)', () => {
    expect(() => blockJobId('nightly', 'a:b')).toThrow(/contains ':'/);
    expect(() => planJobId('')).toThrow(/must not be empty/);
  });
});

describe('generateBackupName', () => {
  it('joins prefix and suffix', () => {
    expect(generateBackupName('nightly', 'x7k2p')).toBe('nightly-x7k2p');
  });

  it('cuts a long prefix so the name stays ≤ 63', () => {
    const name = generateBackupName('p'.repeat(80), 'abcde');
    expect(name.length).toBe(63);
    expect(name.endsWith('-abcde')).toBe(true);
    expect(isDns1123Label(name)).toBe(true);
  });

  it('cleans a prefix that is not a label', () => {
    expect(generateBackupName('My_Backup', 'Q1')).toBe('my-backup-q1');
  });

  it('rejects a suffix with no letters or digits', () => {
    expect(() => generateBackupName('x', '--')).toThrow();
  });
});
