import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { FileSystemStorage, type ObjectStore, S3Storage, StorageMeter } from '@stowage/storage';
import { describeTree, type S3Target, useTestS3, writeVolumeTree } from '@stowage/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ObjectStoreBackend, Repository, runRepoCli } from '../src/index.js';
import { TEST_CHUNKER, TEST_PACK_BLOB_MAX } from './test-settings.js';

/*
 * The repository on the object-store interface: the same backup → verify → restore on a
 * directory store and on an S3 bucket (a private S3 server, or STOWAGE_TEST_S3_ENDPOINT).
 */

const KEY = 'correct horse battery staple';

describe.each(['directory', 's3'] as const)('repository on an object store (%s)', (kind) => {
  let s3: (S3Target & { stop: () => Promise<void> }) | undefined;
  let work: string;
  let store: ObjectStore;
  beforeAll(async () => {
    if (kind === 's3') s3 = await useTestS3();
  }, 30_000);
  afterAll(async () => {
    await s3?.stop();
  });
  beforeEach(async () => {
    work = await mkdtemp(join(tmpdir(), `stowage-repo-store-${kind}-`));
    store = s3
      ? new S3Storage({
          bucket: s3.bucket,
          prefix: `${s3.prefix}/r${Math.random().toString(36).slice(2, 8)}`,
          endpoint: s3.endpoint,
          region: s3.region,
          forcePathStyle: s3.forcePathStyle,
          credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
        })
      : new FileSystemStorage(join(work, 'store'));
    await writeVolumeTree(join(work, 'volume'));
  });
  afterEach(async () => {
    await store.deletePrefix('');
    (store as { close?: () => void }).close?.();
    await rm(work, { recursive: true, force: true }).catch(() => {});
  });

  const open = (options: { init?: boolean } = {}) => {
    const backend = new ObjectStoreBackend(store);
    const common = { dir: backend.location, key: KEY, backend };
    return options.init
      ? Repository.init({ ...common, chunker: TEST_CHUNKER, packBlobMaxBytes: TEST_PACK_BLOB_MAX })
      : Repository.open(common);
  };

  it('backs up, verifies and restores a tree byte for byte; the repository lives under repository/ in the store', async () => {
    const repo = await open({ init: true });
    const { snapshotId, stats } = await repo.backup(join(work, 'volume'), { tags: { volume: 'data' } });
    expect(stats.newChunks).toBeGreaterThan(10);
    const keys = await store.list('');
    expect(keys.length).toBeGreaterThan(3);
    expect(keys.every((key) => key.startsWith('repository/'))).toBe(true);
    expect(keys).toContain('repository/config.json');

    // A second process opens what the first wrote.
    const reopened = await open();
    const report = await reopened.verify();
    expect(report).toMatchObject({ ok: true, damaged: [], missingRefs: [] });
    expect(report.chunksChecked).toBeGreaterThanOrEqual(stats.newChunks);
    await reopened.restore(snapshotId, join(work, 'restored'));
    expect(await describeTree(join(work, 'restored'))).toEqual(await describeTree(join(work, 'volume')));
  });

  it('a restore reads each pack it needs in one ranged read, not one per chunk', async () => {
    const backend = new ObjectStoreBackend(store);
    // Every chunk packed (the default), small chunks, packs of 1 MiB: four 3 MiB files restored at
    // once read from four packs at a time (their spans must not evict each other).
    const repo = await Repository.init({
      dir: backend.location,
      key: KEY,
      backend,
      chunker: TEST_CHUNKER,
      packTargetBytes: 1024 * 1024,
    });
    const source = join(work, 'big');
    await mkdir(source);
    for (let i = 0; i < 4; i++) await writeFile(join(source, `random-${i}.bin`), randomBytes(3 * 1024 * 1024));
    for (let i = 0; i < 20; i++) await writeFile(join(source, `small-${i}.txt`), `file ${i}\n`.repeat(100));
    const { snapshotId, stats } = await repo.backup(source);
    expect(stats.newChunks).toBeGreaterThan(100);
    const packs = (await store.list('repository/packs/')).length;
    expect(packs).toBeGreaterThanOrEqual(8);

    const meter = new StorageMeter();
    await meter.run(() => repo.restore(snapshotId, join(work, 'restored')));
    expect(await describeTree(join(work, 'restored'))).toEqual(await describeTree(source));
    // The snapshot, its tree, and one read per pack (~190 chunks): not one per chunk. A pack closes
    // past its target by its last chunk: a span reaches the target plus the largest chunk.
    const gets = meter.total().requests.get;
    expect(gets, `${packs} packs`).toBeLessThanOrEqual(packs + 3);
    // 12 MiB and the small files, each byte once: the files restored side by side share packs, and
    // what an evicted span still owed to a slower file was kept, not read again.
    expect(meter.total().bytesRead).toBeLessThan(12.5 * 1024 * 1024);
  });

  it('a second init of the same repository is refused (create-only config)', async () => {
    await open({ init: true });
    await expect(open({ init: true })).rejects.toMatchObject({ code: 'REPO_ALREADY_INITIALISED' });
  });

  if (kind === 's3') {
    it('repo verify and repo restore --repo s3://bucket/prefix/repository work on it', async () => {
      const repo = await open({ init: true });
      const { snapshotId } = await repo.backup(join(work, 'volume'));
      const s3store = store as S3Storage;
      const env = {
        STOWAGE_REPO_KEY: KEY,
        STOWAGE_S3_ENDPOINT: s3!.endpoint,
        STOWAGE_S3_REGION: s3!.region,
        AWS_ACCESS_KEY_ID: s3!.accessKeyId,
        AWS_SECRET_ACCESS_KEY: s3!.secretAccessKey,
      };
      const url = `s3://${s3store.bucket}/${s3store.prefix}/repository`;
      const out: string[] = [];
      const io = { out: (l: string) => out.push(l), err: (l: string) => out.push(`ERR ${l}`) };
      expect(await runRepoCli(['verify', '--repo', url], env, io), out.join('\n')).toBe(0);
      expect(out.join('\n')).toMatch(/no damage/);
      expect(await runRepoCli(['restore', '--repo', url, '--snapshot', snapshotId, '--target', join(work, 'restored')], env, io)).toBe(0);
      expect(await describeTree(join(work, 'restored'))).toEqual(await describeTree(join(work, 'volume')));
      expect(await runRepoCli(['verify', '--repo', `s3://${s3store.bucket}`], env, io)).toBe(1);
      expect(out.at(-1)).toMatch(/REPO_INVALID_ARGUMENT: --repo s3:\/\/.*: name the repository inside the bucket/);
    });

    it('a pack changed in the bucket after it was written is reported by verify, not restored as good data', async () => {
      const repo = await open({ init: true });
      const { snapshotId } = await repo.backup(join(work, 'volume'));
      const packs = (await store.list('repository/packs/')).sort();
      expect(packs.length).toBeGreaterThan(0);
      // Bit rot: the stored bytes change, the recorded checksum stays.
      const s3store = store as S3Storage;
      const full = `${s3store.prefix}/${packs[0]}`;
      const old = await s3store.client.send(new GetObjectCommand({ Bucket: s3store.bucket, Key: full }));
      const bytes = Buffer.from((await old.Body!.transformToByteArray()) as Uint8Array);
      bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
      await s3store.client.send(new PutObjectCommand({ Bucket: s3store.bucket, Key: full, Body: bytes, Metadata: old.Metadata }));

      const report = await (await open()).verify();
      expect(report.ok).toBe(false);
      expect(report.damaged.length).toBeGreaterThan(0);
      await expect((await open()).restore(snapshotId, join(work, 'restored'))).rejects.toThrow();
    });
  }
});
