import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RestoreState, restoreLayout, writeRestoreArchive } from '@stowage/pipeline';
import { FileSystemStorage, type ObjectStore, S3Storage } from '@stowage/storage';
import { uniquePrefix, useTestRedis, useTestS3 } from '@stowage/testing';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncRestoreCatalogue } from '../src/restore-sync.js';
import { RestoreReads } from '../src/restore-view.js';

/*
 * A finished restore's archive on each storage backend: written from one install's Redis, then
 * found by a fresh install's restore sync and read back (events in more than one segment).
 */
describe.each(['directory', 's3'] as const)('restore archive and restore sync on %s storage', (kind) => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let redis: Redis;
  let storage: ObjectStore;
  let close: () => Promise<void>;
  const logger = pino({ level: 'silent' });

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    redis = new Redis(redisHandle.url);
    if (kind === 'directory') {
      const dir = await mkdtemp(join(tmpdir(), 'stowage-restore-sync-'));
      storage = new FileSystemStorage(dir);
      close = () => rm(dir, { recursive: true, force: true });
    } else {
      const s3 = await useTestS3();
      const s3Storage = new S3Storage({
        bucket: s3.bucket,
        prefix: s3.prefix,
        endpoint: s3.endpoint,
        region: s3.region,
        forcePathStyle: s3.forcePathStyle,
        credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
      });
      storage = s3Storage;
      close = async () => {
        await s3Storage.deletePrefix('');
        s3Storage.close();
        await s3.stop();
      };
    }
  }, 30_000);
  afterAll(async () => {
    await close?.();
    await redis?.quit();
    await redisHandle?.stop();
  });

  it('a fresh install lists the archived restore once, reads its events from any id, leaves running ones alone, and drops it when storage does', async () => {
    const first = new RestoreState({ redis, prefix: uniquePrefix() });
    const name = 'rs-many-events';
    await first.createRestore({ name, uid: 'u-1', backupName: 'bk', spec: {}, phase: 'New', createdAt: 1_000 });
    await first.transitionPhase(name, ['New'], 'InProgress', { startedAt: 1_001 });
    for (let i = 0; i < 2_100; i++) await first.appendEvent(name, 'tier.progress', { i });
    await first.setCounter(name, 'totalItems', 7);
    await first.transitionPhase(name, ['InProgress'], 'Completed', { completedAt: 2_000 });
    const ended = await first.getRestore(name);
    const archive = (await writeRestoreArchive(storage, first, ended!))!;
    expect(archive.events?.segments.length).toBe(2);

    // A restore.json that is not an ended one is reported, not catalogued.
    await storage.putObject(
      restoreLayout('rs-odd').record,
      JSON.stringify({ ...archive, record: { ...archive.record, name: 'rs-odd', phase: 'InProgress' } }),
    );

    const fresh = new RestoreState({ redis, prefix: uniquePrefix() });
    await fresh.createRestore({ name: 'rs-running', uid: 'u-2', backupName: 'bk', spec: {}, phase: 'InProgress', createdAt: 3_000 });
    const synced = await syncRestoreCatalogue({ restores: fresh, storage, logger, now: () => 5_000 });
    expect(synced.added).toEqual([name]);
    expect(synced.skipped).toEqual([{ name: 'rs-odd', reason: expect.stringContaining('phase InProgress') }]);
    expect((await syncRestoreCatalogue({ restores: fresh, storage, logger })).added).toEqual([]);

    const listed = await fresh.listRestores({ limit: 10 });
    expect(listed.items.map((r) => [r.name, r.phase])).toEqual([
      ['rs-running', 'InProgress'],
      [name, 'Completed'],
    ]);
    expect(await fresh.counters(name)).toEqual({ totalItems: 7 });

    const reads = new RestoreReads(fresh, storage);
    const found = await reads.find(name);
    expect(found?.rec).toMatchObject({ name, phase: 'Completed', archivedAt: 5_000, completedAt: 2_000 });
    const all = await first.readEvents(name, '0', { count: 10_000 });
    expect(all.length).toBeGreaterThan(2_100);
    expect(all.at(-1)).toMatchObject({ type: 'restore.phase', data: { to: 'Completed' } });
    const replay = async (after: string) => {
      const out = [];
      for await (const segment of reads.archivedEvents(found!.rec, after)) out.push(...segment);
      return out;
    };
    expect(await replay('0')).toEqual(all);
    expect(await replay(all[2_050]!.id)).toEqual(all.slice(2_051));
    expect(await replay(all.at(-1)!.id)).toEqual([]);

    await storage.deletePrefix(restoreLayout(name).dir);
    const after = await syncRestoreCatalogue({ restores: fresh, storage, logger });
    expect(after.removed).toEqual([name]);
    expect(await reads.find(name)).toBeUndefined();
    expect((await fresh.listRestores({ limit: 10 })).items.map((r) => r.name)).toEqual(['rs-running']);
  }, 120_000);
});
