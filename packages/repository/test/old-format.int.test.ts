import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Repository } from '../src/index.js';
import { OLD_FORMAT_KEY, writeOldFormatTree } from './fixtures/old-format-tree.js';

const FIXTURE = join(import.meta.dirname, 'fixtures', 'v1-deflate-loose');
let work: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'stowage-old-format-'));
});
afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

async function expectSameFiles(expectedRoot: string, actualRoot: string, paths: string[]): Promise<void> {
  for (const path of paths) {
    expect((await readFile(join(actualRoot, path))).equals(await readFile(join(expectedRoot, path))), path).toBe(true);
  }
}

const FILES = ['random-large.bin', 'log-large.txt', 'sub/small.txt', 'sub/log-small.txt', 'empty'];

describe('a repository written before zstd and packs for every size (deflate, loose chunks)', () => {
  it('restores and verifies, and takes new zstd-packed backups next to the old chunks', async () => {
    const repoDir = join(work, 'repo');
    await cp(FIXTURE, repoDir, { recursive: true });
    const expected = join(work, 'expected');
    await writeOldFormatTree(expected);

    const repo = await Repository.open({ dir: repoDir, key: OLD_FORMAT_KEY, durable: false });
    const [old] = await repo.listSnapshots();
    expect(old).toBeDefined();
    await repo.restore(old!.id, join(work, 'restored-old'));
    await expectSameFiles(expected, join(work, 'restored-old'), FILES);
    const report = await repo.verify();
    expect(report).toMatchObject({ ok: true, damaged: [], snapshotsChecked: 1 });
    expect(report.chunksChecked).toBeGreaterThanOrEqual(10);

    // A new backup of the same data dedups against the old chunks (same ids), adds nothing.
    const again = await repo.backup(expected);
    expect(again.stats.newChunks).toBe(0);
    await writeOldFormatTree(join(work, 'changed'));
    await cp(join(expected, 'log-large.txt'), join(work, 'changed', 'log-copy.txt'));
    // The fixture packs chunks of ≤ 32 KiB only: new.bin's chunks (16–256 KiB, cut where its random bytes say) may
    // all be stored loose; new-small.bin is one chunk under the chunker's minimum, packed, so a new multi-pack index.
    await writeFile(join(work, 'changed', 'new.bin'), randomBytes(100_000));
    await writeFile(join(work, 'changed', 'new-small.bin'), randomBytes(10_000));
    const changed = await repo.backup(join(work, 'changed'));
    await repo.restore(changed.snapshotId, join(work, 'restored-new'));
    await expectSameFiles(join(work, 'changed'), join(work, 'restored-new'), [...FILES, 'log-copy.txt', 'new.bin', 'new-small.bin']);
    expect(await repo.verify()).toMatchObject({ ok: true, snapshotsChecked: 3 });

    // The old one-per-pack indexes and the new backups' multi-pack ones merged by prune into one.
    const oldIndexes = await readdir(join(FIXTURE, 'index'));
    expect(oldIndexes.length).toBeGreaterThan(0);
    expect((await readdir(join(repoDir, 'index'))).length).toBeGreaterThan(oldIndexes.length);
    await repo.prune({ graceMs: 0 });
    expect(await readdir(join(repoDir, 'index'))).toHaveLength(1);
    const reopened = await Repository.open({ dir: repoDir, key: OLD_FORMAT_KEY, durable: false });
    expect(await reopened.verify()).toMatchObject({ ok: true, snapshotsChecked: 3 });
    await reopened.restore(old!.id, join(work, 'restored-after-prune'));
    await expectSameFiles(expected, join(work, 'restored-after-prune'), FILES);
  });
});
