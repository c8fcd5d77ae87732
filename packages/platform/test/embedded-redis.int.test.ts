import { existsSync } from 'node:fs';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createLogger, startEmbeddedRedis } from '../src/index.js';

describe('startEmbeddedRedis', () => {
  it('starts a private redis with noeviction and no AOF, says so, and cleans up on stop', async () => {
    let logged = '';
    const destination = new Writable({
      write(chunk, _e, cb) {
        logged += String(chunk);
        cb();
      },
    });
    const server = await startEmbeddedRedis({ logger: createLogger({ level: 'info', name: 'demo', destination }) });
    const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    try {
      expect(await client.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
      expect(await client.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
      expect(logged).toContain(server.url);
    } finally {
      client.disconnect();
      await server.stop();
      await server.stop();
    }
    expect(existsSync(server.dir)).toBe(false);
  });

  it('fails with a one-line install hint when the binary is missing', async () => {
    const attempt = startEmbeddedRedis({ binary: 'no-such-redis-server-binary' });
    await expect(attempt).rejects.toMatchObject({ code: 'PLATFORM_REDIS_NOT_FOUND' });
    await expect(attempt).rejects.toThrow(/apt-get install redis-server/);
    const message = await attempt.then(
      () => '',
      (err: Error) => err.message,
    );
    expect(message.split('\n')).toHaveLength(1);
  });
});
