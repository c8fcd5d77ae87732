import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scheduledBackupName, validateScheduleRequest } from '@stowage/core';
import { createLogger } from '@stowage/platform';
import { createFlowProducer, createQueue, JobName, QueueName } from '@stowage/queue';
import { FileSystemStorage } from '@stowage/storage';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { type FlowProducer, type Job, type Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processRunSchedule, type RunScheduleResult } from '../src/processors/run-schedule.processor.js';
import type { PipelineRuntime } from '../src/runtime.js';
import { ScheduleArchive } from '../src/schedules/schedule-archive.js';
import { ScheduleControl } from '../src/schedules/schedule-control.js';
import { ScheduleStore } from '../src/schedules/schedule-store.js';
import { BackupState } from '../src/state/backup-state.js';

describe('run-schedule', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let redis: Redis;
  let flowProducer: FlowProducer;
  const queuePrefix = uniquePrefix();

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    redis = new Redis(redisHandle.url, { maxRetriesPerRequest: null });
    flowProducer = createFlowProducer({ connection: redis, prefix: queuePrefix });
  });
  afterAll(async () => {
    await flowProducer.close();
    redis.disconnect();
    await redisHandle.stop();
  });

  /** What processRunSchedule reads of the pipeline's runtime: state, the queues' connection, the backups queue. */
  function runtimeFor(state: BackupState, backupsQueue?: Queue): PipelineRuntime {
    const deps = {
      state,
      logger: createLogger({ level: 'silent', name: 'run-schedule' }),
      clock: { now: Date.now },
      connection: redis,
      queuePrefix,
    };
    return { deps, flowProducer, ...(backupsQueue ? { backupsQueue } : {}) } as unknown as PipelineRuntime;
  }

  it('starts one backup per tick: of two runs of one tick at once, one says it started it, the other that it exists', async () => {
    const state = new BackupState({ redis, prefix: uniquePrefix() });
    const store = new ScheduleStore(redis, state.prefix);
    await store.create({
      name: 'nightly',
      spec: { schedule: '0 1 * * *', template: { includedNamespaces: ['app'] } },
      createdAt: 1,
      updatedAt: 1,
      skipped: 0,
    });
    const rt = runtimeFor(state);
    const tickMs = Date.UTC(2026, 0, 2, 1);
    const job = () => ({ data: { schedule: 'nightly', tickMs }, opts: {}, timestamp: tickMs }) as unknown as Job;

    // Both read "no backup for this tick yet" before either records it (one connection, in turns).
    const results = await Promise.all([processRunSchedule(rt, job()), processRunSchedule(rt, job())]);
    expect(results.map((r) => r.outcome).sort()).toEqual(['exists', 'started']);
    expect(results.map((r) => (r as { backup: string }).backup)).toEqual(['nightly-20260102010000', 'nightly-20260102010000']);
    expect((await state.listBackups({ limit: 10 })).items.map((b) => b.name)).toEqual(['nightly-20260102010000']);
    expect(await store.backups('nightly', 10)).toEqual(['nightly-20260102010000']);
    // A later run of the tick finds it at once.
    expect(await processRunSchedule(rt, job())).toEqual({ outcome: 'exists', backup: 'nightly-20260102010000' });
  });

  it("a tick's job picked up after later ticks' times: each tick BullMQ dropped is counted skipped, with why, once", async () => {
    const state = new BackupState({ redis, prefix: uniquePrefix() });
    const store = new ScheduleStore(redis, state.prefix);
    await store.create({
      name: 'every1s',
      spec: { schedule: '* * * * * *', template: { includedNamespaces: ['app'] } },
      createdAt: 1,
      updatedAt: 1,
      skipped: 0,
    });
    const backupsQueue = createQueue(QueueName.backups, { connection: redis, prefix: queuePrefix });
    const rt = runtimeFor(state, backupsQueue);
    const workerConnection = redis.duplicate();
    let worker: Worker | undefined;
    try {
      await backupsQueue.upsertJobScheduler(
        'schedule-every1s',
        { pattern: '* * * * * *' },
        { name: JobName.runSchedule, data: { schedule: 'every1s' } },
      );
      const first = (await backupsQueue.getJobScheduler('schedule-every1s'))?.next as number;
      // No worker until three later ticks have passed: the first tick's job is picked up late, and
      // BullMQ schedules the next one after that moment.
      while (Date.now() < first + 3_500) await new Promise((r) => setTimeout(r, 100));
      const ran: Array<{ job: Job; result: RunScheduleResult }> = [];
      const twoRan = new Promise<void>((resolve) => {
        worker = new Worker(
          QueueName.backups,
          async (job) => {
            const result = await processRunSchedule(rt, job);
            ran.push({ job, result });
            if (ran.length === 2) resolve();
            return result;
          },
          { connection: workerConnection, prefix: queuePrefix },
        );
      });
      await twoRan;
      await worker?.close();

      const [late, next] = ran;
      expect(late?.result).toEqual({ outcome: 'started', backup: scheduledBackupName('every1s', first) });
      const nextTick = next?.job.opts.prevMillis as number;
      // That tick's backup is still New (nothing runs it here): its tick is skipped for that.
      expect(next?.result).toMatchObject({ outcome: 'skipped', backup: scheduledBackupName('every1s', nextTick) });
      const dropped = (nextTick - first) / 1000 - 1;
      expect(dropped).toBeGreaterThanOrEqual(3);
      // Every tick from the first to the next accounted: one started, the rest skipped.
      const record = await store.get('every1s');
      expect(record?.skipped).toBe(dropped + 1);

      // A re-run of the late tick's job counts nothing again.
      await processRunSchedule(rt, late!.job);
      const again = await store.get('every1s');
      expect(again?.skipped).toBe(dropped + 1);
      expect(again?.lastSkip?.reason).toMatch(/still New/);
    } finally {
      await worker?.close();
      await backupsQueue.removeJobScheduler('schedule-every1s');
      await backupsQueue.close();
      workerConnection.disconnect();
    }
  });

  it('an api start (reconcile) keeps an overdue tick: it runs late and counts the ticks missed meanwhile', async () => {
    const state = new BackupState({ redis, prefix: uniquePrefix() });
    const store = new ScheduleStore(redis, state.prefix);
    const backupsQueue = createQueue(QueueName.backups, { connection: redis, prefix: queuePrefix });
    const dir = await mkdtemp(join(tmpdir(), 'stowage-reconcile-'));
    const control = new ScheduleControl({ store, archive: new ScheduleArchive(new FileSystemStorage(dir)), backupsQueue, state });
    const rt = runtimeFor(state, backupsQueue);
    const workerConnection = redis.duplicate();
    let worker: Worker | undefined;
    try {
      const spec = { schedule: '* * * * * *', template: { includedNamespaces: ['app'] }, skipImmediately: true };
      const validated = validateScheduleRequest({ name: 'down', spec });
      if (!validated.ok) throw new Error(JSON.stringify(validated.problems));
      await control.create('down', spec, validated.value);
      const first = (await backupsQueue.getJobScheduler('schedule-down'))?.next as number;
      // No api ran its ticks for a while; then one starts and reconciles, as every api does at start.
      while (Date.now() < first + 3_500) await new Promise((r) => setTimeout(r, 100));
      await control.reconcile();
      expect((await backupsQueue.getJobScheduler('schedule-down'))?.next).toBe(first);

      const ran = await new Promise<RunScheduleResult>((resolve) => {
        worker = new Worker(
          QueueName.backups,
          async (job) => {
            const result = await processRunSchedule(rt, job);
            resolve(result);
            return result;
          },
          { connection: workerConnection, prefix: queuePrefix },
        );
      });
      await worker?.close();
      // The overdue tick ran (late), and the ticks after it until it was picked up are accounted for.
      expect(ran).toEqual({ outcome: 'started', backup: scheduledBackupName('down', first) });
      const record = await store.get('down');
      expect(record?.skipped).toBeGreaterThanOrEqual(3);
      expect(record?.lastSkip?.reason).toMatch(/^missed: /);

      // A scheduler whose next job was lost (not added) is upserted at the next start: it ticks again.
      const next = (await backupsQueue.getJobScheduler('schedule-down'))?.next as number;
      const lost = `repeat:schedule-down:${next}`;
      await redis
        .multi()
        .del(backupsQueue.toKey(lost))
        .zrem(backupsQueue.toKey('delayed'), lost)
        .lrem(backupsQueue.toKey('wait'), 0, lost)
        .exec();
      expect(await backupsQueue.getJobState(lost)).toBe('unknown');
      await control.reconcile();
      const healed = (await backupsQueue.getJobScheduler('schedule-down'))?.next as number;
      expect(await backupsQueue.getJobState(`repeat:schedule-down:${healed}`)).toMatch(/^(delayed|waiting)$/);
    } finally {
      await worker?.close();
      await control.remove('down');
      await backupsQueue.close();
      workerConnection.disconnect();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
