import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finalizeJobId } from '@stowage/core';
import { createLogger } from '@stowage/platform';
import { createQueue, QueueName } from '@stowage/queue';
import { backupLayout, FileSystemStorage } from '@stowage/storage';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { DelayedError, type Job, type Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { processDeleteBackup } from '../src/processors/delete-backup.processor.js';
import type { PipelineRuntime } from '../src/runtime.js';
import { BackupState } from '../src/state/backup-state.js';

describe('delete-backup', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let redis: Redis;
  let dir: string;
  let backupsQueue: Queue;
  const queuePrefix = uniquePrefix();

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    redis = new Redis(redisHandle.url, { maxRetriesPerRequest: null });
    dir = await mkdtemp(join(tmpdir(), 'stowage-delete-'));
    backupsQueue = createQueue(QueueName.backups, { connection: redis, prefix: queuePrefix });
  });
  afterAll(async () => {
    await backupsQueue.close();
    redis.disconnect();
    await redisHandle.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('waits for a finalize that still runs (the phase ends before it writes the archive), then deletes', async () => {
    const state = new BackupState({ redis, prefix: uniquePrefix() });
    const storage = new FileSystemStorage(dir);
    await state.createBackup({ name: 'doomed', uid: 'uid-1', spec: {}, phase: 'New', createdAt: 1 });
    await state.transitionPhase('doomed', ['New'], 'Canceled');
    await storage.putObject(`${backupLayout('doomed').dir}doomed-logs.gz`, Buffer.from('logs'));

    // Its finalize runs (locked by a worker) after moving the phase: it has more to write.
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => {
      release = r;
    });
    let started: () => void = () => undefined;
    const running = new Promise<void>((r) => {
      started = r;
    });
    const workerConnection = redis.duplicate();
    const worker = new Worker(
      QueueName.backups,
      async () => {
        started();
        await released;
        await storage.putObject(`${backupLayout('doomed').dir}velero-backup.json`, Buffer.from('{}'));
      },
      { connection: workerConnection, prefix: queuePrefix },
    );
    try {
      await backupsQueue.add('finalize', { backupName: 'doomed' }, { jobId: finalizeJobId('doomed') });
      await running;

      const rt = {
        deps: { state, storage, clock: { now: Date.now }, logger: createLogger({ level: 'silent', name: 'delete-backup' }) },
        backupsQueue,
      } as unknown as PipelineRuntime;
      const moveToDelayed = vi.fn(async () => undefined);
      const job = () => ({ data: { backupName: 'doomed', backupUid: 'uid-1', reason: 'requested' }, moveToDelayed }) as unknown as Job;

      await expect(processDeleteBackup(rt, job(), 'token')).rejects.toBeInstanceOf(DelayedError);
      expect(moveToDelayed).toHaveBeenCalledTimes(1);
      expect(await state.getBackup('doomed')).toBeDefined();
      expect((await storage.list(backupLayout('doomed').dir)).length).toBeGreaterThan(0);

      const finalized = new Promise<void>((r) => worker.once('completed', () => r()));
      release();
      await finalized;
      expect(await processDeleteBackup(rt, job(), 'token')).toEqual({ outcome: 'deleted' });
      expect(await state.getBackup('doomed')).toBeUndefined();
      expect(await storage.list(backupLayout('doomed').dir)).toEqual([]);
    } finally {
      release();
      await worker.close();
      workerConnection.disconnect();
    }
  });
});
