import { createHash } from 'node:crypto';
import { type S3FaultProxy, type S3Target, startS3FaultProxy, useTestS3 } from '@stowage/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type S3Storage, StorageErrorCode } from '../src/index.js';
import { openS3Storage } from './support/backends.js';

/*
 * S3Storage behind a proxy that injects what object stores do under load and failure (503
 * SlowDown, 500 InternalError, uploads cut off mid-body, latency). The SDK's retry strategy must
 * absorb them; an upload that never gets through must leave nothing a reader trusts.
 */

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function* stream(total: number, fill: number): AsyncGenerator<Uint8Array> {
  for (let off = 0; off < total; off += 256 * 1024) yield Buffer.alloc(Math.min(256 * 1024, total - off), fill);
}

describe('S3 storage through injected faults', () => {
  let s3: S3Target & { stop: () => Promise<void> };
  let proxy: S3FaultProxy;
  let storage: S3Storage;
  beforeAll(async () => {
    s3 = await useTestS3();
    proxy = await startS3FaultProxy(s3.endpoint);
  }, 30_000);
  afterAll(async () => {
    await proxy?.close();
    await s3?.stop();
  });
  beforeEach(() => {
    proxy.setPlan({});
    storage = openS3Storage({ ...s3, endpoint: proxy.endpoint, prefix: `${s3.prefix}/t${Math.random().toString(36).slice(2, 8)}` });
  });
  afterEach(async () => {
    proxy.setPlan({});
    await storage.deletePrefix('');
    storage.close();
  });

  it('every operation completes with the right bytes through SlowDown, 500s, cut uploads and latency', async () => {
    const before = { ...proxy.stats };
    // About one request in five fails: 6 attempts each (the SDK's standard strategy) get every one through.
    proxy.setPlan({ slowDown: 0.08, internalError: 0.05, dropMidUpload: 0.08, latencyMs: [0, 15], seed: 7 });
    const objects = Array.from({ length: 30 }, (_, i) => ({
      key: `backups/f/items/${String(i).padStart(2, '0')}.jsonl`,
      bytes: Buffer.alloc(i % 5 === 0 ? 300 * 1024 : 200 + i, i),
    }));
    for (const o of objects) await storage.putObject(o.key, o.bytes);
    const bigSize = 12 * 1024 * 1024 + 5;
    await storage.putStream('backups/f/f.tar.gz', stream(bigSize, 9)); // multipart: 3 parts
    await storage.putObject('backups/f/items/00.jsonl', objects[0]!.bytes); // a repeated put

    expect(await storage.list('backups/f/items/')).toEqual(objects.map((o) => o.key));
    for (const o of objects) expect(sha((await storage.getObject(o.key))!)).toBe(sha(o.bytes));
    const big = await storage.getObject('backups/f/f.tar.gz');
    expect(big?.length).toBe(bigSize);
    expect(big?.every((b) => b === 9)).toBe(true);
    expect(await storage.deletePrefix('backups/f/')).toBe(31);
    expect(await storage.list('')).toEqual([]);

    const injected = {
      slowDown: proxy.stats.slowDown - before.slowDown,
      internalError: proxy.stats.internalError - before.internalError,
      dropMidUpload: proxy.stats.dropMidUpload - before.dropMidUpload,
    };
    expect(injected.slowDown).toBeGreaterThan(0);
    expect(injected.internalError).toBeGreaterThan(0);
    expect(injected.dropMidUpload).toBeGreaterThan(0);
  }, 120_000);

  it('a put cut off on every attempt fails, and a reader never trusts what it left', async () => {
    await storage.putObject('backups/g/velero-backup.json', 'old, whole');
    proxy.setPlan({ decide: (req) => (req.method === 'PUT' ? 'dropMidUpload' : undefined) });
    const attemptsBefore = proxy.stats.dropMidUpload;
    const fresh = Buffer.alloc(64 * 1024, 'n');
    await expect(storage.putObject('backups/g/new.json', fresh)).rejects.toMatchObject({ code: StorageErrorCode.io });
    await expect(storage.putObject('backups/g/velero-backup.json', fresh)).rejects.toMatchObject({ code: StorageErrorCode.io });
    expect(proxy.stats.dropMidUpload - attemptsBefore).toBe(12); // 6 attempts each: the SDK retried
    proxy.setPlan({});
    // Whatever the server kept of the cut bodies, a read gives the whole old object, nothing, or a checksum error.
    for (const [key, old] of [
      ['backups/g/new.json', undefined],
      ['backups/g/velero-backup.json', 'old, whole'],
    ] as const) {
      const read = await storage.getObject(key).then(
        (bytes) => ({ bytes }),
        (err: { code?: string }) => ({ code: err.code }),
      );
      if ('bytes' in read) expect(read.bytes?.toString()).toBe(old);
      else expect(read.code).toBe(StorageErrorCode.corruptObject);
    }
  }, 120_000);

  it('a streamed upload whose parts are cut off fails, leaving the old object and no visible temp object', async () => {
    await storage.putObject('backups/h/h.tar.gz', 'old tarball');
    proxy.setPlan({ decide: (req) => (req.method === 'PUT' && req.url.includes('partNumber=') ? 'dropMidUpload' : undefined) });
    await expect(storage.putStream('backups/h/h.tar.gz', stream(11 * 1024 * 1024, 3))).rejects.toMatchObject({ code: StorageErrorCode.io });
    proxy.setPlan({});
    expect((await storage.getObject('backups/h/h.tar.gz'))?.toString()).toBe('old tarball');
    expect(await storage.list('backups/h/')).toEqual(['backups/h/h.tar.gz']);
  }, 120_000);
});
