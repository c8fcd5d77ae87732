/*
 * Schedules kept in backup storage: every change through the API is written there, and backup
 * sync brings them back — paused — into a Redis that lost them (here: a fresh key prefix on the
 * same storage, as a new install on the same bucket sees it; e2e/schedules-recovery.e2e.test.ts
 * does it with FLUSHALL and real processes).
 */
import { SCHEDULE_NAME_LABEL, validateScheduleRequest } from '@stowage/core';
import {
  BackupState,
  jobSchedulerId,
  ScheduleArchive,
  ScheduleControl,
  ScheduleStore,
  scheduleLayout,
  statePrefixFor,
  writeBackupArchive,
} from '@stowage/pipeline';
import { createQueue } from '@stowage/queue';
import { FileSystemStorage, writeBackupMetadata } from '@stowage/storage';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import type { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncBackupCatalogue } from '../src/backup-sync.js';
import { auth, type Harness, startHarness } from './api-harness.js';

const silent = { info: () => undefined, warn: () => undefined };

let redis: { url: string; stop: () => Promise<void> };
let h: Harness;
const queues: Queue[] = [];

beforeAll(async () => {
  redis = await useTestRedis();
  h = await startHarness(redis.url);
});
afterAll(async () => {
  for (const q of queues) await q.close();
  await h?.close();
  await redis?.stop();
});

const call = (method: 'POST' | 'PATCH' | 'DELETE' | 'GET', url: string, payload?: unknown) =>
  h.app.inject({ method, url, headers: auth, ...(payload !== undefined ? { payload: payload as object } : {}) });

/** Schedules on a Redis that knows none of them (a fresh key prefix), over the harness's storage. */
function freshInstall() {
  const prefix = uniquePrefix();
  const backupsQueue = createQueue('backups', { connection: h.redis, prefix });
  queues.push(backupsQueue);
  const storage = new FileSystemStorage(h.storageDir);
  const state = new BackupState({ redis: h.redis, prefix: statePrefixFor(prefix) });
  const store = new ScheduleStore(h.redis, statePrefixFor(prefix));
  const archive = new ScheduleArchive(storage);
  const control = new ScheduleControl({ store, archive, backupsQueue, state });
  return { storage, state, backupsQueue, schedules: { store, archive, control } };
}

describe('schedules in backup storage', () => {
  it('every change is written to storage; sync brings the schedules back paused, with their backups, once; a deleted one stays deleted', async () => {
    const created = await call('POST', '/v1/schedules', {
      name: 'nightly',
      spec: { schedule: '0 3 * * *', skipImmediately: true, template: { includedNamespaces: ['shop'], ttl: '72h' } },
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(
      (await call('POST', '/v1/schedules', { name: 'weekly', spec: { schedule: '0 4 * * 0', paused: true, template: {} } })).statusCode,
    ).toBe(201);
    const patched = await call('PATCH', '/v1/schedules/nightly', { spec: { template: { includedNamespaces: ['shop', 'media'] } } });
    expect(patched.statusCode, patched.body).toBe(200);
    expect((await call('POST', '/v1/schedules', { name: 'gone', spec: { schedule: '0 5 * * *', template: {} } })).statusCode).toBe(201);
    expect((await call('DELETE', '/v1/schedules/gone')).statusCode).toBe(200);

    const archive = new ScheduleArchive(new FileSystemStorage(h.storageDir));
    expect(await archive.read('nightly')).toMatchObject({
      spec: { schedule: '0 3 * * *', skipImmediately: true, template: { includedNamespaces: ['shop', 'media'] } },
    });
    expect(await archive.read('gone')).toBeUndefined();

    // A backup the nightly schedule made, finished and archived by the first install.
    const first = new BackupState({ redis: h.redis, prefix: h.prefix });
    const backup = 'nightly-20260301030000';
    await first.createBackup({
      name: backup,
      uid: 'uid-1',
      spec: { includedNamespaces: ['shop'] },
      phase: 'InProgress',
      createdAt: Date.parse('2026-03-01T03:00:00Z'),
      labels: { [SCHEDULE_NAME_LABEL]: 'nightly' },
    });
    await first.transitionPhase(backup, ['InProgress'], 'Completed', { completedAt: Date.parse('2026-03-01T03:01:00Z') });
    const storage = new FileSystemStorage(h.storageDir);
    await writeBackupArchive(storage, first, (await first.getBackup(backup))!);
    await writeBackupMetadata(storage, backup, { kind: 'Backup', status: { phase: 'Completed' } });

    // ---- a Redis that lost everything, the same storage ----
    const fresh = freshInstall();
    const [a, b] = await Promise.all([
      syncBackupCatalogue({ state: fresh.state, schedules: fresh.schedules, storage: fresh.storage, logger: silent }),
      syncBackupCatalogue({ state: fresh.state, schedules: fresh.schedules, storage: fresh.storage, logger: silent }),
    ]);
    expect([...(a.schedules?.added ?? []), ...(b.schedules?.added ?? [])].sort()).toEqual(['nightly', 'weekly']);
    expect([...a.added, ...b.added]).toEqual([backup]);

    const nightly = await fresh.schedules.store.get('nightly');
    expect(nightly?.spec).toEqual({
      schedule: '0 3 * * *',
      skipImmediately: true,
      template: { includedNamespaces: ['shop', 'media'] },
      paused: true,
    });
    expect(nightly?.createdAt).toBe(Date.parse(JSON.parse(created.body).createdAt));
    expect(await fresh.schedules.store.get('gone')).toBeUndefined();
    // Paused: no job scheduler ticks for it. Its backup is its last, and its last successful.
    expect(await fresh.backupsQueue.getJobScheduler(jobSchedulerId('nightly'))).toBeUndefined();
    const status = await fresh.schedules.control.status(nightly!);
    expect(status).toMatchObject({
      paused: true,
      nextRunAt: undefined,
      lastBackup: { name: backup },
      lastSuccessfulBackup: { name: backup },
    });

    // Again: nothing more.
    const again = await syncBackupCatalogue({ state: fresh.state, schedules: fresh.schedules, storage: fresh.storage, logger: silent });
    expect(again.schedules?.added).toEqual([]);
    expect(again.added).toEqual([]);
  });

  it('a schedule storage cannot keep is not created; one made before storage kept schedules is written at start', async () => {
    const fresh = freshInstall();
    const refusing = new FileSystemStorage(h.storageDir);
    refusing.putObject = async () => {
      throw new Error('storage refused the write');
    };
    const control = new ScheduleControl({
      store: fresh.schedules.store,
      archive: new ScheduleArchive(refusing),
      backupsQueue: fresh.backupsQueue,
      state: fresh.state,
    });
    const spec = { schedule: '0 6 * * *', template: {} };
    const validated = validateScheduleRequest({ name: 'unkept', spec });
    if (!validated.ok) throw new Error(JSON.stringify(validated.problems));
    await expect(control.create('unkept', spec, validated.value)).rejects.toThrow('storage refused the write');
    expect(await fresh.schedules.store.get('unkept')).toBeUndefined();
    expect(await fresh.backupsQueue.getJobScheduler(jobSchedulerId('unkept'))).toBeUndefined();

    // In Redis only (an install from before): reconcile writes it to storage.
    const at = Date.now();
    await fresh.schedules.store.create({ name: 'older', spec, createdAt: at, updatedAt: at, skipped: 0 });
    expect(await fresh.storage.exists(scheduleLayout('older').record)).toBe(false);
    await fresh.schedules.control.reconcile();
    expect(await fresh.schedules.archive.read('older')).toEqual({ name: 'older', spec, createdAt: at, updatedAt: at });
  });
});
