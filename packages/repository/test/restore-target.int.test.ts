import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeTree, writeVolumeTree } from '@stowage/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Repository } from '../src/index.js';
import { TEST_CHUNKER } from './test-settings.js';

const KEY = 'restore target test key';
let work: string;
let source: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'stowage-restore-'));
  source = join(work, 'volume');
  await writeVolumeTree(source);
});

afterEach(async () => {
  for (const root of [source, join(work, 'empty'), join(work, 'new'), join(work, 'busy')]) {
    await chmod(join(root, 'read-only-dir'), 0o755).catch(() => {});
  }
  await rm(work, { recursive: true, force: true });
});

describe('restore targets', () => {
  it('an empty, a new and a non-empty target get identical bytes, modes and times', async () => {
    const repo = await Repository.init({ dir: join(work, 'repo'), key: KEY, chunker: TEST_CHUNKER, durable: false });
    const { snapshotId } = await repo.backup(source);
    const original = await describeTree(source);

    await mkdir(join(work, 'empty'));
    await repo.restore(snapshotId, join(work, 'empty'));
    await repo.restore(snapshotId, join(work, 'new'));
    // Non-empty: an unrelated file stays, a file of the snapshot that exists with other bytes is replaced.
    const busy = join(work, 'busy');
    await mkdir(busy);
    await writeFile(join(busy, 'unrelated.txt'), 'keep me');
    const aFile = Object.entries(original).find(([path, e]) => e.type === 'file' && !path.includes('/'))![0];
    await writeFile(join(busy, aFile), 'old bytes that must be replaced');
    await repo.restore(snapshotId, busy);

    expect(await describeTree(join(work, 'empty'))).toEqual(original);
    expect(await describeTree(join(work, 'new'))).toEqual(original);
    const { 'unrelated.txt': unrelated, ...restoredBusy } = await describeTree(busy);
    expect(unrelated).toBeDefined();
    expect(restoredBusy).toEqual(original);
    expect(await readFile(join(busy, 'unrelated.txt'), 'utf8')).toBe('keep me');
    // No temp files are left behind by either path.
    const leftovers = (await readdir(busy, { recursive: true })).filter((name) => String(name).includes('.stowage-restore-'));
    expect(leftovers).toEqual([]);
  });

  it('in place, a file whose later chunk is damaged is removed again and the restore fails naming it', async () => {
    const repoDir = join(work, 'repo');
    const repo = await Repository.init({ dir: repoDir, key: KEY, chunker: TEST_CHUNKER, durable: false });
    const one = join(work, 'one-file');
    await mkdir(one);
    await writeFile(join(one, 'big.bin'), randomBytes(2 * 1024 * 1024));
    const { snapshotId } = await repo.backup(one);
    // Damage the one pack past its first 512 KiB: the first chunks check out and are written, a later one fails.
    for (const entry of await readdir(join(repoDir, 'packs'), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue;
      const path = join(entry.parentPath, entry.name);
      const bytes = await readFile(path);
      for (let i = 512 * 1024; i < bytes.length; i += 4096) bytes[i] = bytes[i]! ^ 0xff;
      await writeFile(path, bytes);
    }
    const target = join(work, 'new');
    await expect(repo.restore(snapshotId, target)).rejects.toMatchObject({ code: 'REPO_CHUNK_CORRUPT', details: { path: 'big.bin' } });
    expect(await readdir(target)).toEqual([]);
  });
});
