import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { BackupState, ScheduleArchive, ScheduleControl, ScheduleStore } from '@stowage/pipeline';
import type { RedisClient } from '@stowage/queue';
import { createFlowProducer, createProducerConnection, createQueue, QUEUE_NAMES } from '@stowage/queue';
import { FileSystemStorage } from '@stowage/storage';
import { uniquePrefix } from '@stowage/testing';
import type { FlowProducer, Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import type { ApiDeps } from '../src/api-deps.js';
import { buildApp } from '../src/app.js';
import type { AuthMode } from '../src/auth.js';
import { createPipelineControl } from '../src/pipeline-control.js';

export const TOKEN = 'test-token-0123456789abcdef';
export const OTHER_TOKEN = 'second-token-fedcba9876543210';
export const auth = { authorization: `Bearer ${TOKEN}` };

export interface Harness {
  app: FastifyInstance;
  redis: RedisClient;
  state: BackupState;
  scheduleStore: ScheduleStore;
  queues: Queue[];
  flowProducer: FlowProducer;
  prefix: string;
  storageDir: string;
  /** Every log line the app wrote, as text. */
  logs: () => string;
  close: () => Promise<void>;
}

export interface HarnessOptions {
  authMode?: AuthMode;
  heartbeatMs?: number;
  overrides?: Partial<ApiDeps>;
  logLevel?: string;
}

/** The API on a real Redis with its own key prefix, logs captured in memory. */
export async function startHarness(redisUrl: string, opts: HarnessOptions = {}): Promise<Harness> {
  const prefix = uniquePrefix();
  const redis = createProducerConnection(redisUrl);
  await new Promise<void>((resolve, reject) => {
    redis.once('ready', () => resolve());
    redis.once('error', reject);
  });
  const state = new BackupState({ redis, prefix });
  const queues = QUEUE_NAMES.map((name) => createQueue(name, { connection: redis, prefix }));
  const flowProducer = createFlowProducer({ connection: redis, prefix });
  const storageDir = await mkdtemp(join(tmpdir(), 'stowage-api-storage-'));
  const chunks: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  });
  const logger = pino({ level: opts.logLevel ?? 'debug' }, sink);
  const scheduleStore = new ScheduleStore(redis, prefix);
  const storage = new FileSystemStorage(storageDir);
  const scheduleArchive = new ScheduleArchive(storage);
  const backupsQueue = queues.find((q) => q.name === 'backups') as Queue;
  const app = await buildApp({
    logger,
    redis,
    state,
    queues,
    control: createPipelineControl({ state, flowProducer, queuePrefix: prefix, deleteWaitMs: 300 }),
    schedules: {
      store: scheduleStore,
      control: new ScheduleControl({ store: scheduleStore, archive: scheduleArchive, backupsQueue, state }),
    },
    storage,
    auth: opts.authMode ?? { mode: 'tokens', tokens: [TOKEN, OTHER_TOKEN] },
    heartbeatMs: opts.heartbeatMs ?? 15_000,
    ...opts.overrides,
  });
  await app.ready();
  return {
    app,
    redis,
    state,
    scheduleStore,
    queues,
    flowProducer,
    prefix,
    storageDir,
    logs: () => chunks.join(''),
    async close() {
      await app.close();
      await flowProducer.close();
      for (const q of queues) await q.close();
      await redis.quit();
      await rm(storageDir, { recursive: true, force: true });
    },
  };
}

/** A minimal valid backup request. */
export function validBody(name?: string): Record<string, unknown> {
  return { ...(name ? { name } : {}), spec: { includedNamespaces: ['app'] } };
}
