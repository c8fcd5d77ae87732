import { randomBytes } from 'node:crypto';
import { deflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  BlobAuthError,
  decodePayload,
  decryptInto,
  Encoding,
  maybeCompress,
  payloadLength,
  SEAL_OVERHEAD_BYTES,
  seal,
  sealCompressed,
  sealJson,
  unseal,
  unsealJson,
} from './blob.js';

const key = randomBytes(32);

describe('sealed blobs', () => {
  it('round-trips and compresses text with zstd, small and large chunks alike', async () => {
    for (const text of [Buffer.from('the same line again\n'.repeat(10_000)), Buffer.from('a line\n'.repeat(200))]) {
      const { blob, compressed } = await sealCompressed(key, 'chunk:a', text);
      expect(compressed).toBe(true);
      expect(blob.length).toBeLessThan(text.length / 5);
      expect(unseal(key, 'chunk:a', blob).equals(text)).toBe(true);
      expect((await maybeCompress(text)).encoding).toBe(Encoding.Zstd);
    }
  });

  it("decrypts into the blob's own memory (the restore reuses its read buffer), raw and zstd, across many slices", async () => {
    for (const plaintext of [randomBytes(300_000 + 7), Buffer.from('a compressible line\n'.repeat(40_000))]) {
      const { blob } = await sealCompressed(key, 'chunk:in-place', plaintext);
      const memory = Buffer.from(blob); // its own copy, overwritten below
      const payload = memory.subarray(0, payloadLength(memory));
      const opened = decodePayload(decryptInto(key, 'chunk:in-place', memory, payload), payload);
      expect(opened.equals(plaintext)).toBe(true);
      const damaged = Buffer.from(blob);
      damaged[damaged.length - 20]! ^= 1;
      expect(() => decryptInto(key, 'chunk:in-place', damaged, damaged)).toThrow(BlobAuthError);
    }
  });

  it('stores tiny chunks raw without trying to compress them', async () => {
    expect((await maybeCompress(Buffer.from('x'.repeat(400)))).encoding).toBe(Encoding.Raw);
  });

  it('reads chunks deflated by older versions', () => {
    const text = Buffer.from('an old deflated chunk\n'.repeat(1000));
    const old = seal(key, 'chunk:old', Encoding.Deflate, deflateRawSync(text, { level: 1 }));
    expect(unseal(key, 'chunk:old', old).equals(text)).toBe(true);
  });

  it('stores random data raw (no full compression pass for incompressible data)', async () => {
    const random = randomBytes(1024 * 1024);
    const { encoding } = await maybeCompress(random);
    expect(encoding).toBe(0);
    const small = randomBytes(4096);
    expect((await maybeCompress(small)).encoding).toBe(0);
  });

  it('seals a payload of any length, encrypted in slices, into one blob that reads back whole', () => {
    for (const length of [0, 1, 16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 1024 * 1024 + 7]) {
      const data = randomBytes(length);
      const blob = seal(key, 'chunk:sliced', Encoding.Raw, data);
      expect(blob.length).toBe(length + SEAL_OVERHEAD_BYTES);
      expect(unseal(key, 'chunk:sliced', blob).equals(data)).toBe(true);
      // A bit flipped in the last slice still fails the whole blob.
      const flipped = Buffer.from(blob);
      flipped[blob.length - 17] = flipped[blob.length - 17]! ^ 1;
      expect(() => unseal(key, 'chunk:sliced', flipped)).toThrow(BlobAuthError);
    }
  });

  it('detects a flipped bit, a wrong name (swapped chunk) and a wrong key', () => {
    const data = randomBytes(1000);
    const blob = seal(key, 'chunk:a', 0, data);
    const flipped = Buffer.from(blob);
    flipped[100] = flipped[100]! ^ 1;
    expect(() => unseal(key, 'chunk:a', flipped)).toThrow(BlobAuthError);
    expect(() => unseal(key, 'chunk:b', blob)).toThrow(BlobAuthError);
    expect(() => unseal(randomBytes(32), 'chunk:a', blob)).toThrow(BlobAuthError);
    expect(() => unseal(key, 'chunk:a', blob.subarray(0, 10))).toThrow(BlobAuthError);
  });

  it('seals a small JSON document (a pack index) raw and a large one compressed; both, and older deflated ones, read back', () => {
    const index = { packId: 'p1', entries: [{ id: 'a'.repeat(64), offset: 0, length: 4096 }] };
    const small = sealJson(key, 'index:p1', index);
    expect(small.length).toBe(Buffer.byteLength(JSON.stringify(index)) + SEAL_OVERHEAD_BYTES);
    expect(unsealJson(key, 'index:p1', small)).toEqual(index);
    const manifest = { tree: Array.from({ length: 500 }, (_, i) => ({ path: `data/file-${i}.bin`, mode: 0o644, size: 4096 })) };
    const large = sealJson(key, 'snapshot:s1', manifest);
    expect(large.length).toBeLessThan(Buffer.byteLength(JSON.stringify(manifest)) / 4);
    expect(unsealJson(key, 'snapshot:s1', large)).toEqual(manifest);
    const older = seal(key, 'index:p1', 1, deflateRawSync(Buffer.from(JSON.stringify(index))));
    expect(unsealJson(key, 'index:p1', older)).toEqual(index);
  });

  it('uses a fresh nonce per seal', () => {
    const data = Buffer.from('same');
    expect(seal(key, 'x', 0, data).equals(seal(key, 'x', 0, data))).toBe(false);
  });
});

describe('byteEntropy', () => {
  it('tells random bytes from text', async () => {
    const { byteEntropy } = await import('./blob.js');
    expect(byteEntropy(randomBytes(4096))).toBeGreaterThan(7.5);
    expect(byteEntropy(Buffer.from('a log line with words and 12345 numbers\n'.repeat(100)))).toBeLessThan(5);
    expect(byteEntropy(Buffer.alloc(0))).toBe(0);
  });

  it('is exact on known distributions, small samples and ones larger than 4 KiB', async () => {
    const { byteEntropy } = await import('./blob.js');
    expect(byteEntropy(Buffer.alloc(4096, 7))).toBe(0);
    expect(byteEntropy(Buffer.from('abababab'))).toBeCloseTo(1, 12);
    expect(byteEntropy(Buffer.from(Array.from({ length: 256 * 20 }, (_, i) => i % 256)))).toBeCloseTo(8, 12);
    // 3/4 of one byte, 1/4 of another: −(0.75·log2 0.75 + 0.25·log2 0.25).
    const skewed = Buffer.concat([Buffer.alloc(6000, 1), Buffer.alloc(2000, 2)]);
    expect(byteEntropy(skewed)).toBeCloseTo(-(0.75 * Math.log2(0.75) + 0.25 * Math.log2(0.25)), 12);
  });
});
