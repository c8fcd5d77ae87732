import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type S3FaultProxy, type S3Target, startS3FaultProxy, useTestS3 } from '@stowage/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FileSystemStorage, type ObjectStore, processStorageMeter, type S3Storage, type StorageCost, StorageMeter } from '../src/index.js';
import { openS3Storage } from './support/backends.js';

/*
 * The request meter against the server's side of the wire: a proxy in front of the S3 server
 * counts what reached it (its own classification of each request), and the meter of the work
 * must say the same — retries of throttled requests included, an upload cut off before any
 * answer excluded on both sides.
 */

async function* stream(total: number, fill: number): AsyncGenerator<Uint8Array> {
  for (let off = 0; off < total; off += 256 * 1024) yield Buffer.alloc(Math.min(256 * 1024, total - off), fill);
}

/** One of everything a backup, restore or prune asks of a store. */
async function workload(storage: ObjectStore, big: boolean): Promise<void> {
  for (let i = 0; i < 12; i++) await storage.putObject(`backups/m/items/${i}.jsonl`, Buffer.alloc(1000 + i, i));
  await storage.putStream('backups/m/m.tar.gz', stream(big ? 12 * 1024 * 1024 + 5 : 300 * 1024, 7)); // 2 parts of 8 MiB when big
  expect((await storage.getObject('backups/m/items/3.jsonl'))?.length).toBe(1003);
  expect(await storage.getObject('backups/m/none.json')).toBeUndefined(); // a 404 is a request too
  let streamed = 0;
  for await (const chunk of (await storage.getStream('backups/m/m.tar.gz'))!) streamed += chunk.length;
  expect(streamed).toBeGreaterThan(0);
  expect((await storage.getRange('backups/m/items/5.jsonl', 10, 100))?.length).toBe(100);
  expect(await storage.head('backups/m/items/1.jsonl')).toMatchObject({ size: 1001 });
  expect(await storage.exists('backups/m/items/99.jsonl')).toBe(false);
  expect(await storage.list('backups/m/items/')).toHaveLength(12);
  await storage.delete('backups/m/items/0.jsonl');
  expect(await storage.deletePrefix('backups/m/')).toBe(12);
}

function proxyCost(proxy: S3FaultProxy, before: S3FaultProxy['stats']): StorageCost {
  const requests = { ...proxy.stats.byOperation };
  for (const op of Object.keys(requests) as Array<keyof typeof requests>) requests[op] -= before.byOperation[op];
  return { requests, bytesWritten: proxy.stats.bytesWritten - before.bytesWritten, bytesRead: proxy.stats.bytesRead - before.bytesRead };
}

const snapshot = (proxy: S3FaultProxy) => structuredClone(proxy.stats) as S3FaultProxy['stats'];

describe('storage request meter', () => {
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

  it('counts what the S3 server answered, by operation and bytes, multipart parts and 404s included', async () => {
    const before = snapshot(proxy);
    const processBefore = processStorageMeter.total();
    const meter = new StorageMeter();
    await meter.run(() => workload(storage, true));
    const seen = proxyCost(proxy, before);
    expect(meter.total()).toEqual(seen);
    // 12 puts, the multipart upload (create, 2 parts, complete), its copy to the key: 17 puts.
    expect(seen.requests.put).toBe(17);
    expect(seen.bytesWritten).toBe(12 * 1000 + 66 + 12 * 1024 * 1024 + 5);
    expect(seen.requests.list).toBeGreaterThanOrEqual(2);
    // The process's own total moved by as much (the meter of a process, for its Prometheus counters).
    const processAfter = processStorageMeter.total();
    expect(processAfter.requests.put - processBefore.requests.put).toBe(17);
  }, 60_000);

  it('counts every attempt of a throttled or failed request, as the server saw them; a cut upload on neither side', async () => {
    proxy.setPlan({ slowDown: 0.15, internalError: 0.1, dropMidUpload: 0.1, seed: 3 });
    const before = snapshot(proxy);
    const meter = new StorageMeter();
    await meter.run(() => workload(storage, false));
    proxy.setPlan({});
    const seen = proxyCost(proxy, before);
    expect(proxy.stats.slowDown - before.slowDown + proxy.stats.internalError - before.internalError).toBeGreaterThan(0);
    expect(proxy.stats.dropMidUpload - before.dropMidUpload).toBeGreaterThan(0);
    expect(meter.total()).toEqual(seen);
  }, 60_000);

  it('attributes requests to the work that made them: concurrent scopes apart, nested scopes both', async () => {
    const a = new StorageMeter();
    const b = new StorageMeter();
    const outer = new StorageMeter();
    await outer.run(() =>
      Promise.all([
        a.run(async () => {
          for (let i = 0; i < 5; i++) await storage.putObject(`a/${i}`, 'aaaa');
        }),
        b.run(async () => {
          for (let i = 0; i < 3; i++) await storage.exists(`b/${i}`);
          await new Promise((resolve) => setTimeout(resolve, 5));
          await storage.getObject('a/0');
        }),
      ]),
    );
    expect(a.total()).toMatchObject({ requests: { put: 5, get: 0, head: 0 }, bytesWritten: 20 });
    expect(b.total().requests).toMatchObject({ put: 0, head: 3, get: 1 });
    expect(outer.total().requests).toMatchObject({ put: 5, head: 3, get: 1 });
    // take(): what was counted since the last take, for adding to a shared total twice without double counting.
    expect(a.take().requests.put).toBe(5);
    await a.run(() => storage.putObject('a/9', 'x'));
    expect(a.take()).toMatchObject({ requests: { put: 1 }, bytesWritten: 1 });
  });

  it('counts a directory as the requests S3 answers for the same calls', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stowage-meter-'));
    try {
      const onS3 = new StorageMeter();
      await onS3.run(() => workload(storage, false));
      const onDisk = new StorageMeter();
      await onDisk.run(() => workload(new FileSystemStorage(dir), false));
      // What the workload asks for, one request each (S3 may add retries of its own: the test above counts those).
      expect(onDisk.total().requests).toEqual({ put: 13, get: 4, head: 2, list: 2, delete: 2 });
      expect(onDisk.total().bytesWritten).toBe(onS3.total().bytesWritten);
      expect(onDisk.total().bytesRead).toBe(onS3.total().bytesRead);
      for (const op of ['put', 'get', 'head', 'list', 'delete'] as const) {
        expect(onS3.total().requests[op]).toBeGreaterThanOrEqual(onDisk.total().requests[op]);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
