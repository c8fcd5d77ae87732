import { createHash, hkdfSync, randomBytes } from 'node:crypto';
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Chunker, DEFAULT_CHUNKER_PARAMS, validateChunkerParams } from './chunker.js';

const params = { minBytes: 16 * 1024, avgBytes: 64 * 1024, maxBytes: 256 * 1024 };
const seed = Buffer.alloc(32, 7);
const digest = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** xorshift32 bytes: the same on every machine and Node version (pinned cut points below depend on it). */
function pseudoRandom(length: number, state: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = state;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/**
 * The chunking rule written the plain way, one byte per step (as the chunker was before it read
 * four bytes per load): the specification the fast loop must match cut for cut, or existing
 * repositories would stop deduplicating against new backups.
 */
function referenceCuts(p: typeof params, chunkerSeed: Uint8Array, data: Uint8Array): number[] {
  const gear = new Int32Array(hkdfSync('sha256', chunkerSeed, Buffer.alloc(0), 'stowage/gear-table', 256 * 4));
  const bits = Math.log2(p.avgBytes);
  const maskSmall = (0xffffffff << (32 - (bits + 2))) | 0;
  const maskLarge = (0xffffffff << (32 - (bits - 2))) | 0;
  const cuts: number[] = [];
  for (let start = 0; start < data.length; ) {
    const available = data.length - start;
    let length = Math.min(available, p.maxBytes);
    if (available > p.minBytes) {
      let hash = 0;
      for (let i = p.minBytes; i < length; i++) {
        hash = ((hash << 1) + gear[data[start + i]!]!) | 0;
        if ((hash & (i < p.avgBytes ? maskSmall : maskLarge)) === 0) {
          length = i + 1;
          break;
        }
      }
    }
    cuts.push(length);
    start += length;
  }
  return cuts;
}

describe('Chunker', () => {
  it('cuts within min and max and reassembles to the input', () => {
    const data = randomBytes(4 * 1024 * 1024);
    const chunks = [...new Chunker(params, seed).split(data)];
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    for (const c of chunks.slice(0, -1)) {
      expect(c.length).toBeGreaterThanOrEqual(params.minBytes);
      expect(c.length).toBeLessThanOrEqual(params.maxBytes);
    }
    // Normalised chunking keeps the mean near the average (loose bound: a statement about shape, not luck).
    const mean = data.length / chunks.length;
    expect(mean).toBeGreaterThan(params.avgBytes * 0.6);
    expect(mean).toBeLessThan(params.avgBytes * 2);
  });

  it('keeps later boundaries when bytes are inserted near the start (fixed-size chunks would not)', () => {
    const data = randomBytes(4 * 1024 * 1024);
    const shifted = Buffer.concat([data.subarray(0, 1000), randomBytes(100), data.subarray(1000)]);
    const chunker = new Chunker(params, seed);
    const before = new Set([...chunker.split(data)].map(digest));
    const after = [...chunker.split(shifted)].map(digest);
    const changed = after.filter((d) => !before.has(d));
    expect(changed.length).toBeLessThanOrEqual(2);
    expect(after.length).toBeGreaterThan(20);
  });

  it('never exceeds max on data without natural boundaries', () => {
    const zeros = Buffer.alloc(1024 * 1024);
    const chunks = [...new Chunker(params, seed).split(zeros)];
    expect(chunks.every((c) => c.length <= params.maxBytes)).toBe(true);
    expect(Buffer.concat(chunks).length).toBe(zeros.length);
  });

  it('different seeds give different boundaries (per-repository gear table)', () => {
    const data = randomBytes(2 * 1024 * 1024);
    const a = [...new Chunker(params, Buffer.alloc(32, 1)).split(data)].map((c) => c.length);
    const b = [...new Chunker(params, Buffer.alloc(32, 2)).split(data)].map((c) => c.length);
    expect(a).not.toEqual(b);
  });

  it('streams a file to exactly the chunks of the in-memory split', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stowage-chunker-'));
    try {
      const data = randomBytes(3 * 1024 * 1024 + 12345);
      await writeFile(join(dir, 'f'), data);
      const chunker = new Chunker(params, seed);
      const file = await open(join(dir, 'f'), 'r');
      const streamed: string[] = [];
      let reads = 0;
      const read = async (b: Buffer, o: number, l: number, p: number) => (await file.read(b, o, l, p)).bytesRead;
      for await (const c of chunker.splitFile(read, { readBytes: 100_000, beforeRead: async () => void reads++ })) streamed.push(digest(c));
      await file.close();
      expect(streamed).toEqual([...chunker.split(data)].map(digest));
      expect(reads).toBeGreaterThan(30);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('with reused read buffers, chunks consumed at once are the same as with fresh ones', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stowage-chunker-'));
    try {
      // Repetitive text has few natural boundaries, so chunks often span two reads (the tail copy).
      const data = Buffer.concat([randomBytes(1024 * 1024), Buffer.alloc(1024 * 1024, 'abc'), randomBytes(777_777)]);
      await writeFile(join(dir, 'f'), data);
      const chunker = new Chunker(params, seed);
      const file = await open(join(dir, 'f'), 'r');
      const read = async (b: Buffer, o: number, l: number, p: number) => (await file.read(b, o, l, p)).bytesRead;
      const reused: string[] = [];
      for await (const c of chunker.splitFile(read, { readBytes: 100_000, reuseBuffers: true })) reused.push(digest(c));
      await file.close();
      expect(reused).toEqual([...chunker.split(data)].map(digest));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('cuts exactly where the byte-by-byte rule does, at every alignment of the data in memory', () => {
    // Random data, then text with few natural boundaries (chunks run to max), then random again.
    const data = Buffer.concat([randomBytes(3 * 1024 * 1024), Buffer.alloc(700_000, 'log line '), randomBytes(2 * 1024 * 1024 + 3)]);
    const chunker = new Chunker(params, seed);
    for (const offset of [0, 1, 2, 3]) {
      const view = data.subarray(offset);
      const cuts = [...chunker.split(view)].map((c) => c.length);
      expect(cuts).toEqual(referenceCuts(params, seed, view));
      expect(cuts.length).toBeGreaterThan(40);
    }
  });

  it('keeps the cut points of existing repositories (pinned from the byte-by-byte chunker, default sizes)', () => {
    const data = pseudoRandom(24 * 1024 * 1024, 0x9e3779b9);
    const repoSeed = new Uint8Array(32).fill(42);
    // Computed by the chunker of commit 3a40a46 (one byte per step); a change here re-stores every chunk.
    expect([...new Chunker(DEFAULT_CHUNKER_PARAMS, repoSeed).split(data)].map((c) => c.length)).toEqual([
      1541214, 598923, 1249153, 1536986, 1080066, 1379524, 1125564, 1385845, 1073821, 1269539, 1729599, 1102192, 1402527, 1480467, 1240056,
      1133199, 1264267, 1751867, 1616821, 204194,
    ]);
    // Small sizes, data starting at an odd address.
    expect([...new Chunker(params, repoSeed).split(data.subarray(3, 3 + 2 * 1024 * 1024 + 1))].map((c) => c.length)).toEqual([
      92244, 38222, 68878, 85858, 72060, 97488, 25935, 74111, 100777, 86076, 106227, 76492, 66330, 78509, 82431, 123371, 83335, 94101,
      73810, 135632, 77806, 65558, 55983, 48501, 81770, 38396, 66469, 783,
    ]);
  });

  it('rejects sizes that do not make sense', () => {
    expect(validateChunkerParams({ minBytes: 10, avgBytes: 5, maxBytes: 20 })).toMatch(/min < avg < max/);
    expect(validateChunkerParams({ minBytes: 1000, avgBytes: 3000, maxBytes: 9000 })).toMatch(/power of two/);
    expect(validateChunkerParams(params)).toBeUndefined();
  });
});
