import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, type Harness, OTHER_TOKEN, startHarness, validBody } from './api-harness.js';

const LIMIT = 5;
let redis: { url: string; stop: () => Promise<void> };
let h: Harness;

beforeAll(async () => {
  redis = await useTestRedis();
  h = await startHarness(redis.url, { logLevel: 'warn', overrides: { writeRateLimit: { max: LIMIT, windowMs: 60_000 } } });
});
afterAll(async () => {
  await h?.close();
  await redis?.stop();
});

const submit = (name: string, headers: Record<string, string> = auth) =>
  h.app.inject({ method: 'POST', url: '/v1/backups', headers, payload: validBody(name) });

describe('write requests are rate-limited per token', () => {
  it('past the limit a write is a 429 with Retry-After, before its body is read; reads and other tokens are still served', async () => {
    for (let i = 0; i < LIMIT; i++) expect((await submit(`limited-${i}`)).statusCode).toBe(201);

    const refused = await submit('limited-over');
    expect(refused.statusCode).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.json().error).toMatchObject({
      code: 'API_TOO_MANY_REQUESTS',
      message: expect.stringContaining(`at most ${LIMIT} per 60 s`),
    });
    expect(await h.state.getBackup('limited-over')).toBeUndefined();
    // Counted before the body is parsed: a broken body is refused the same way, not judged.
    const broken = await h.app.inject({
      method: 'POST',
      url: '/v1/backups',
      headers: { ...auth, 'content-type': 'application/json' },
      payload: '{',
    });
    expect(broken.statusCode).toBe(429);
    // A cancel is a write too.
    expect((await h.app.inject({ method: 'POST', url: '/v1/backups/limited-0/cancel', headers: auth })).statusCode).toBe(429);

    // Reads are not limited, and another token has its own count.
    expect((await h.app.inject({ method: 'GET', url: '/v1/backups', headers: auth })).statusCode).toBe(200);
    expect((await submit('other-token', { authorization: `Bearer ${OTHER_TOKEN}` })).statusCode).toBe(201);
  });
});
