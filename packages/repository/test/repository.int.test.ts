import { execFileSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, open, readdir, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeTree, writeVolumeTree } from '@stowage/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isRepoError, RepoErrorCode, Repository, TokenBucket } from '../src/index.js';
import { backupInChild } from './support/unreadable-backup.js';
import { TEST_CHUNKER, TEST_PACK_BLOB_MAX } from './test-settings.js';

const KEY = 'correct horse battery staple';
let work: string;
let source: string;
let repoDir: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'stowage-repo-'));
  source = join(work, 'volume');
  repoDir = join(work, 'repo');
  await writeVolumeTree(source);
});

afterEach(async () => {
  // The fixture has a read-only dir; as a non-root user rm needs write permission back.
  await chmod(join(source, 'read-only-dir'), 0o755).catch(() => {});
  await rm(work, { recursive: true, force: true });
});

function initRepo(dir = repoDir) {
  return Repository.init({ dir, key: KEY, chunker: TEST_CHUNKER, packBlobMaxBytes: TEST_PACK_BLOB_MAX, durable: false });
}

async function countStoredFiles(dir: string): Promise<{ loose: number; packs: number }> {
  const count = async (sub: string) => {
    let n = 0;
    for (const ab of await readdir(join(dir, sub))) n += (await readdir(join(dir, sub, ab))).length;
    return n;
  };
  return { loose: await count('data'), packs: await count('packs') };
}

async function firstLooseChunk(dir: string): Promise<string> {
  for (const ab of (await readdir(join(dir, 'data'))).sort()) {
    const names = await readdir(join(dir, 'data', ab));
    if (names[0]) return names[0];
  }
  throw new Error('no loose chunk');
}

async function flipByte(path: string, offset: number): Promise<void> {
  const file = await open(path, 'r+');
  const byte = Buffer.alloc(1);
  await file.read(byte, 0, 1, offset);
  byte[0] = byte[0]! ^ 0xff;
  await file.write(byte, 0, 1, offset);
  await file.close();
}

async function expectRepoError(promise: Promise<unknown>, code: RepoErrorCode) {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isRepoError(error), `expected ${code}, got ${String(error)}`).toBe(true);
  expect((error as { code: string }).code).toBe(code);
  return error as Error & { code: string; details: Record<string, unknown> };
}

describe('backup and restore', () => {
  it('restores a tree byte for byte and mode for mode, with tags and progress', async () => {
    const repo = await initRepo();
    const progress: { totalBytes: number; bytesDone: number; files: number }[] = [];
    const { snapshotId, stats } = await repo.backup(source, {
      tags: { backup: 'nightly', pod: 'db-0', volume: 'data' },
      onProgress: (p) => progress.push(p),
    });
    const original = await describeTree(source);
    const fileCount = Object.values(original).filter((e) => e.type === 'file').length;
    expect(stats.files).toBe(fileCount);
    expect(stats.symlinks).toBe(3);
    expect(stats.newChunks).toBeGreaterThan(40);
    expect(stats.reusedChunks).toBeGreaterThanOrEqual(1); // the duplicate small file
    // The compressible log shrinks; the random data cannot, so stored < read.
    expect(stats.storedBytes).toBeLessThan(stats.bytes);
    const last = progress.at(-1)!;
    expect(last.bytesDone).toBe(last.totalBytes);
    expect(last.totalBytes).toBe(stats.bytes);
    expect(last.files).toBe(fileCount);

    const target = join(work, 'restored');
    const restored = await repo.restore(snapshotId, target);
    expect(restored.files).toBe(fileCount);
    expect(await describeTree(target)).toEqual(original);

    // A node's bandwidth limit applies to restores too: every restored byte goes through the
    // bucket. With a stopped clock nothing refills, so the last wait covers all bytes but the burst.
    const waits: number[] = [];
    const bucket = new TokenBucket(1000, { burstBytes: 1000, now: () => 0, sleep: async (ms) => void waits.push(ms) });
    const throttled = await repo.restore(snapshotId, join(work, 'restored-throttled'), { throttle: bucket });
    expect(waits.at(-1)).toBe(throttled.bytes - 1000);
    expect(await describeTree(join(work, 'restored-throttled'))).toEqual(original);

    const [summary] = await repo.listSnapshots();
    expect(summary).toMatchObject({
      id: snapshotId,
      tags: { backup: 'nightly', pod: 'db-0', volume: 'data' },
      totals: { files: fileCount },
    });
    // Nothing readable leaks into the repository: file names and contents are encrypted.
    const manifestBytes = await readFile(join(repoDir, 'snapshots', snapshotId));
    expect(manifestBytes.includes(Buffer.from('duplicate-1.txt'))).toBe(false);
  });

  it('a second backup of unchanged data writes no chunk', async () => {
    const repo = await initRepo();
    await repo.backup(source);
    const before = await countStoredFiles(repoDir);
    const { stats } = await repo.backup(source);
    expect(stats.newChunks).toBe(0);
    expect(stats.reusedChunks).toBeGreaterThan(40);
    expect(await countStoredFiles(repoDir)).toEqual(before);
    // Also from a freshly opened repository (dedup through the on-disk indexes, not memory).
    const reopened = await Repository.open({ dir: repoDir, key: KEY, durable: false });
    expect((await reopened.backup(source)).stats.newChunks).toBe(0);
  });

  it('changing one byte in a large file adds only the chunks around it', async () => {
    const repo = await initRepo();
    const first = await repo.backup(source);
    const originalTree = await describeTree(source);
    await flipByte(join(source, 'big.bin'), 1_000_000);
    const second = await repo.backup(source);
    expect(second.stats.newChunks).toBeGreaterThanOrEqual(1);
    expect(second.stats.newChunks).toBeLessThanOrEqual(2);

    const changedTree = await describeTree(source);
    await repo.restore(second.snapshotId, join(work, 'r2'));
    expect(await describeTree(join(work, 'r2'))).toEqual(changedTree);
    await repo.restore(first.snapshotId, join(work, 'r1'));
    expect(await describeTree(join(work, 'r1'))).toEqual(originalTree);
  });

  it('an empty volume gives a snapshot that restores to an empty directory with its mode', async () => {
    const repo = await initRepo();
    const empty = join(work, 'empty-volume');
    await mkdir(empty, { mode: 0o750 });
    await chmod(empty, 0o750);
    const { snapshotId, stats } = await repo.backup(empty);
    expect(stats).toMatchObject({ files: 0, dirs: 1, bytes: 0, newChunks: 0 });
    const target = join(work, 'empty-restored');
    await repo.restore(snapshotId, target);
    expect(await readdir(target)).toEqual([]);
    expect((await stat(target)).mode & 0o777).toBe(0o750);
  });

  it('skips sockets/FIFOs with a reason instead of hanging on them', async () => {
    execFileSync('mkfifo', [join(source, 'a-fifo')]);
    const repo = await initRepo();
    const { stats, snapshotId } = await repo.backup(source);
    expect(stats.skipped).toEqual([{ path: 'a-fifo', reason: expect.stringContaining('FIFO') }]);
    const manifest = await repo.getSnapshot(snapshotId);
    expect(manifest.entries.some((e) => e.path === 'a-fifo')).toBe(false);
  });

  it('two concurrent backups of the same tree into one repository both succeed and verify clean', async () => {
    await initRepo();
    const [a, b] = await Promise.all([
      Repository.open({ dir: repoDir, key: KEY, durable: false }),
      Repository.open({ dir: repoDir, key: KEY, durable: false }),
    ]);
    const [ra, rb] = await Promise.all([a.backup(source, { tags: { agent: 'a' } }), b.backup(source, { tags: { agent: 'b' } })]);
    expect(ra.snapshotId).not.toBe(rb.snapshotId);
    const report = await a.verify();
    expect(report).toMatchObject({ ok: true, snapshotsChecked: 2, damaged: [], missingRefs: [] });
    const original = await describeTree(source);
    await b.restore(ra.snapshotId, join(work, 'ra'));
    await a.restore(rb.snapshotId, join(work, 'rb'));
    expect(await describeTree(join(work, 'ra'))).toEqual(original);
    expect(await describeTree(join(work, 'rb'))).toEqual(original);
  });

  it('passes every byte read through the bandwidth throttle', async () => {
    const repo = await initRepo();
    let taken = 0;
    const throttle = new TokenBucket(1e12);
    const take = throttle.take.bind(throttle);
    throttle.take = (bytes, signal) => {
      taken += bytes;
      return take(bytes, signal);
    };
    const { stats } = await repo.backup(source, { throttle });
    expect(taken).toBeGreaterThanOrEqual(stats.bytes);
  });
});

describe('cancellation', () => {
  it('cancel mid-backup writes no snapshot and leaves nothing referenced', async () => {
    const repo = await initRepo();
    const controller = new AbortController();
    let sawProgress = false;
    const cancelled = repo.backup(source, {
      // ~2.6 MB at 1 MiB/s: slow enough that the abort on the first progress report lands mid-copy.
      bandwidthBytesPerSec: 1024 * 1024,
      progressIntervalMs: 0,
      onProgress: (p) => {
        if (p.bytesDone > 0 && p.bytesDone < p.totalBytes && !sawProgress) {
          sawProgress = true;
          controller.abort();
        }
      },
      signal: controller.signal,
    });
    await expectRepoError(cancelled, RepoErrorCode.BackupCanceled);
    expect(sawProgress).toBe(true);
    expect(await repo.listSnapshots()).toEqual([]);
    expect(await readdir(join(repoDir, 'snapshots'))).toEqual([]);
    const report = await repo.verify();
    expect(report.ok).toBe(true);
    expect(report.snapshotsChecked).toBe(0);
    // The repository is still usable afterwards.
    const { snapshotId } = await repo.backup(source);
    await repo.restore(snapshotId, join(work, 'after-cancel'));
    expect(await describeTree(join(work, 'after-cancel'))).toEqual(await describeTree(source));
  });

  it('an already-aborted signal fails fast', async () => {
    const repo = await initRepo();
    await expectRepoError(repo.backup(source, { signal: AbortSignal.abort() }), RepoErrorCode.BackupCanceled);
    expect(await repo.listSnapshots()).toEqual([]);
  });
});

describe('damage', () => {
  it('a corrupted loose chunk is reported by verify and makes restore fail loudly', async () => {
    const repo = await initRepo();
    const { snapshotId } = await repo.backup(source);
    const chunkId = await firstLooseChunk(repoDir);
    await flipByte(join(repoDir, 'data', chunkId.slice(0, 2), chunkId), 40);

    const report = await repo.verify();
    expect(report.ok).toBe(false);
    expect(report.damaged).toHaveLength(1);
    const damaged = report.damaged[0]!;
    expect(damaged).toMatchObject({ chunkId, problem: 'corrupt' });
    expect(damaged.files.length).toBeGreaterThanOrEqual(1);
    expect(damaged.files[0]!.snapshotId).toBe(snapshotId);
    const damagedPath = damaged.files[0]!.path;

    const target = join(work, 'restored');
    const error = await expectRepoError(repo.restore(snapshotId, target), RepoErrorCode.ChunkCorrupt);
    expect(error.details).toMatchObject({ chunkId, path: damagedPath });
    expect(error.message).toContain(chunkId);
    expect(error.message).toContain(damagedPath);
    // The damaged file was never written under its name, and no temp file is left behind.
    await expect(readFile(join(target, damagedPath))).rejects.toMatchObject({ code: 'ENOENT' });
    const leftovers = execFileSync('find', [target, '-name', '.stowage-restore-*']).toString();
    expect(leftovers).toBe('');
  });

  it('a corrupted pack is reported per chunk with the files it breaks', async () => {
    const repo = await initRepo();
    const { snapshotId } = await repo.backup(source);
    let packPath = '';
    for (const ab of await readdir(join(repoDir, 'packs'))) {
      const names = await readdir(join(repoDir, 'packs', ab));
      if (names[0]) packPath = join(repoDir, 'packs', ab, names[0]);
    }
    await flipByte(packPath, 100);
    const report = await repo.verify();
    expect(report.ok).toBe(false);
    expect(report.damaged.length).toBeGreaterThanOrEqual(1);
    const paths = report.damaged.flatMap((d) => d.files.map((f) => f.path));
    expect(paths.length).toBeGreaterThanOrEqual(1);
    await expectRepoError(repo.restore(snapshotId, join(work, 'restored')), RepoErrorCode.ChunkCorrupt);
  });

  it('a deleted chunk is reported as missing', async () => {
    const repo = await initRepo();
    await repo.backup(source);
    const chunkId = await firstLooseChunk(repoDir);
    await unlink(join(repoDir, 'data', chunkId.slice(0, 2), chunkId));
    const report = await repo.verify();
    expect(report.damaged).toEqual([expect.objectContaining({ chunkId, problem: 'missing' })]);
    expect(report.missingRefs.length).toBeGreaterThanOrEqual(1);
  });
});

describe('keys and errors a person can act on', () => {
  it('a wrong key fails with REPO_WRONG_KEY; no key at all is refused', async () => {
    await initRepo();
    const error = await expectRepoError(Repository.open({ dir: repoDir, key: 'not the key' }), RepoErrorCode.WrongKey);
    expect(error.message).toBe('the repository key does not match this repository');
    await expectRepoError(Repository.open({ dir: repoDir, key: '' }), RepoErrorCode.KeyMissing);
    await expectRepoError(Repository.init({ dir: join(work, 'other'), key: undefined as unknown as string }), RepoErrorCode.KeyMissing);
  });

  it('the same key with another repository salt derives other keys (no shared static password)', async () => {
    const one = await initRepo(join(work, 'one'));
    const two = await initRepo(join(work, 'two'));
    expect(one.config.kdf.saltB64).not.toBe(two.config.kdf.saltB64);
    expect(one.config.keyCheckB64).not.toBe(two.config.keyCheckB64);
  });

  it('reports a missing, uninitialised or already-initialised repository', async () => {
    await expectRepoError(Repository.open({ dir: join(work, 'nope'), key: KEY }), RepoErrorCode.Unreachable);
    await expectRepoError(Repository.open({ dir: source, key: KEY }), RepoErrorCode.NotInitialised);
    await initRepo();
    await expectRepoError(initRepo(), RepoErrorCode.AlreadyInitialised);
  });

  it('reports a missing source directory and a source that is a file', async () => {
    const repo = await initRepo();
    const missing = await expectRepoError(repo.backup(join(work, 'no-such-volume')), RepoErrorCode.SourceMissing);
    expect(missing.message).toContain('no-such-volume');
    await expectRepoError(repo.backup(join(source, 'big.bin')), RepoErrorCode.SourceNotDirectory);
    await expectRepoError(repo.restore('0'.repeat(32), join(work, 't')), RepoErrorCode.SnapshotNotFound);
  });

  it('permission denied names the unreadable path and writes no snapshot', async () => {
    const repo = await initRepo();
    const unreadable = join(source, 'nested/a/locked.db');
    await writeFile(unreadable, 'private');
    await chmod(unreadable, 0o000);
    // In a process the file's mode applies to, root included (backupInChild says how).
    const result = await backupInChild(repoDir, KEY, source);
    expect(result).toMatchObject({ ok: false, code: RepoErrorCode.SourceUnreadable });
    expect(result.ok === false && result.message).toContain(unreadable);
    expect(result.ok === false && result.details.path).toBe(unreadable);
    expect(await repo.listSnapshots()).toEqual([]);
  });
});
