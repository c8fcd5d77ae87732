import { getFreePort, uniquePrefix, useTestRedis } from '@stowage/testing';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addBlockFlows,
  createFlowProducer,
  createProducerConnection,
  createQueue,
  createWorkerConnection,
  QueueName,
} from '../src/index.js';

let redis: { url: string; stop: () => Promise<void> };
beforeAll(async () => {
  redis = await useTestRedis();
});
afterAll(async () => {
  await redis?.stop();
});

describe('connections', () => {
  it('a producer connection fails fast when Redis is unreachable, and reports the error to onError', async () => {
    const errors: Error[] = [];
    const port = await getFreePort();
    const producer = createProducerConnection(`redis://127.0.0.1:${port}`, { onError: (err) => errors.push(err) });
    try {
      await expect(producer.ping()).rejects.toThrow(/enableOfflineQueue|Stream isn't writeable/);
      // ioredis keeps reconnecting in the background and reports each failure.
      const deadline = Date.now() + 5_000;
      while (errors.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(errors[0]?.message).toMatch(/ECONNREFUSED/);
    } finally {
      producer.disconnect();
    }
  });

  it('a worker connection waits through startup instead of failing the command', async () => {
    const worker = createWorkerConnection(redis.url);
    try {
      await expect(worker.ping()).resolves.toBe('PONG');
      expect((worker as Redis).options.maxRetriesPerRequest).toBeNull();
    } finally {
      worker.disconnect();
    }
  });
});

describe('addBlockFlows', () => {
  it('refuses to add blocks (sub-flows or solo jobs) under a finalize job that does not exist', async () => {
    const connection = createProducerConnection(redis.url);
    const prefix = uniquePrefix();
    const flow = createFlowProducer({ connection, prefix });
    const itemBlocks = createQueue(QueueName.itemBlocks, { connection, prefix });
    try {
      const input = { backupName: 'b', backupUid: 'u', finalizeJobId: 'b.finalize' };
      await expect(addBlockFlows({ flowProducer: flow, itemBlocks }, { ...input, blocks: ['blk-1'] })).rejects.toMatchObject({
        code: 'QUEUE_PARENT_MISSING',
      });
      await expect(
        addBlockFlows({ flowProducer: flow, itemBlocks }, { ...input, blocks: [{ id: 'blk-2', solo: true }] }),
      ).rejects.toMatchObject({ code: 'QUEUE_PARENT_MISSING' });
      expect(await itemBlocks.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 0, delayed: 0 });
    } finally {
      await Promise.all([flow.close(), itemBlocks.close()]);
      connection.disconnect();
    }
  });
});
