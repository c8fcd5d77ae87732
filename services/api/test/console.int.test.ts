import { readdir } from 'node:fs/promises';
import { BACKUP_PHASES, BLOCK_STATES, ENDED_BACKUP_PHASES, formatBytes, PVB_PHASES } from '@stowage/core';
import { useTestRedis } from '@stowage/testing';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_ROOT } from '../src/console.plugin.js';
import { SESSION_COOKIE } from '../src/session-cookie.js';
import { auth, type Harness, OTHER_TOKEN, startHarness, TOKEN, validBody } from './api-harness.js';

let redis: { url: string; stop: () => Promise<void> };
let h: Harness;
let clock = Date.parse('2030-01-01T00:00:00Z');

beforeAll(async () => {
  redis = await useTestRedis();
  h = await startHarness(redis.url, { overrides: { now: () => clock, sessionTtlMs: 60 * 60 * 1000 } });
  expect((await h.app.inject({ method: 'POST', url: '/v1/backups', headers: auth, payload: validBody('secret-name') })).statusCode).toBe(
    201,
  );
});
afterAll(async () => {
  await h?.close();
  await redis?.stop();
});

function cookieOf(res: LightMyRequestResponse): string {
  const header = res.headers['set-cookie'];
  const line = Array.isArray(header) ? header[0] : header;
  const m = new RegExp(`^${SESSION_COOKIE}=([^;]*)`).exec(line ?? '');
  if (!m?.[1]) throw new Error(`no session cookie in ${String(line)}`);
  return `${SESSION_COOKIE}=${m[1]}`;
}

describe('console shell (/ui)', () => {
  it('is served without a token, holds no data, and allows nothing from other origins', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/ui' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.body).toContain('<script type="module" src="/ui/app.js">');
    expect(res.body).not.toContain('secret-name');
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect((await h.app.inject({ method: 'GET', url: '/ui/' })).statusCode).toBe(200);
  });

  it('serves its modules and styles with their types, and nothing outside its directory', async () => {
    const js = await h.app.inject({ method: 'GET', url: '/ui/app.js' });
    expect(js.statusCode).toBe(200);
    expect(js.headers['content-type']).toMatch(/javascript/);
    const css = await h.app.inject({ method: 'GET', url: '/ui/style.css' });
    expect(css.statusCode).toBe(200);
    expect(css.headers['content-type']).toContain('text/css');
    for (const url of ['/ui/missing.js', '/ui/..%2Fpackage.json', '/ui/%2e%2e%2fsrc%2fapp.ts', '/ui/../package.json', '/ui/index.html']) {
      const res = await h.app.inject({ method: 'GET', url });
      // 404, or 401 where the path normalises to an unknown route outside /ui (those need a token).
      expect([401, 404], url).toContain(res.statusCode);
      expect(res.body, url).not.toContain('"dependencies"');
    }
  });

  it("shares core's phase lists and byte sizes with it through /ui/stowage.js, as a module a browser runs", async () => {
    const res = await h.app.inject({ method: 'GET', url: '/ui/stowage.js' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/javascript/);
    expect(String(res.headers['content-security-policy'])).toContain("script-src 'self'");
    // Imported as the browser would: plain JavaScript, nothing from outside it.
    const shared = await import(`data:text/javascript;base64,${Buffer.from(res.body).toString('base64')}`);
    expect(shared.BACKUP_PHASES).toEqual([...BACKUP_PHASES]);
    expect(shared.ENDED_BACKUP_PHASES).toEqual([...ENDED_BACKUP_PHASES]);
    expect(shared.BLOCK_STATES).toEqual([...BLOCK_STATES]);
    expect(shared.PVB_PHASES).toEqual([...PVB_PHASES]);
    for (const n of [0, 512, 1023, 1024, 1536, 99.5 * 1024, 150 * 1024 * 1024, 3 * 1024 ** 4, 5 * 1024 ** 5, undefined, null, Number.NaN]) {
      expect(shared.formatBytes(n, '–'), String(n)).toBe(formatBytes(n, '–'));
    }
    expect(shared.formatBytes(1536)).toBe('1.5 KiB');
    // The console's modules take them from there, not from copies of their own.
    const format = (await h.app.inject({ method: 'GET', url: '/ui/format.js' })).body;
    expect(format).toContain("from './stowage.js'");
    expect(format).not.toMatch(/'PartiallyFailed'|'KiB'/);
  });

  it('every module it loads is local: no http(s) URL, no CDN, no web font', async () => {
    const html = (await h.app.inject({ method: 'GET', url: '/ui' })).body;
    // Every file of the console's directory, and the module the api generates.
    const files = [...(await readdir(CONSOLE_ROOT)).filter((f) => /\.(js|css)$/.test(f)), 'stowage.js'];
    expect(files).toEqual(expect.arrayContaining(['app.js', 'forms.js', 'schedules-page.js', 'restore-form.js', 'style.css']));
    for (const f of files) {
      const res = await h.app.inject({ method: 'GET', url: `/ui/${f}` });
      expect(res.statusCode, f).toBe(200);
      expect(res.body, f).not.toMatch(/https?:\/\/(?!www\.w3\.org)/);
      expect(res.body, f).not.toMatch(/@import|@font-face/);
    }
    expect(html).not.toMatch(/https?:\/\//);
  });
});

describe('console session cookie (POST /v1/session)', () => {
  it('needs a bearer token, and sets an HttpOnly, SameSite=Strict cookie (Secure over https)', async () => {
    expect((await h.app.inject({ method: 'POST', url: '/v1/session' })).statusCode).toBe(401);
    const plain = await h.app.inject({ method: 'POST', url: '/v1/session', headers: auth });
    expect(plain.statusCode).toBe(200);
    expect(plain.json()).toMatchObject({ cookie: true, scope: ['GET /admin/queues*', 'GET /docs*'] });
    const line = String(plain.headers['set-cookie']);
    expect(line).toMatch(/HttpOnly/);
    expect(line).toMatch(/SameSite=Strict/);
    expect(line).toMatch(/Path=\//);
    expect(line).not.toMatch(/Secure/);
    expect(line).not.toContain(TOKEN);
    const https = await h.app.inject({ method: 'POST', url: '/v1/session', headers: { ...auth, 'x-forwarded-proto': 'https' } });
    expect(String(https.headers['set-cookie'])).toMatch(/; Secure/);
  });

  it('opens the dashboard and the docs (GET/HEAD), but never the REST API or a dashboard write', async () => {
    const cookie = cookieOf(await h.app.inject({ method: 'POST', url: '/v1/session', headers: auth }));
    const opens = [
      ['GET', '/admin/queues'],
      ['GET', '/admin/queues/api/queues'],
      ['HEAD', '/admin/queues'],
      ['GET', '/docs'],
      ['GET', '/docs/json'],
    ] as const;
    for (const [method, url] of opens) {
      expect((await h.app.inject({ method, url, headers: { cookie } })).statusCode, `${method} ${url}`).toBe(200);
      expect((await h.app.inject({ method, url })).statusCode, `${method} ${url} without the cookie`).toBe(401);
    }
    const board = await h.app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: { cookie } });
    expect(board.body).toContain('item-blocks');

    const refused = [
      ['GET', '/v1/backups'],
      ['GET', '/v1/backups/secret-name'],
      ['GET', '/v1/backups/secret-name/events'],
      ['POST', '/v1/backups'],
      ['POST', '/v1/backups/secret-name/cancel'],
      ['DELETE', '/v1/backups/secret-name'],
      ['POST', '/v1/session'],
      ['PUT', '/admin/queues/api/queues/backups/retry/failed'],
      ['PUT', '/admin/queues/api/queues/backups/clean/completed'],
      ['POST', '/docs/json'],
      ['GET', '/metricsx'],
      ['GET', '/docs/../v1/backups'],
    ] as const;
    for (const [method, url] of refused) {
      const res = await h.app.inject({
        method,
        url,
        headers: { cookie, 'content-type': 'application/json' },
        ...(method === 'POST' ? { payload: validBody('via-cookie') } : {}),
      });
      expect([401, 404], `${method} ${url}`).toContain(res.statusCode);
      expect(res.body, `${method} ${url}`).not.toContain('"phase"');
    }
    // The API refused the writes: the backup still exists, nothing was created.
    expect(await h.state.getBackup('secret-name')).toBeDefined();
    expect(await h.state.getBackup('via-cookie')).toBeUndefined();
  });

  it('a wrong bearer header is not rescued by a valid cookie', async () => {
    const cookie = cookieOf(await h.app.inject({ method: 'POST', url: '/v1/session', headers: auth }));
    const res = await h.app.inject({
      method: 'GET',
      url: '/admin/queues',
      headers: { cookie, authorization: 'Bearer wrong-token-123456' },
    });
    expect(res.statusCode).toBe(401);
  });

  it('refuses forged, tampered and expired cookies', async () => {
    const cookie = cookieOf(await h.app.inject({ method: 'POST', url: '/v1/session', headers: auth }));
    const value = cookie.slice(SESSION_COOKIE.length + 1);
    const [expires, nonce, mac] = value.split('.') as [string, string, string];
    const forged = [
      `${Number(expires) + 100000}.${nonce}.${mac}`, // extended expiry
      `${expires}.${nonce.replace(/^./, (c) => (c === 'A' ? 'B' : 'A'))}.${mac}`, // other nonce
      `${expires}.${nonce}.${'A'.repeat(43)}`,
      TOKEN,
      '',
    ];
    for (const v of forged) {
      const res = await h.app.inject({ method: 'GET', url: '/admin/queues', headers: { cookie: `${SESSION_COOKIE}=${v}` } });
      expect(res.statusCode, v).toBe(401);
    }
    expect((await h.app.inject({ method: 'GET', url: '/admin/queues', headers: { cookie } })).statusCode).toBe(200);
    const saved = clock;
    try {
      clock += 60 * 60 * 1000 + 1000; // past the 1 h lifetime
      expect((await h.app.inject({ method: 'GET', url: '/admin/queues', headers: { cookie } })).statusCode).toBe(401);
    } finally {
      clock = saved;
    }
  });

  it('a cookie dies with its token: an API without that token refuses it', async () => {
    const cookie = cookieOf(await h.app.inject({ method: 'POST', url: '/v1/session', headers: auth }));
    const other = await startHarness(redis.url, { authMode: { mode: 'tokens', tokens: [OTHER_TOKEN] }, overrides: { now: () => clock } });
    try {
      expect((await other.app.inject({ method: 'GET', url: '/admin/queues', headers: { cookie } })).statusCode).toBe(401);
      const own = cookieOf(
        await other.app.inject({ method: 'POST', url: '/v1/session', headers: { authorization: `Bearer ${OTHER_TOKEN}` } }),
      );
      expect((await other.app.inject({ method: 'GET', url: '/admin/queues', headers: { cookie: own } })).statusCode).toBe(200);
    } finally {
      await other.close();
    }
  });

  it('DELETE /v1/session clears the cookie', async () => {
    const res = await h.app.inject({ method: 'DELETE', url: '/v1/session', headers: auth });
    expect(res.statusCode).toBe(200);
    expect(String(res.headers['set-cookie'])).toMatch(new RegExp(`^${SESSION_COOKIE}=; .*Max-Age=0`));
  });
});
