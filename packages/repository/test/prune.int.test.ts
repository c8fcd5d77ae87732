import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { S3Storage, StorageMeter } from '@stowage/storage';
import { describeTree, type S3Target, useTestS3, writeVolumeTree } from '@stowage/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DirectoryBackend, ExitCode, ObjectStoreBackend, Repository, runRepoCli, TokenBucket } from '../src/index.js';
import { TEST_CHUNKER, TEST_PACK_BLOB_MAX } from './test-settings.js';

const KEY = 'prune test key';
const HOUR = 3600_000;
const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
let work: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'stowage-prune-'));
});
afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

/** Bytes of chunk data and indexes (what prune should give back), as the file system reports them. */
async function storedBytes(repoDir: string): Promise<number> {
  let total = 0;
  for (const top of ['packs', 'data', 'index', 'prune']) {
    const entries = await readdir(join(repoDir, top), { recursive: true, withFileTypes: true }).catch(() => []);
    for (const e of entries) if (e.isFile()) total += (await stat(join(e.parentPath, e.name))).size;
  }
  return total;
}

async function restoresExactly(repo: Repository, snapshotId: string, source: string, name: string) {
  const target = join(work, 'restored', name);
  await repo.restore(snapshotId, target);
  expect(await describeTree(target)).toEqual(await describeTree(source));
}

/** A throttle that stops the backup at its first read until `release()`: the backup has loaded the indexes by then. */
function gate() {
  const bucket = new TokenBucket(1e12);
  const take = bucket.take.bind(bucket);
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let entered!: () => void;
  const reached = new Promise<void>((resolve) => {
    entered = resolve;
  });
  bucket.take = async (bytes, signal) => {
    entered();
    await released;
    return take(bytes, signal);
  };
  return { bucket, reached, release };
}

describe.each([
  { layout: 'every chunk packed', packBlobMaxBytes: undefined },
  { layout: 'chunks over 32 KiB loose (older repositories)', packBlobMaxBytes: TEST_PACK_BLOB_MAX },
])('prune ($layout)', ({ packBlobMaxBytes }) => {
  it('after forgetting a backup, frees the bytes only it used once the grace has passed; the rest restores and verifies', async () => {
    const repoDir = join(work, 'repo');
    const repo = await Repository.init({
      dir: repoDir,
      key: KEY,
      chunker: TEST_CHUNKER,
      packTargetBytes: 256 * 1024,
      durable: false,
      ...(packBlobMaxBytes !== undefined ? { packBlobMaxBytes } : {}),
    });
    const kept = join(work, 'kept');
    await writeVolumeTree(kept);
    const keptSnap = await repo.backup(kept, { tags: { backup: 'kept', ns: 'a', pod: 'p', volume: 'v' } });
    const bytesWithKept = await storedBytes(repoDir);

    // The doomed backup shares the kept tree and adds 3 MiB of its own (random: it does not compress).
    const doomed = join(work, 'doomed');
    await cp(kept, doomed, { recursive: true });
    const own = randomBytes(3 * 1024 * 1024);
    await writeFile(join(doomed, 'only-here.bin'), own);
    await repo.backup(doomed, { tags: { backup: 'doomed', ns: 'b', pod: 'p', volume: 'v' } });
    const bytesWithBoth = await storedBytes(repoDir);
    expect(bytesWithBoth - bytesWithKept).toBeGreaterThanOrEqual(own.length);

    expect(await repo.forget({ backup: 'doomed' })).toHaveLength(1);
    expect(await repo.forget({ backup: 'doomed' })).toEqual([]); // idempotent

    let clock = Date.now();
    const now = () => clock;
    const first = await repo.prune({ graceMs: HOUR, now });
    expect(first.bytesRetired).toBeGreaterThanOrEqual(own.length);
    expect(first.bytesFreed).toBe(0);
    // Retired, not deleted: the bytes are still on disk during the grace period.
    expect(await storedBytes(repoDir)).toBeGreaterThanOrEqual(bytesWithBoth);

    const early = await repo.prune({ graceMs: HOUR, now });
    expect(early).toMatchObject({ packsDeleted: 0, looseDeleted: 0, batchesPending: 1 });

    clock += HOUR;
    const second = await repo.prune({ graceMs: HOUR, now });
    expect(second.bytesFreed).toBeGreaterThanOrEqual(own.length);
    expect(second).toMatchObject({ chunksRescued: 0, batchesPending: 0 });
    const after = await storedBytes(repoDir);
    expect(bytesWithBoth - after).toBeGreaterThanOrEqual(own.length);
    // Only the doomed backup's own data went: what is left is what the kept backup had alone.
    expect(after).toBe(bytesWithKept);

    const fresh = await Repository.open({ dir: repoDir, key: KEY });
    expect(await fresh.verify()).toMatchObject({ ok: true, snapshotsChecked: 1 });
    await restoresExactly(fresh, keptSnap.snapshotId, kept, 'kept');
  });
});

describe('prune with packs partly used', () => {
  /** A 16 MiB file backed up, then again with 1 KiB changed in the middle; the first backup forgotten. */
  async function partlyUsedRepository() {
    const repoDir = join(work, 'repo');
    const repo = await Repository.init({ dir: repoDir, key: KEY, chunker: TEST_CHUNKER, packTargetBytes: 256 * 1024, durable: false });
    const source = join(work, 'volume');
    await mkdir(source, { recursive: true });
    const data = randomBytes(16 * 1024 * 1024);
    await writeFile(join(source, 'big.bin'), data);
    await repo.backup(source, { tags: { backup: 'monday' } });
    randomBytes(1024).copy(data, 8 * 1024 * 1024);
    await writeFile(join(source, 'big.bin'), data);
    const { snapshotId } = await repo.backup(source, { tags: { backup: 'tuesday' } });
    expect(await repo.forget({ backup: 'monday' })).toHaveLength(1);
    return { repo, repoDir, source, snapshotId };
  }

  it("reads no pack while the unused bytes in partly used packs stay under 5 % (restic's --max-unused)", async () => {
    const { repo, source, snapshotId } = await partlyUsedRepository();
    const meter = new StorageMeter();
    // The 1–3 changed chunks (≤ 256 KiB each) are < 5 % of 16 MiB: nothing is worth rewriting.
    const summary = await meter.run(() => repo.prune({ graceMs: 0 }));
    expect(summary).toMatchObject({ packsRewritten: 0, bytesWritten: 0 });
    // Indexes, two manifests, the lock: no pack (each ~256 KiB).
    expect(meter.total().bytesRead).toBeLessThan(64 * 1024);
    expect(await repo.verify()).toMatchObject({ ok: true });
    await restoresExactly(repo, snapshotId, source, 'tuesday');
  });

  it('with maxUnusedFraction 0 rewrites the partly used packs; the snapshot left restores and verifies', async () => {
    const { repo, repoDir, source, snapshotId } = await partlyUsedRepository();
    const first = await repo.prune({ graceMs: 0, maxUnusedFraction: 0 });
    expect(first.packsRewritten).toBeGreaterThan(0);
    expect(first.packsRetired).toBeGreaterThanOrEqual(first.packsRewritten);
    const second = await repo.prune({ graceMs: 0, maxUnusedFraction: 0 });
    expect(second.packsDeleted).toBe(first.packsRetired);
    const fresh = await Repository.open({ dir: repoDir, key: KEY });
    expect(await fresh.verify()).toMatchObject({ ok: true, snapshotsChecked: 1 });
    await restoresExactly(fresh, snapshotId, source, 'tuesday');
    await expect(repo.prune({ maxUnusedFraction: 2 })).rejects.toMatchObject({
      code: 'REPO_INVALID_ARGUMENT',
      message: expect.stringMatching(/maxUnusedFraction must be between 0 and 1, got 2/),
    });
  });
});

describe.each(['directory', 's3'] as const)('prune while a backup runs (%s)', (kind) => {
  let s3: (S3Target & { stop: () => Promise<void> }) | undefined;
  beforeAll(async () => {
    if (kind === 's3') s3 = await useTestS3();
  }, 30_000);
  afterAll(async () => {
    await s3?.stop();
  });

  /** Two handles on one repository, as a node agent and the pruning process each hold their own. */
  function location() {
    if (!s3) return { dir: join(work, 'repo') };
    const store = new S3Storage({
      bucket: s3.bucket,
      prefix: `${s3.prefix}/p${randomBytes(4).toString('hex')}`,
      endpoint: s3.endpoint,
      region: s3.region,
      forcePathStyle: s3.forcePathStyle,
      credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    });
    return { dir: 's3', backend: new ObjectStoreBackend(store) };
  }

  /**
   * A node agent's backup loads the pack indexes, then dedups its files against chunks that only
   * a backup being deleted uses; prune (another process: its own Repository) runs in between.
   */
  async function racingBackup(graceMs: number) {
    const where = location();
    const agent = await Repository.init({ ...where, key: KEY, chunker: TEST_CHUNKER, packTargetBytes: 256 * 1024, durable: false });
    const shared = randomBytes(2 * 1024 * 1024);
    const old = join(work, 'old');
    await mkdir(old, { recursive: true });
    await writeFile(join(old, 'shared.bin'), shared);
    await agent.backup(old, { tags: { backup: 'old', ns: 'a', pod: 'p', volume: 'v' } });

    const next = join(work, 'next');
    await mkdir(next, { recursive: true });
    await writeFile(join(next, 'shared.bin'), shared);
    await writeFile(join(next, 'new.bin'), randomBytes(512 * 1024));
    const { bucket, reached, release } = gate();
    const running = agent.backup(next, { tags: { backup: 'next', ns: 'b', pod: 'p', volume: 'v' }, throttle: bucket });
    await reached;

    const pruner = await Repository.open({ ...where, key: KEY });
    expect(await pruner.forget({ backup: 'old' })).toHaveLength(1);
    let clock = Date.now();
    const now = () => clock;
    await pruner.prune({ graceMs, now });
    clock += 1000; // a second prune one second later: past a zero grace, well inside an hour's
    const during = await pruner.prune({ graceMs, now });

    release();
    const { snapshotId, stats } = await running;
    // It did deduplicate against the old backup's chunks.
    expect(stats.reusedChunks).toBeGreaterThan(0);
    return { where, pruner, snapshotId, next, during, advance: (ms: number) => (clock += ms), now };
  }

  it('with a zero grace (a backup outliving the grace) the new backup loses nothing: its lease holds the retired packs', async () => {
    const { pruner, during } = await racingBackup(0);
    // Past the grace, but the backup that started before the retirement was still running.
    expect(during).toMatchObject({ packsDeleted: 0, batchesHeld: 1 });
    expect(await pruner.verify()).toMatchObject({ ok: true, missingRefs: [] });
    // It has ended: the next prune deletes what it retired, after copying out what the new snapshot uses.
    const after = await pruner.prune({ graceMs: 0 });
    expect(after).toMatchObject({ batchesHeld: 0 });
    expect(after.packsDeleted).toBeGreaterThan(0);
    expect(await pruner.verify()).toMatchObject({ ok: true });
  });

  it('with a grace longer than the backup, the new backup restores byte for byte, before and after the retired data is deleted', async () => {
    const { where, pruner, snapshotId, next, during, advance, now } = await racingBackup(HOUR);
    expect(during.packsDeleted).toBe(0);
    expect(await pruner.verify()).toMatchObject({ ok: true });
    await restoresExactly(pruner, snapshotId, next, 'during-grace');

    advance(HOUR);
    const late = await pruner.prune({ graceMs: HOUR, now });
    // The old backup's packs are deleted, but not before the chunks the new backup uses were copied out.
    expect(late.packsDeleted).toBeGreaterThan(0);
    expect(late.chunksRescued).toBeGreaterThan(0);
    const fresh = await Repository.open({ ...where, key: KEY });
    expect(await fresh.verify()).toMatchObject({ ok: true, snapshotsChecked: 1 });
    await restoresExactly(fresh, snapshotId, next, 'after-grace');
  });
});

describe('index objects merged by prune', () => {
  it('a process that listed the indexes just before prune merged them still finds every pack (it lists again)', async () => {
    const repoDir = join(work, 'repo');
    const repo = await Repository.init({ dir: repoDir, key: KEY, chunker: TEST_CHUNKER, packTargetBytes: 256 * 1024, durable: false });
    const source = join(work, 'volume');
    await writeVolumeTree(source);
    await repo.backup(source, { tags: { backup: 'one' } });
    await writeFile(join(source, 'more.bin'), randomBytes(512 * 1024));
    const second = await repo.backup(source, { tags: { backup: 'two' } });
    const before = await readdir(join(repoDir, 'index'));
    expect(before).toHaveLength(2);

    // Between this process's listing of index/ and its first read of an index object, a prune
    // elsewhere merges the two objects into one and deletes them.
    let raced = false;
    class RacingBackend extends DirectoryBackend {
      override async get(key: string): Promise<Buffer> {
        if (!raced && key.startsWith('index/')) {
          raced = true;
          await repo.prune({ graceMs: HOUR });
        }
        return super.get(key);
      }
    }
    const reader = await Repository.open({ dir: repoDir, key: KEY, backend: new RacingBackend(repoDir, false) });
    expect(raced).toBe(true);
    const after = await readdir(join(repoDir, 'index'));
    expect(after).toHaveLength(1);
    expect(before).not.toContain(after[0]);
    expect(await reader.verify()).toMatchObject({ ok: true, snapshotsChecked: 2, damagedIndexes: [] });
    await restoresExactly(reader, second.snapshotId, source, 'two');
    // Every file read again (force): each chunk found in a known pack.
    expect((await reader.backup(source, { tags: { backup: 'three' }, force: true })).stats.newChunks).toBe(0);
  });
});

describe('prune killed half-way', () => {
  /** Runs `repo prune --grace 0` in a child process and SIGKILLs it at its first progress line of `phase`. */
  function pruneKilledAt(repoDir: string, phase: string): Promise<NodeJS.Signals | null> {
    // node itself (tsx as a loader), so the SIGKILL hits the process doing the work, not a wrapper.
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--conditions=@stowage/source', 'src/cli.ts', 'prune', '--repo', repoDir, '--grace', '0'],
      {
        cwd: packageDir,
        env: { ...process.env, STOWAGE_REPO_KEY: KEY },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (data: Buffer) => {
      stderr += data.toString();
      if (stderr.includes(`prune: ${phase} `)) child.kill('SIGKILL');
    });
    return new Promise((resolve, reject) => {
      child.on('error', reject);
      child.on('exit', (code, signal) => (signal ? resolve(signal) : reject(new Error(`prune exited ${code} before ${phase}: ${stderr}`))));
    });
  }

  it('SIGKILL while retiring and while deleting, then prune again: verify is clean, the live backup restores, the garbage is gone', async () => {
    const repoDir = join(work, 'repo');
    // One pack per chunk or two: many small steps to be killed in the middle of.
    const repo = await Repository.init({ dir: repoDir, key: KEY, chunker: TEST_CHUNKER, packTargetBytes: 64 * 1024 });
    const kept = join(work, 'kept');
    await writeVolumeTree(kept);
    const keptSnap = await repo.backup(kept, { tags: { backup: 'kept', ns: 'a', pod: 'p', volume: 'v' } });
    const bytesWithKept = await storedBytes(repoDir);
    const doomed = join(work, 'doomed');
    await mkdir(doomed, { recursive: true });
    await writeFile(join(doomed, 'only-here.bin'), randomBytes(8 * 1024 * 1024));
    await repo.backup(doomed, { tags: { backup: 'doomed', ns: 'b', pod: 'p', volume: 'v' } });
    await repo.forget({ backup: 'doomed' });

    expect(await pruneKilledAt(repoDir, 'retire')).toBe('SIGKILL');
    const afterRetireKill = await Repository.open({ dir: repoDir, key: KEY });
    expect(await afterRetireKill.verify()).toMatchObject({ ok: true });
    // The next run picks up the half-done retirement (the killed run left no batch record).
    expect((await afterRetireKill.prune({ graceMs: 0 })).packsRetired).toBeGreaterThan(0);

    expect(await pruneKilledAt(repoDir, 'delete')).toBe('SIGKILL');
    const afterDeleteKill = await Repository.open({ dir: repoDir, key: KEY });
    expect(await afterDeleteKill.verify()).toMatchObject({ ok: true });
    await afterDeleteKill.prune({ graceMs: 0 });

    const fresh = await Repository.open({ dir: repoDir, key: KEY });
    expect(await fresh.verify()).toMatchObject({ ok: true, snapshotsChecked: 1 });
    await restoresExactly(fresh, keptSnap.snapshotId, kept, 'kept');
    expect(await storedBytes(repoDir)).toBe(bytesWithKept);
  });
});

describe('verify while a prune is cut short in its delete phase', () => {
  it('a retired pack whose file is already deleted is not damage; a live snapshot that needs a deleted chunk still is', async () => {
    const repoDir = join(work, 'repo');
    const repo = await Repository.init({ dir: repoDir, key: KEY, chunker: TEST_CHUNKER, packTargetBytes: 64 * 1024 });
    const kept = join(work, 'kept');
    await writeVolumeTree(kept);
    await repo.backup(kept, { tags: { backup: 'kept' } });
    const doomed = join(work, 'doomed');
    await mkdir(doomed, { recursive: true });
    await writeFile(join(doomed, 'only-here.bin'), randomBytes(1024 * 1024));
    const doomedSnap = await repo.backup(doomed, { tags: { backup: 'doomed' } });
    const manifestPath = join(repoDir, 'snapshots', doomedSnap.snapshotId);
    await cp(manifestPath, join(work, 'doomed-manifest'));
    await repo.forget({ backup: 'doomed' });
    expect((await repo.prune({ graceMs: 0 })).packsRetired).toBeGreaterThan(0);

    // What a prune killed between deleting a retired pack and deleting its retired index leaves
    // (it deletes in that order, and the next run finishes the job).
    const retired = await readdir(join(repoDir, 'prune', 'retired-index'));
    expect(retired.length).toBeGreaterThan(0);
    await rm(join(repoDir, 'packs', retired[0]!.slice(0, 2), retired[0]!));
    const cut = await Repository.open({ dir: repoDir, key: KEY });
    expect(await cut.verify()).toMatchObject({ ok: true, damaged: [], missingRefs: [] });

    // The same missing pack is reported when a snapshot needs it: the forgotten backup's manifest put back.
    await cp(join(work, 'doomed-manifest'), manifestPath);
    const needed = await (await Repository.open({ dir: repoDir, key: KEY })).verify();
    expect(needed.ok).toBe(false);
    expect(needed.missingRefs.map((ref) => ref.path)).toContain('only-here.bin');
  });
});

describe('repo forget and repo prune on the command line', () => {
  function capture() {
    const out: string[] = [];
    const err: string[] = [];
    return { io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l) }, out, err };
  }

  it('forget deletes the tagged snapshots, prune reports progress and a summary; bad flags are usage errors naming the flag', async () => {
    const repoDir = join(work, 'repo');
    const repo = await Repository.init({ dir: repoDir, key: KEY, chunker: TEST_CHUNKER, durable: false });
    const source = join(work, 'volume');
    await writeVolumeTree(source);
    await repo.backup(source, { tags: { backup: 'monday' } });
    const env = { STOWAGE_REPO_KEY: KEY };

    const noTag = capture();
    expect(await runRepoCli(['forget', '--repo', repoDir], env, noTag.io)).toBe(ExitCode.Usage);
    expect(noTag.err[0]).toMatch(/missing --tag/);
    const badTag = capture();
    expect(await runRepoCli(['forget', '--repo', repoDir, '--tag', 'monday'], env, badTag.io)).toBe(ExitCode.Usage);
    expect(badTag.err[0]).toMatch(/--tag "monday" must be KEY=VALUE/);
    const badGrace = capture();
    expect(await runRepoCli(['prune', '--repo', repoDir, '--grace', 'soon'], env, badGrace.io)).toBe(ExitCode.Usage);
    expect(badGrace.err[0]).toMatch(/--grace "soon" is not a duration/);

    const forget = capture();
    expect(await runRepoCli(['forget', '--repo', repoDir, '--tag', 'backup=monday'], env, forget.io)).toBe(ExitCode.Ok);
    expect(forget.out[0]).toMatch(/^forgot 1 snapshots: [0-9a-f]{32}/);

    const first = capture();
    expect(await runRepoCli(['prune', '--repo', repoDir, '--grace', '0'], env, first.io)).toBe(ExitCode.Ok);
    expect(first.err.some((l) => /^prune: sweep \d+\/\d+$/.test(l))).toBe(true);
    expect(first.out.join('\n')).toMatch(/retired [1-9]\d* packs/);
    const second = capture();
    expect(await runRepoCli(['prune', '--repo', repoDir, '--grace', '0s', '--json'], env, second.io)).toBe(ExitCode.Ok);
    const summary = JSON.parse(second.out.join('\n'));
    expect(summary.bytesFreed).toBeGreaterThan(0);
    expect(summary.batchesPending).toBe(0);
    expect(await storedBytes(repoDir)).toBe(0);
  });
});
