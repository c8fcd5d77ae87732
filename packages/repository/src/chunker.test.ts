import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Chunker, validateChunkerParams } from './chunker.js';

const params = { minBytes: 16 * 1024, avgBytes: 64 * 1024, maxBytes: 256 * 1024 };
const seed = Buffer.alloc(32, 7);
const digest = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

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

  it('rejects sizes that do not make sense', () => {
    expect(validateChunkerParams({ minBytes: 10, avgBytes: 5, maxBytes: 20 })).toMatch(/min < avg < max/);
    expect(validateChunkerParams({ minBytes: 1000, avgBytes: 3000, maxBytes: 9000 })).toMatch(/power of two/);
    expect(validateChunkerParams(params)).toBeUndefined();
  });
});
