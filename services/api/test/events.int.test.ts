import { useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, type Harness, startHarness, validBody } from './api-harness.js';
import { openSse } from './sse-client.js';

let redis: { url: string; stop: () => Promise<void> };
let h: Harness;
let base: string;

beforeAll(async () => {
  redis = await useTestRedis();
  h = await startHarness(redis.url, { heartbeatMs: 150 });
  const address = await h.app.listen({ port: 0, host: '127.0.0.1' });
  base = address;
});
afterAll(async () => {
  await h?.close();
  await redis?.stop();
});

async function create(name: string): Promise<void> {
  const res = await h.app.inject({ method: 'POST', url: '/v1/backups', headers: auth, payload: validBody(name) });
  expect(res.statusCode).toBe(201);
}

async function sseClients(client: Redis): Promise<number> {
  const list = (await client.client('LIST')) as string;
  return list.split('\n').filter((l) => l.includes('name=stowage-api-sse')).length;
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('GET /v1/backups/:name/events over a real connection', () => {
  it('delivers history, then live events as they happen, heartbeats, and ends after the terminal phase', async () => {
    await create('live');
    const sse = openSse(`${base}/v1/backups/live/events`, auth);
    expect(await sse.status).toBe(200);
    await sse.waitFor((c) => c.messages.some((m) => m.event === 'backup.created'));

    await h.state.transitionPhase('live', ['New'], 'InProgress');
    await h.state.appendEvent('live', 'block.started', { blockId: 'blk-1' });
    await sse.waitFor((c) => c.messages.some((m) => m.event === 'block.started'));
    const started = sse.messages.find((m) => m.event === 'block.started')!;
    expect(JSON.parse(started.data!)).toMatchObject({ type: 'block.started', data: { blockId: 'blk-1' } });
    expect(started.id).toMatch(/^\d+-\d+$/);

    await sse.waitFor((c) => c.comments.some((t) => t.startsWith('heartbeat')), 3_000);

    await h.state.transitionPhase('live', ['InProgress'], 'Completed');
    await sse.ended;
    expect(sse.messages.map((m) => m.event)).toEqual(['backup.created', 'backup.phase', 'block.started', 'backup.phase']);
    expect(JSON.parse(sse.messages.at(-1)!.data!).data).toEqual({ from: 'InProgress', to: 'Completed' });
    // ids strictly increase: a client can resume from any of them
    const ids = sse.messages.map((m) => m.id!);
    expect([...ids].sort((a, b) => (BigInt(a.replace('-', '')) < BigInt(b.replace('-', '')) ? -1 : 1))).toEqual(ids);
  });

  it('resumes after Last-Event-ID without repeating or losing an event', async () => {
    await create('resume');
    for (let i = 0; i < 5; i++) await h.state.appendEvent('resume', 'pvb.progress', { i });
    const first = openSse(`${base}/v1/backups/resume/events`, auth);
    await first.waitFor((c) => c.messages.length >= 4);
    const lastSeen = first.messages[3]!.id!; // backup.created, i=0, i=1, i=2
    first.close();

    // Events that happen while the client is away are not lost.
    await h.state.appendEvent('resume', 'pvb.progress', { i: 5 });
    const second = openSse(`${base}/v1/backups/resume/events`, { ...auth, 'last-event-id': lastSeen });
    await second.waitFor((c) => c.messages.length >= 3);
    expect(second.messages.map((m) => JSON.parse(m.data!).data.i)).toEqual([3, 4, 5]);
    await h.state.transitionPhase('resume', ['New'], 'Failed');
    await second.ended;
    expect(second.messages.at(-1)!.event).toBe('backup.phase');
  });

  it('closes its Redis connection when the client disconnects', async () => {
    const probe = new Redis(redis.url);
    try {
      await create('leak');
      const before = await sseClients(probe);
      const clients = [openSse(`${base}/v1/backups/leak/events`, auth), openSse(`${base}/v1/backups/leak/events`, auth)];
      for (const c of clients) await c.waitFor((x) => x.messages.length >= 1);
      expect(await sseClients(probe)).toBe(before + 2);
      for (const c of clients) c.close();
      await waitUntil(async () => (await sseClients(probe)) === before);
    } finally {
      await probe.quit();
    }
  });

  it('ends open streams and their Redis connections when the server shuts down', async () => {
    const other = await startHarness(redis.url, { heartbeatMs: 150 });
    const probe = new Redis(redis.url);
    try {
      const url = await other.app.listen({ port: 0, host: '127.0.0.1' });
      const res = await other.app.inject({ method: 'POST', url: '/v1/backups', headers: auth, payload: validBody('shutdown') });
      expect(res.statusCode).toBe(201);
      const before = await sseClients(probe);
      const sse = openSse(`${url}/v1/backups/shutdown/events`, auth);
      await sse.waitFor((c) => c.messages.length >= 1);
      expect(await sseClients(probe)).toBe(before + 1);
      await other.close(); // app.close() first: must not wait for the client to leave
      await sse.ended;
      await waitUntil(async () => (await sseClients(probe)) === before);
    } finally {
      await probe.quit();
    }
  });

  it('a stream of an ended backup replays and ends (inject)', async () => {
    await create('ended');
    await h.state.transitionPhase('ended', ['New'], 'Canceled');
    await h.state.appendEvent('ended', 'late.event', {});
    const res = await h.app.inject({ method: 'GET', url: '/v1/backups/ended/events', headers: auth });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/event-stream');
    expect(res.body).toContain('event: backup.created');
    expect(res.body).toContain('"to":"Canceled"');
    // Resuming after the terminal event still ends (the phase is checked) and delivers what is left.
    const terminalId = /id: (\S+)\nevent: backup.phase/.exec(res.body)![1]!;
    const after = await h.app.inject({ method: 'GET', url: '/v1/backups/ended/events', headers: { ...auth, 'last-event-id': terminalId } });
    expect(after.statusCode).toBe(200);
    expect(after.body).toContain('event: late.event');
    expect(after.body).not.toContain('backup.created');
  });

  it('rejects a malformed Last-Event-ID with 400', async () => {
    await create('bad-resume');
    const res = await h.app.inject({
      method: 'GET',
      url: '/v1/backups/bad-resume/events',
      headers: { ...auth, 'last-event-id': 'abc; DROP' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'API_VALIDATION', problems: [{ path: 'headers.last-event-id' }] });
  });

  it('cancel mid-backup shows up in the live stream', async () => {
    await create('cancel-live');
    await h.state.transitionPhase('cancel-live', ['New'], 'InProgress');
    const sse = openSse(`${base}/v1/backups/cancel-live/events`, auth);
    await sse.waitFor((c) => c.messages.some((m) => m.event === 'backup.phase'));
    const res = await h.app.inject({ method: 'POST', url: '/v1/backups/cancel-live/cancel', headers: auth });
    expect(res.statusCode).toBe(202);
    await sse.waitFor((c) => c.messages.some((m) => m.event === 'backup.cancel-requested'));
    sse.close();
  });
});
