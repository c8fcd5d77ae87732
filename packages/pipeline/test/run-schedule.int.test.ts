import { createLogger } from '@stowage/platform';
import { createFlowProducer } from '@stowage/queue';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import type { FlowProducer, Job } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processRunSchedule } from '../src/processors/run-schedule.processor.js';
import type { PipelineRuntime } from '../src/runtime.js';
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
    const rt = {
      deps: {
        state,
        logger: createLogger({ level: 'silent', name: 'run-schedule' }),
        clock: { now: Date.now },
        connection: redis,
        queuePrefix,
      },
      flowProducer,
    } as unknown as PipelineRuntime;
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
});
