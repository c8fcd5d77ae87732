import { describe, expect, it } from 'vitest';
import { fnv1a64Hex, hashParts } from './hash.js';

// Reference FNV-1a 64 over UTF-8 bytes with BigInt: slow but obviously right.
function referenceFnv1a64(text: string): string {
  let hash = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= BigInt(byte);
    hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return hash.toString(16).padStart(16, '0');
}

describe('fnv1a64Hex', () => {
  it.each([
    ['', 'cbf29ce484222325'], // published FNV-1a 64 test vectors
    ['a', 'af63dc4c8601ec8c'],
    ['foobar', '85944171f73967e8'],
  ])('matches the published vector for %j', (input, expected) => {
    expect(fnv1a64Hex(input)).toBe(expected);
  });

  it.each(['pods|default|web-0', 'ünïcödé', '日本語のポッド', 'emoji 🚀 volume', 'x'.repeat(1000)])(
    'agrees with a BigInt reference for %j',
    (input) => {
      expect(fnv1a64Hex(input)).toBe(referenceFnv1a64(input));
    },
  );

  it('separates parts so concatenations do not collide', () => {
    expect(hashParts('ab', 'c')).not.toBe(hashParts('a', 'bc'));
  });
});
