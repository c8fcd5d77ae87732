import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, type Harness, OTHER_TOKEN, startHarness, TOKEN, validBody } from './api-harness.js';

let redis: { url: string; stop: () => Promise<void> };
let h: Harness;

beforeAll(async () => {
  redis = await useTestRedis();
  h = await startHarness(redis.url);
  expect((await h.app.inject({ method: 'POST', url: '/v1/backups', headers: auth, payload: validBody('existing') })).statusCode).toBe(201);
});
afterAll(async () => {
  await h?.close();
  await redis?.stop();
});

type Method = 'GET' | 'POST' | 'DELETE';
/** Every protected route, with a request that would succeed (or at least pass auth) with a token. */
const PROTECTED: Array<[Method, string]> = [
  ['POST', '/v1/backups'],
  ['GET', '/v1/backups'],
  ['GET', '/v1/backups/existing'],
  ['GET', '/v1/backups/existing/blocks'],
  ['GET', '/v1/backups/existing/events'],
  ['GET', '/v1/backups/existing/logs'],
  ['POST', '/v1/backups/existing/cancel'],
  ['DELETE', '/v1/backups/existing'],
  ['GET', '/docs'],
  ['GET', '/docs/json'],
  ['GET', '/admin/queues'],
  ['GET', '/admin/queues/api/queues'],
  ['GET', '/no/such/route'],
];

describe('auth', () => {
  it.each(PROTECTED)('%s %s: 401 without a token, with a wrong token, with a token in the query', async (method, url) => {
    const payload = method === 'POST' && url === '/v1/backups' ? validBody('never-created') : undefined;
    const cases: Array<{ headers: Record<string, string>; url: string; why: string }> = [
      { headers: {}, url, why: 'no token' },
      { headers: { authorization: 'Bearer wrong-token-0123456789' }, url, why: 'wrong token' },
      { headers: { authorization: `Bearer ${TOKEN}x` }, url, why: 'token with an extra char' },
      { headers: { authorization: `Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}` }, url, why: 'basic auth' },
      { headers: {}, url: `${url}${url.includes('?') ? '&' : '?'}token=${TOKEN}`, why: 'token in the query' },
      { headers: {}, url: `${url}?access_token=${TOKEN}`, why: 'access_token in the query' },
      { headers: auth, url: `${url}?access_token=${TOKEN}`, why: 'query token even beside a good header' },
    ];
    for (const c of cases) {
      const res = await h.app.inject({ method, url: c.url, headers: c.headers, ...(payload ? { payload } : {}) });
      expect(res.statusCode, c.why).toBe(401);
      expect(res.headers['www-authenticate'], c.why).toContain('Bearer');
      const { error } = res.json();
      expect(error.code, c.why).toBe('API_UNAUTHORIZED');
      expect(error.requestId, c.why).toBe(res.headers['x-request-id']);
    }
    expect(await h.state.getBackup('never-created')).toBeUndefined();
    expect(await h.state.getBackup('existing')).toBeDefined();
  });

  it('accepts every configured token, and the dashboard and docs with one', async () => {
    for (const token of [TOKEN, OTHER_TOKEN]) {
      const res = await h.app.inject({ method: 'GET', url: '/v1/backups', headers: { authorization: `Bearer ${token}` } });
      expect(res.statusCode).toBe(200);
    }
    const board = await h.app.inject({ method: 'GET', url: '/admin/queues', headers: auth });
    expect(board.statusCode).toBe(200);
    expect(board.body).toContain('<base href="/admin/queues/"');
    const queues = await h.app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: auth });
    expect(queues.statusCode).toBe(200);
    const names = (queues.json().queues as Array<{ name: string }>).map((q) => q.name).sort();
    expect(names).toEqual(['backups', 'hooks', 'item-blocks', 'pvb-watch', 'repository', 'restore-items', 'restores']);
    const docs = await h.app.inject({ method: 'GET', url: '/docs', headers: auth });
    expect([200, 302]).toContain(docs.statusCode);
  });

  it('leaves /livez, /readyz and /metrics open', async () => {
    expect((await h.app.inject({ method: 'GET', url: '/livez' })).json()).toEqual({ status: 'ok' });
    const ready = await h.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    const metrics = await h.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    expect(metrics.headers['content-type']).toContain('text/plain');
  });

  it('answers an unknown route with a token 404 API_ROUTE_NOT_FOUND', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/v2/whatever', headers: auth });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toMatchObject({ code: 'API_ROUTE_NOT_FOUND', requestId: expect.any(String) });
  });

  it('never writes a token to the logs', async () => {
    await h.app.inject({ method: 'GET', url: '/v1/backups', headers: auth });
    await h.app.inject({ method: 'GET', url: `/v1/backups?token=${OTHER_TOKEN}` });
    await h.app.inject({ method: 'GET', url: '/v1/backups', headers: { authorization: `Bearer ${OTHER_TOKEN}-wrong` } });
    await h.app.inject({
      method: 'POST',
      url: '/v1/backups',
      headers: { ...auth, 'content-type': 'application/json' },
      payload: '{bad json',
    });
    const logs = h.logs();
    expect(logs.length).toBeGreaterThan(0);
    expect(logs).toContain('"url":"/v1/backups?token=%5BRedacted%5D"');
    expect(logs).not.toContain(TOKEN);
    expect(logs).not.toContain(OTHER_TOKEN);
  });
});

describe('auth settings', () => {
  it('with auth disabled explicitly, routes answer without a token but query tokens are still refused', async () => {
    const open = await startHarness(redis.url, { authMode: { mode: 'disabled' } });
    try {
      expect((await open.app.inject({ method: 'GET', url: '/v1/backups' })).statusCode).toBe(200);
      expect((await open.app.inject({ method: 'GET', url: '/v1/backups?token=abc' })).statusCode).toBe(401);
    } finally {
      await open.close();
    }
  });
});

describe('readiness', () => {
  it('turns unready while closing and when Redis is gone', async () => {
    const local = await startHarness(redis.url);
    expect((await local.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    local.redis.disconnect();
    const res = await local.app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toMatchObject({ code: 'API_UNAVAILABLE', message: expect.stringContaining('redis') });
    expect((await local.app.inject({ method: 'GET', url: '/livez' })).statusCode).toBe(200);
    // Redis-backed routes answer 503, not 500, while it is unreachable.
    const list = await local.app.inject({ method: 'GET', url: '/v1/backups', headers: auth });
    expect(list.statusCode).toBe(503);
    expect(list.json().error.code).toBe('API_UNAVAILABLE');
    await local.app.close();
    await Promise.all(local.queues.map((q) => q.close()));
    await local.flowProducer.close();
  });
});

describe('metrics', () => {
  it('reports backups by phase from state and queue depths; counters are not replayed from state', async () => {
    const name = 'metric-run';
    expect((await h.app.inject({ method: 'POST', url: '/v1/backups', headers: auth, payload: validBody(name) })).statusCode).toBe(201);
    await h.state.transitionPhase(name, ['New'], 'Completed', { startedAt: 1_000, completedAt: 31_000 });
    const text = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(text).toMatch(/stowage_backups\{phase="New"\} \d+/);
    expect(text).toContain('stowage_backups{phase="Completed"} 1');
    expect(text).toMatch(/stowage_queue_jobs\{queue="backups",state="waiting"\} [1-9]/);
    expect(text).toContain('stowage_queue_jobs{queue="item-blocks",state="active"} 0');
    // A Completed backup this process did not finish is not a success it counts (no replay).
    expect(text).not.toMatch(/^stowage_backup_success_total\{/m);
    expect(text).toContain('# TYPE stowage_backup_success_total counter');
    // A deleted backup leaves the phase count.
    await h.state.deleteBackup(name);
    const after = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(after).not.toContain('stowage_backups{phase="Completed"} 1');
  });
});
