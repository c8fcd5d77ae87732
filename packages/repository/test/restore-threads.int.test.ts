import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeTree } from '@stowage/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Encoding, SEAL_OVERHEAD_BYTES, seal } from '../src/blob.js';
import { openIndexObject } from '../src/chunk-store.js';
import { Repository } from '../src/index.js';
import type { RepoKeys } from '../src/keys.js';
import { logText } from './generated-data.js';
import { openRepoWithThreads, restoreThreadsSetting } from './repo-threads.js';

// Chunks of 64 KiB and more are decrypted, authenticated and re-hashed against their id, and decompressed on
// STOWAGE_REPO_THREADS worker threads, several per file at once, each written at its offset.
const KEY = 'restore threads test key';
/** Every chunk at least 64 KiB, so every one goes through the threads. */
const CHUNKER = { minBytes: 64 * 1024, avgBytes: 256 * 1024, maxBytes: 1024 * 1024 };
let work: string;
let source: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'stowage-restore-threads-'));
  source = join(work, 'volume');
  await mkdir(source);
});

afterEach(async () => {
  restoreThreadsSetting();
  await rm(work, { recursive: true, force: true });
});

const openWithThreads = (threads: number) => openRepoWithThreads(join(work, 'repo'), KEY, threads);

/** The pack files of the repository, largest first. */
async function packFiles(): Promise<string[]> {
  const entries = await readdir(join(work, 'repo', 'packs'), { recursive: true, withFileTypes: true });
  const files = entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
  const sizes = new Map(await Promise.all(files.map(async (f) => [f, (await stat(f)).size] as const)));
  return files.sort((a, b) => sizes.get(b)! - sizes.get(a)!);
}

describe('restore on worker threads', () => {
  it('a large file whose chunks are opened in parallel comes out byte-identical with one thread or four, in an empty or a non-empty target', async () => {
    // Random and text interleaved: raw and zstd chunks of different sizes finish out of order.
    const mixed = Buffer.concat([
      randomBytes(1024 * 1024 + 3),
      logText(3 * 1024 * 1024, 1),
      randomBytes(2 * 1024 * 1024),
      logText(1024 * 1024 + 11, 2),
    ]);
    await writeFile(join(source, 'mixed.bin'), mixed);
    await writeFile(join(source, 'second.log'), logText(2 * 1024 * 1024 + 7, 3));
    await Repository.init({ dir: join(work, 'repo'), key: KEY, chunker: CHUNKER, durable: false });
    const { snapshotId, stats } = await (await openWithThreads(2)).backup(source);
    expect(stats.newChunks).toBeGreaterThan(20);
    const original = await describeTree(source);

    for (const threads of [1, 4]) {
      const repo = await openWithThreads(threads);
      const empty = join(work, `empty-${threads}`);
      await repo.restore(snapshotId, empty);
      expect(await describeTree(empty)).toEqual(original);
      const busy = join(work, `busy-${threads}`);
      await mkdir(busy);
      await writeFile(join(busy, 'mixed.bin'), 'older, shorter bytes');
      await repo.restore(snapshotId, busy);
      expect(await describeTree(busy)).toEqual(original);
    }
  });

  it('a damaged chunk in the middle of a large file fails the restore naming the file and chunk, and never leaves wrong bytes', async () => {
    await writeFile(join(source, 'big.bin'), randomBytes(6 * 1024 * 1024));
    await Repository.init({ dir: join(work, 'repo'), key: KEY, chunker: CHUNKER, durable: false });
    const repo = await openWithThreads(4);
    const { snapshotId } = await repo.backup(source);
    const chunks = (await repo.getSnapshot(snapshotId)).entries.find((e) => e.path === 'big.bin')!.chunks!;
    // One flipped byte in the middle of the pack damages exactly one chunk, with good ones before and after it.
    const [pack] = await packFiles();
    const bytes = await readFile(pack!);
    bytes[bytes.length >> 1]! ^= 0x01;
    await writeFile(pack!, bytes);

    const busy = join(work, 'busy');
    await mkdir(busy);
    await writeFile(join(busy, 'big.bin'), 'the bytes that were here before');
    const failure = await repo.restore(snapshotId, busy).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ code: 'REPO_CHUNK_CORRUPT', details: { path: 'big.bin', problem: 'corrupt' } });
    expect((failure as Error).message).toContain('big.bin');
    expect(chunks).toContain((failure as { details: { chunkId: string } }).details.chunkId);
    expect(chunks.indexOf((failure as { details: { chunkId: string } }).details.chunkId)).toBeGreaterThan(0);
    // The file under its name keeps its old bytes; no temp file is left.
    expect(await readFile(join(busy, 'big.bin'), 'utf8')).toBe('the bytes that were here before');
    expect(await readdir(busy)).toEqual(['big.bin']);

    const fresh = join(work, 'fresh');
    await expect(repo.restore(snapshotId, fresh)).rejects.toMatchObject({ code: 'REPO_CHUNK_CORRUPT', details: { path: 'big.bin' } });
    expect(await readdir(fresh)).toEqual([]);
  });

  it('a chunk sealed by a key holder over other bytes than its id names fails the restore and verify', async () => {
    // What a writer bug (bytes changed between hashing and sealing) would leave: the blob
    // authenticates under the id, but its content does not hash to it. Authentication alone
    // would let a restore write those bytes; the re-hash on the opener thread refuses them.
    const original = randomBytes(2 * 1024 * 1024);
    await writeFile(join(source, 'big.bin'), original);
    await Repository.init({ dir: join(work, 'repo'), key: KEY, chunker: CHUNKER, durable: false });
    const repo = await openWithThreads(2);
    const { snapshotId } = await repo.backup(source);
    const keys = (repo as unknown as { keys: RepoKeys }).keys;
    const [pack] = await packFiles();
    const packId = pack!.split('/').at(-1)!;
    const [indexName] = await readdir(join(work, 'repo', 'index'));
    const index = openIndexObject(keys.encryptionKey, indexName!, await readFile(join(work, 'repo', 'index', indexName!))).find(
      (p) => p.packId === packId,
    )!;
    const chunks = (await repo.getSnapshot(snapshotId)).entries.find((e) => e.path === 'big.bin')!.chunks!;
    const victim = index.entries.find((e) => e.id === chunks[1])!;
    const other = randomBytes(victim.length - SEAL_OVERHEAD_BYTES); // random chunks are stored raw: same sealed length
    const bytes = await readFile(pack!);
    seal(keys.encryptionKey, `chunk:${victim.id}`, Encoding.Raw, other).copy(bytes, victim.offset);
    await writeFile(pack!, bytes);

    const report = await repo.verify();
    expect(report.ok).toBe(false);
    expect(report.damaged).toEqual([
      expect.objectContaining({ chunkId: victim.id, problem: 'corrupt', detail: expect.stringContaining('does not hash to its id') }),
    ]);

    const target = join(work, 'restored');
    const failure = await repo.restore(snapshotId, target).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ code: 'REPO_CHUNK_CORRUPT', details: { path: 'big.bin', problem: 'corrupt', chunkId: victim.id } });
    expect((failure as Error).message).toContain('does not hash to its id');
    expect(await readdir(target).catch(() => [])).toEqual([]);
  });
});
