import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveRepoKeys, newKdfParams } from './keys.js';
import { LargeFileHasher } from './large-file-hasher.js';

const CHUNKER = { minBytes: 64 * 1024, avgBytes: 256 * 1024, maxBytes: 1024 * 1024 };
let dir: string;
let data: ConstructorParameters<typeof LargeFileHasher>[1];
const files: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stowage-hasher-'));
  const keys = await deriveRepoKeys('hasher test key', { ...newKdfParams(), N: 2 ** 10 });
  data = { chunker: CHUNKER, chunkerSeed: keys.chunkerSeed, chunkIdKey: keys.chunkIdKey, encryptionKey: keys.encryptionKey };
  for (let i = 0; i < 3; i++) {
    const path = join(dir, `f${i}`);
    await writeFile(path, randomBytes(2 * 1024 * 1024 + i));
    files.push(path);
  }
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The chunk ids and the file size, as the hasher reports them. */
async function hashFile(hasher: LargeFileHasher, path: string) {
  const ids: string[] = [];
  const outcome = await hasher.hash(path, statSync(path), 3, async (chunk) => void ids.push(chunk.id), new AbortController().signal);
  return { outcome, ids };
}

describe('LargeFileHasher kept between backups', () => {
  it('serves more files than threads, one after another and at once, then stops idle threads and starts new ones', async () => {
    const hasher = new LargeFileHasher(1, data, 50);
    try {
      const first = await Promise.all(files.map((f) => hashFile(hasher, f)));
      for (const [i, result] of first.entries()) {
        expect(result.outcome).toEqual({ kind: 'done', size: 2 * 1024 * 1024 + i });
        expect(result.ids.length).toBeGreaterThan(1);
      }
      // Idle past the idle time: the thread stopped; the next file gets a new one, same chunks.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await hashFile(hasher, files[0]!)).toEqual(first[0]);
    } finally {
      await hasher.close();
    }
  });

  it('reads nothing of a file swapped for a link to another file after the walk saw it', async () => {
    const hasher = new LargeFileHasher(1, data);
    try {
      const seen = statSync(files[0]!);
      const swapped = join(dir, 'swapped');
      await symlink(files[1]!, swapped);
      const ids: string[] = [];
      const viaLink = await hasher.hash(swapped, seen, 3, async (chunk) => void ids.push(chunk.id), new AbortController().signal);
      expect(viaLink).toEqual({ kind: 'changed', message: 'replaced by a symbolic link (not followed)' });
      // Another file under the name the walk saw.
      const other = await hasher.hash(files[1]!, seen, 3, async (chunk) => void ids.push(chunk.id), new AbortController().signal);
      expect(other).toEqual({ kind: 'changed', message: 'replaced by another file' });
      expect(ids).toEqual([]);
    } finally {
      await hasher.close();
    }
  });

  it('refuses work once closed instead of leaving it waiting', async () => {
    const hasher = new LargeFileHasher(1, data);
    await hashFile(hasher, files[0]!);
    await hasher.close();
    await expect(hashFile(hasher, files[0]!)).rejects.toThrow('closed');
  });
});
