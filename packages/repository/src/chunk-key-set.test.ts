import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ChunkKeySet } from './chunk-key-set.js';

const id = (n: number) => createHash('sha256').update(`chunk ${n}`).digest('hex');

describe('ChunkKeySet', () => {
  it('holds every id added (growing as it fills), counts each once, and has none of the others', () => {
    const set = new ChunkKeySet();
    for (let i = 0; i < 50_000; i++) set.add(id(i));
    for (let i = 0; i < 50_000; i += 7) set.add(id(i));
    expect(set.size).toBe(50_000);
    for (let i = 0; i < 50_000; i++) expect(set.has(id(i))).toBe(true);
    let strangers = 0;
    for (let i = 50_000; i < 100_000; i++) if (set.has(id(i))) strangers++;
    expect(strangers).toBe(0);
    // 8 bytes a slot, at most 2/3 full: well under a Set of 64-character strings.
    expect(set.bytes).toBeLessThanOrEqual(50_000 * 8 * 3);
  });

  it('an id whose first 64 bits are zero is still found (the empty-slot marker is remapped)', () => {
    const set = new ChunkKeySet();
    const zero = `${'0'.repeat(16)}${'f'.repeat(48)}`;
    expect(set.has(zero)).toBe(false);
    set.add(zero);
    expect(set.has(zero)).toBe(true);
  });
});
