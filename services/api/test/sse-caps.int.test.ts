import { request } from 'node:http';
import { useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_STREAM_CAPS } from '../src/stream-slots.js';
import { auth, type Harness, OTHER_TOKEN, startHarness, validBody } from './api-harness.js';
import { openSse, type SseConnection } from './sse-client.js';

let redis: { url: string; stop: () => Promise<void> };
let h: Harness;
let base: string;
let probe: Redis;

beforeAll(async () => {
  redis = await useTestRedis();
  h = await startHarness(redis.url, { logLevel: 'warn' });
  base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  probe = new Redis(redis.url);
});
afterAll(async () => {
  probe?.disconnect();
  await h?.close();
  await redis?.stop();
});

async function sseRedisClients(): Promise<number> {
  const list = (await probe.client('LIST')) as string;
  return list.split('\n').filter((l) => l.includes('name=stowage-api-sse')).length;
}

/** The status and Retry-After of one more stream request, then the connection closed. */
function oneMore(headers: Record<string, string>): Promise<{ status: number; retryAfter: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}/v1/backups/watched/events`, { headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
        if (res.statusCode === 200) req.destroy();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, body }));
      res.on('close', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('event streams are capped per token and in all', () => {
  it('500 streams from one token: past the cap each is a 429 with Retry-After; Redis connections and RSS stay bounded', async () => {
    const res = await h.app.inject({ method: 'POST', url: '/v1/backups', headers: auth, payload: validBody('watched') });
    expect(res.statusCode).toBe(201);
    const redisBefore = await sseRedisClients();
    const rssBefore = process.memoryUsage().rss;

    const streams: SseConnection[] = Array.from({ length: 500 }, () => openSse(`${base}/v1/backups/watched/events`, auth));
    const statuses = await Promise.all(streams.map((s) => s.status));
    const cap = DEFAULT_STREAM_CAPS.perCaller;
    expect(statuses.filter((s) => s === 200)).toHaveLength(cap);
    expect(statuses.filter((s) => s === 429)).toHaveLength(500 - cap);
    expect(await sseRedisClients()).toBeLessThanOrEqual(redisBefore + cap);

    const refused = await oneMore(auth);
    expect(refused.status).toBe(429);
    expect(Number(refused.retryAfter)).toBeGreaterThan(0);
    expect(JSON.parse(refused.body).error).toMatchObject({
      code: 'API_TOO_MANY_REQUESTS',
      message: expect.stringContaining(`at most ${cap}`),
    });
    // Another token still gets its streams: the cap is per token.
    const other = await oneMore({ authorization: `Bearer ${OTHER_TOKEN}` });
    expect(other.status).toBe(200);

    const rssGrowthMiB = (process.memoryUsage().rss - rssBefore) / 2 ** 20;
    console.log(`api RSS grew ${rssGrowthMiB.toFixed(1)} MiB with 500 stream requests (${cap} served)`);
    expect(rssGrowthMiB).toBeLessThan(100);

    // Closed streams give their slots back.
    for (const s of streams) s.close();
    const deadline = Date.now() + 5_000;
    while ((await sseRedisClients()) > redisBefore && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    expect(await sseRedisClients()).toBe(redisBefore);
    const again = await oneMore(auth);
    expect(again.status).toBe(200);
  });
});
