import { chmod, mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeTree, writeVolumeTree } from '@stowage/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openIndexObject } from '../src/chunk-store.js';
import { Repository } from '../src/index.js';
import type { RepoKeys } from '../src/keys.js';
import { TEST_CHUNKER } from './test-settings.js';

const KEY = 'packs test key';
let work: string;
let source: string;
let repoDir: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'stowage-packs-'));
  source = join(work, 'volume');
  repoDir = join(work, 'repo');
  await writeVolumeTree(source);
});

afterEach(async () => {
  await chmod(join(source, 'read-only-dir'), 0o755).catch(() => {});
  await rm(work, { recursive: true, force: true });
});

async function filesUnder(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true, withFileTypes: true })).filter((d) => d.isFile()).map((d) => join(d.parentPath, d.name));
}

describe('packs', () => {
  it('a new repository packs chunks of every size: no loose chunk files, a few packs, one index object naming them all', async () => {
    const repo = await Repository.init({ dir: repoDir, key: KEY, chunker: TEST_CHUNKER, packTargetBytes: 1024 * 1024, durable: false });
    const { stats } = await repo.backup(source);
    expect(stats.newChunks).toBeGreaterThan(40);
    expect(await filesUnder(join(repoDir, 'data')).catch(() => [])).toEqual([]);
    const packs = (await filesUnder(join(repoDir, 'packs'))).map((p) => p.split('/').at(-1)).sort();
    expect(packs.length).toBeGreaterThan(1);
    expect(packs.length).toBeLessThan(stats.newChunks / 4);
    // One index object for the backup's packs, not one per pack (issue #50: a PUT and, for every
    // process opening the repository, a GET each).
    const indexes = await readdir(join(repoDir, 'index'));
    expect(indexes).toHaveLength(1);
    const keys = (repo as unknown as { keys: RepoKeys }).keys;
    const named = openIndexObject(keys.encryptionKey, indexes[0]!, await readFile(join(repoDir, 'index', indexes[0]!)));
    expect(named.map((p) => p.packId).sort()).toEqual(packs);
    expect(named.reduce((sum, p) => sum + p.entries.length, 0)).toBe(stats.newChunks);
    expect(await readdir(join(repoDir, 'tmp'))).toEqual([]);
  });

  it('a pack cut short by a crash is never trusted: its chunks are written again and everything restores and verifies', async () => {
    const repo = await Repository.init({ dir: repoDir, key: KEY, chunker: TEST_CHUNKER, durable: false });
    const first = await repo.backup(source);
    // The crash: a pack on disk cut short, the index naming the backup's packs never written, and a
    // half-written temp file.
    const [pack] = await filesUnder(join(repoDir, 'packs'));
    await truncate(pack!, Math.floor((await stat(pack!)).size / 2));
    for (const index of await readdir(join(repoDir, 'index'))) await rm(join(repoDir, 'index', index));
    await rm(join(repoDir, 'snapshots', first.snapshotId));
    await writeFile(join(repoDir, 'tmp', `${'0'.repeat(32)}.tmp`), Buffer.alloc(1000, 7));

    const reopened = await Repository.open({ dir: repoDir, key: KEY, durable: false });
    const second = await reopened.backup(source);
    expect(second.stats.parent).toBeUndefined();
    expect(second.stats.newChunks).toBe(first.stats.newChunks);
    await reopened.restore(second.snapshotId, join(work, 'restored'));
    expect(await describeTree(join(work, 'restored'))).toEqual(await describeTree(source));
    expect(await reopened.verify()).toMatchObject({ ok: true, damaged: [], damagedIndexes: [] });
  });

  it('an indexed pack that was cut short (a crash without fsync) is reported by verify and fails restore loudly', async () => {
    const repo = await Repository.init({ dir: repoDir, key: KEY, chunker: TEST_CHUNKER, durable: false });
    const { snapshotId } = await repo.backup(source);
    for (const pack of await filesUnder(join(repoDir, 'packs'))) await truncate(pack, 100);
    const report = await (await Repository.open({ dir: repoDir, key: KEY })).verify();
    expect(report.ok).toBe(false);
    expect(report.damaged.length).toBeGreaterThan(0);
    expect(report.damaged.every((d) => d.problem === 'corrupt' && d.detail.includes('truncated'))).toBe(true);
    await expect(repo.restore(snapshotId, join(work, 'restored'))).rejects.toMatchObject({ code: 'REPO_CHUNK_CORRUPT' });
  });
});
