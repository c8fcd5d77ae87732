import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { type RedisServer, startRedisServer } from '../src/index.js';

describe('startRedisServer', () => {
  let server: RedisServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it('serves a private redis that keeps AOF data across a hard restart', async () => {
    server = await startRedisServer({ appendOnly: true });
    const client = new Redis(server.url, { maxRetriesPerRequest: null });
    client.on('error', () => {});
    await client.set('k', 'v');
    await server.kill(true);
    await server.start();
    await expect(client.get('k')).resolves.toBe('v');
    client.disconnect();
  });

  it('removes its temp dir and is safe to stop twice', async () => {
    server = await startRedisServer();
    const { dir } = server;
    await server.stop();
    await server.stop();
    const { existsSync } = await import('node:fs');
    expect(existsSync(dir)).toBe(false);
  });

  it('explains how to install redis when the binary is missing', async () => {
    await expect(startRedisServer({ binary: 'redis-server-that-does-not-exist' })).rejects.toThrow(/apt-get install redis-server/);
  });
});
