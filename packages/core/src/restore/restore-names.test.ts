import { describe, expect, it } from 'vitest';
import { isDns1123Label } from '../names.js';
import { pvrName } from './restore-names.js';

describe('pvrName', () => {
  it('is deterministic and differs per pod uid and volume', () => {
    expect(pvrName('r1', 'uid-a', 'data')).toBe(pvrName('r1', 'uid-a', 'data'));
    const names = new Set([
      pvrName('r1', 'uid-a', 'data'),
      pvrName('r1', 'uid-a', 'cache'),
      pvrName('r1', 'uid-b', 'data'),
      pvrName('r2', 'uid-a', 'data'),
    ]);
    expect(names.size).toBe(4);
    expect(pvrName('r1', 'uid-a', 'data')).toMatch(/^r1-[0-9a-f]{16}$/);
  });

  it.each(['r'.repeat(63), 'Restore_With.Dots', '---', 'a'])('is a DNS-1123 label for restore name %j', (name) => {
    expect(isDns1123Label(pvrName(name, 'uid', 'vol'))).toBe(true);
  });
});
