import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NodeAgentRegistry } from '../src/index.js';

describe('NodeAgentRegistry', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let redis: Redis;
  beforeAll(async () => {
    redisHandle = await useTestRedis();
    redis = new Redis(redisHandle.url, { maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    redis.disconnect();
    await redisHandle.stop();
  });

  it('lists nodes whose heartbeat has not expired', async () => {
    let now = 1_000;
    const prefix = uniquePrefix();
    const registry = new NodeAgentRegistry({ redis, prefix, now: () => now });
    await registry.registerNodeAgent('node-a', 100);
    await registry.registerNodeAgent('node-b', 500);
    expect([...(await registry.nodesWithAgent())].sort()).toEqual(['node-a', 'node-b']);
    now = 1_200;
    expect([...(await registry.nodesWithAgent())]).toEqual(['node-b']);
    // A node that left is not kept forever (autoscaled nodes come and go).
    expect(await redis.zrange(`${prefix}:agents`, 0, -1)).toEqual(['node-b']);
    await registry.registerNodeAgent('node-a', 100);
    await registry.unregisterNodeAgent('node-b');
    expect([...(await registry.nodesWithAgent())]).toEqual(['node-a']);
  });
});
