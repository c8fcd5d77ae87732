import { chmod, mkdtemp, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeTree, writeVolumeTree } from '@stowage/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Repository, TokenBucket } from '../src/index.js';
import { TEST_CHUNKER } from './test-settings.js';

const KEY = 'incremental test key';
const VOLUME_TAGS = { ns: 'shop', pod: 'db-0', volume: 'data', pvc: 'data-db-0' };
let work: string;
let source: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'stowage-incr-'));
  source = join(work, 'volume');
  await writeVolumeTree(source);
});

afterEach(async () => {
  await chmod(join(source, 'read-only-dir'), 0o755).catch(() => {});
  await chmod(join(work, 'another-volume', 'read-only-dir'), 0o755).catch(() => {});
  await rm(work, { recursive: true, force: true });
});

function initRepo() {
  return Repository.init({ dir: join(work, 'repo'), key: KEY, chunker: TEST_CHUNKER, durable: false });
}

/** A throttle that lets everything through and counts the bytes the backup asked to read. */
function countingThrottle() {
  const bucket = new TokenBucket(1e12);
  const take = bucket.take.bind(bucket);
  const counted = { bytes: 0 };
  bucket.take = (bytes, signal) => {
    counted.bytes += bytes;
    return take(bytes, signal);
  };
  return { bucket, counted };
}

describe('incremental backups by file metadata', () => {
  it('an unchanged re-run of the same volume reads no file contents and records its parent; --force reads everything', async () => {
    const repo = await initRepo();
    const first = await repo.backup(source, { tags: { ...VOLUME_TAGS, backup: 'monday' } });
    expect(first.stats.parent).toBeUndefined();
    expect(first.stats.bytesRead).toBe(first.stats.bytes);

    const { bucket, counted } = countingThrottle();
    const second = await repo.backup(source, { tags: { ...VOLUME_TAGS, backup: 'tuesday' }, throttle: bucket });
    expect(counted.bytes).toBe(0);
    expect(second.stats).toMatchObject({ bytesRead: 0, newChunks: 0, bytes: first.stats.bytes, parent: first.snapshotId });
    expect(second.stats.unchangedFiles).toBe(second.stats.files);
    expect((await repo.getSnapshot(second.snapshotId)).parent).toBe(first.snapshotId);

    // The reused chunk lists restore the same bytes, and verify still reads every chunk.
    await repo.restore(second.snapshotId, join(work, 'restored'));
    expect(await describeTree(join(work, 'restored'))).toEqual(await describeTree(source));
    const report = await repo.verify();
    expect(report).toMatchObject({ ok: true, snapshotsChecked: 2 });
    expect(report.chunksChecked).toBeGreaterThan(40);

    const forced = await repo.backup(source, { tags: { ...VOLUME_TAGS, backup: 'wednesday' }, force: true });
    expect(forced.stats.bytesRead).toBe(first.stats.bytes);
    expect(forced.stats.unchangedFiles).toBe(0);
    expect(forced.stats.newChunks).toBe(0);
    expect(forced.stats.parent).toBe(second.snapshotId);
  });

  it('a file rewritten with the same size and its mtime set back is still read (ctime changed)', async () => {
    const repo = await initRepo();
    const path = join(source, 'small.txt');
    await writeFile(path, 'version one of the file\n');
    // A whole-second mtime, so setting it back restores it exactly: only the ctime can tell.
    const mtime = new Date('2026-01-01T00:00:00Z');
    await utimes(path, mtime, mtime);
    const before = await stat(path);
    await repo.backup(source, { tags: VOLUME_TAGS });
    await new Promise((resolve) => setTimeout(resolve, 20)); // ctime must be able to move on
    await writeFile(path, 'version two of the file\n');
    await utimes(path, mtime, mtime);
    const after = await stat(path);
    expect([after.mtimeMs, after.size, after.ino]).toEqual([before.mtimeMs, before.size, before.ino]);
    expect(after.ctimeMs).not.toBe(before.ctimeMs);

    const second = await repo.backup(source, { tags: VOLUME_TAGS });
    expect(second.stats.bytesRead).toBe('version two of the file\n'.length);
    expect(second.stats.unchangedFiles).toBe(second.stats.files - 1);
    await repo.restore(second.snapshotId, join(work, 'restored'));
    expect(await readFile(join(work, 'restored', 'small.txt'), 'utf8')).toBe('version two of the file\n');
  });

  it('a file replaced by another with the same size and mtime is read (new inode)', async () => {
    const repo = await initRepo();
    const path = join(source, 'replaced.txt');
    await writeFile(path, 'AAAA');
    const { mtime } = await stat(path);
    await repo.backup(source, { tags: VOLUME_TAGS });
    const other = join(source, 'replacement.tmp');
    await writeFile(other, 'BBBB');
    await utimes(other, mtime, mtime);
    await rename(other, path);

    const second = await repo.backup(source, { tags: VOLUME_TAGS });
    expect(second.stats.bytesRead).toBe(4);
    await repo.restore(second.snapshotId, join(work, 'restored'));
    expect(await readFile(join(work, 'restored', 'replaced.txt'), 'utf8')).toBe('BBBB');
  });

  it('the parent is the newest snapshot of the same volume: another volume, or no tags and another path, reads in full', async () => {
    const repo = await initRepo();
    await repo.backup(source, { tags: VOLUME_TAGS });
    const otherVolume = await repo.backup(source, { tags: { ...VOLUME_TAGS, volume: 'logs' } });
    expect(otherVolume.stats.parent).toBeUndefined();
    expect(otherVolume.stats.bytesRead).toBe(otherVolume.stats.bytes);
    const sameVolume = await repo.backup(source, { tags: { ...VOLUME_TAGS, backup: 'x', 'pod-uid': 'recreated' } });
    expect(sameVolume.stats.bytesRead).toBe(0);

    // Without identifying tags the rule is restic's: same host and same path.
    const elsewhere = join(work, 'another-volume');
    await writeVolumeTree(elsewhere);
    const untagged = await repo.backup(elsewhere);
    expect(untagged.stats.bytesRead).toBe(untagged.stats.bytes);
    const again = await repo.backup(elsewhere);
    expect(again.stats).toMatchObject({ bytesRead: 0, parent: untagged.snapshotId });
  });

  it('a parent whose chunks are loose files is trusted while they exist; a file whose chunk is gone is read again', async () => {
    // Every chunk loose: none is in a pack index, so each unchanged file is checked against the store.
    const repo = await Repository.init({ dir: join(work, 'repo'), key: KEY, chunker: TEST_CHUNKER, durable: false, packBlobMaxBytes: 0 });
    const first = await repo.backup(source, { tags: VOLUME_TAGS });
    const second = await repo.backup(source, { tags: VOLUME_TAGS });
    expect(second.stats).toMatchObject({ bytesRead: 0, newChunks: 0, unchangedFiles: second.stats.files });

    const files = (await repo.getSnapshot(first.snapshotId)).entries.filter((e) => e.type === 'file' && e.chunks!.length > 0);
    const gone = files[0]!.chunks![0]!;
    await rm(join(work, 'repo', 'data', gone.slice(0, 2), gone));
    const affected = files.filter((e) => e.chunks!.includes(gone));
    const third = await repo.backup(source, { tags: VOLUME_TAGS });
    expect(third.stats.parent).toBe(second.snapshotId);
    expect(third.stats.bytesRead).toBe(affected.reduce((sum, e) => sum + e.size, 0));
    expect(third.stats.unchangedFiles).toBe(third.stats.files - affected.length);
    await repo.restore(third.snapshotId, join(work, 'restored'));
    expect(await describeTree(join(work, 'restored'))).toEqual(await describeTree(source));
  });
});
