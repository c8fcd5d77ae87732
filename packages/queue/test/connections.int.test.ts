import { getFreePort, uniquePrefix, useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addBlockFlows, createFlowProducer, createProducerConnection, createWorkerConnection } from '../src/index.js';

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
      expect(worker.options.maxRetriesPerRequest).toBeNull();
    } finally {
      worker.disconnect();
    }
  });
});

describe('addBlockFlows', () => {
  it('refuses to add blocks under a finalize job that does not exist', async () => {
    const connection = createProducerConnection(redis.url);
    const flow = createFlowProducer({ connection, prefix: uniquePrefix() });
    try {
      await expect(
        addBlockFlows(flow, { backupName: 'b', backupUid: 'u', finalizeJobId: 'b.finalize', blocks: ['blk-1'] }),
      ).rejects.toMatchObject({ code: 'QUEUE_PARENT_MISSING' });
    } finally {
      await flow.close();
      connection.disconnect();
    }
  });
});
