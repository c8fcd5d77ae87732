import { randomBytes } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sealCompressed } from './blob.js';
import { ChunkOpener } from './chunk-opener.js';
import { ChunkReadError } from './chunk-store.js';
import { chunkIdOf } from './keys.js';

const keys = { chunkIdKey: randomBytes(32), encryptionKey: randomBytes(32) };
let opener: ChunkOpener | undefined;
afterEach(async () => {
  await opener?.close();
  opener = undefined;
});

async function sealedChunk(plaintext: Buffer) {
  const chunkId = chunkIdOf(keys, plaintext);
  const { blob } = await sealCompressed(keys.encryptionKey, `chunk:${chunkId}`, plaintext);
  return { chunkId, blob: Buffer.from(blob) };
}

describe('ChunkOpener', () => {
  it('opens many chunks at once on its threads and writes the bytes of each where it is told', async () => {
    opener = new ChunkOpener(3, keys);
    const plaintexts = Array.from({ length: 24 }, (_, i) =>
      i % 2 ? randomBytes(100_000 + i) : Buffer.from(`line ${i} of a compressible chunk\n`.repeat(5000)),
    );
    const sealed = await Promise.all(plaintexts.map(sealedChunk));
    const opened = await Promise.all(sealed.map(({ chunkId, blob }) => opener!.open(chunkId, opener!.copy(blob))));
    expect(opened.map((chunk) => chunk.length)).toEqual(plaintexts.map((p) => p.length));
    // Written back to front, each at its offset, from whichever thread holds it.
    const dir = await mkdtemp(join(tmpdir(), 'stowage-opener-'));
    const fd = openSync(join(dir, 'out'), 'w');
    try {
      const offsets = plaintexts.map((_, i) => plaintexts.slice(0, i).reduce((sum, p) => sum + p.length, 0));
      for (let i = opened.length - 1; i >= 0; i--) await opened[i]!.writeAt(fd, offsets[i]!);
    } finally {
      closeSync(fd);
    }
    expect((await readFile(join(dir, 'out'))).equals(Buffer.concat(plaintexts))).toBe(true);
    await rm(dir, { recursive: true, force: true });
  });

  it('a damaged blob, or one under another id, is a ChunkReadError naming the chunk', async () => {
    opener = new ChunkOpener(2, keys);
    const good = await sealedChunk(randomBytes(200_000));
    const damaged = Buffer.from(good.blob);
    damaged[damaged.length >> 1]! ^= 0xff;
    await expect(opener.open(good.chunkId, opener.copy(damaged))).rejects.toMatchObject({
      name: 'ChunkReadError',
      chunkId: good.chunkId,
      problem: 'corrupt',
    });
    const other = await sealedChunk(randomBytes(200_000));
    const wrongName = await opener.open(good.chunkId, opener.copy(other.blob)).catch((error: unknown) => error);
    expect(wrongName).toBeInstanceOf(ChunkReadError);
    expect((wrongName as Error).message).toContain(good.chunkId);
  });

  it('reads go round a few buffers: each comes back from its thread once written (raw) or decoded (zstd)', async () => {
    opener = new ChunkOpener(2, keys);
    const plaintexts = Array.from({ length: 40 }, (_, i) =>
      i % 2 ? randomBytes(300_000 + i) : Buffer.from(`line ${i} of a compressible chunk\n`.repeat(9000)),
    );
    const sealed = await Promise.all(plaintexts.map(sealedChunk));
    const dir = await mkdtemp(join(tmpdir(), 'stowage-opener-'));
    const fd = openSync(join(dir, 'out'), 'w');
    try {
      // Two chunks in flight at a time, as a restore with a small lookahead has.
      let position = 0;
      for (let i = 0; i < sealed.length; i += 2) {
        const pair = sealed.slice(i, i + 2);
        const opened = await Promise.all(pair.map(({ chunkId, blob }) => opener!.open(chunkId, opener!.copy(blob))));
        for (const chunk of opened) {
          await chunk.writeAt(fd, position);
          position += chunk.length;
        }
      }
    } finally {
      closeSync(fd);
    }
    expect((await readFile(join(dir, 'out'))).equals(Buffer.concat(plaintexts))).toBe(true);
    // Without the round trip every one of the 40 reads would be fresh memory (page faults).
    expect(opener.buffersAllocated).toBeLessThanOrEqual(4);
    await rm(dir, { recursive: true, force: true });
  });
});
