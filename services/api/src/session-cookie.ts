import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/*
 * The console's browser session: a cookie a browser sends by itself to the two pages it cannot
 * add a bearer header to (bull-board at /admin/queues and Swagger UI at /docs). It is stateless,
 * so every API replica accepts it: `<expiresAtSec>.<nonce>.<mac>`, the MAC being HMAC-SHA256 of
 * `<expiresAtSec>.<nonce>` keyed by a digest of the bearer token that obtained it. Removing that
 * token from STOWAGE_API_TOKENS therefore revokes its sessions too, like its bearer use.
 */

export const SESSION_COOKIE = 'stowage_session';
export const DEFAULT_SESSION_TTL_MS = 8 * 60 * 60 * 1000;

const macKey = (token: string): Buffer => createHmac('sha256', 'stowage-console-session-v1').update(token, 'utf8').digest();
const mac = (key: Buffer, payload: string): Buffer => createHmac('sha256', key).update(payload, 'utf8').digest();

export interface SessionCookies {
  /** A new cookie value for `token` (which the caller has already verified), valid until `expiresAtMs`. */
  issue(token: string, nowMs: number): { value: string; expiresAtMs: number };
  /** True when `value` was issued for one of the configured tokens and has not expired. */
  verify(value: string, nowMs: number): boolean;
}

export function createSessionCookies(tokens: readonly string[], ttlMs = DEFAULT_SESSION_TTL_MS): SessionCookies {
  const keys = tokens.map(macKey);
  return {
    issue(token, nowMs) {
      const expiresAtSec = Math.floor((nowMs + ttlMs) / 1000);
      const payload = `${expiresAtSec}.${randomBytes(16).toString('base64url')}`;
      return { value: `${payload}.${mac(macKey(token), payload).toString('base64url')}`, expiresAtMs: expiresAtSec * 1000 };
    },
    verify(value, nowMs) {
      const m = /^(\d{1,12})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/.exec(value);
      if (!m) return false;
      const [, expires, nonce, given] = m as unknown as [string, string, string, string];
      if (Number(expires) * 1000 <= nowMs) return false;
      const presented = Buffer.from(given, 'base64url');
      if (presented.length !== 32) return false;
      let match = false;
      // Every key is tried, so timing says nothing about which token issued the cookie.
      for (const key of keys) {
        if (timingSafeEqual(presented, mac(key, `${expires}.${nonce}`))) match = true;
      }
      return match;
    },
  };
}

/** The value of cookie `name` in a Cookie header, or undefined. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * Paths a session cookie opens, for GET and HEAD only: the queue dashboard and the API docs. The
 * REST API itself never accepts it (a cookie rides along with cross-site requests; a header does not).
 */
export function cookieMayOpen(method: string, url: string): boolean {
  if (method !== 'GET' && method !== 'HEAD') return false;
  const path = url.split('?')[0] ?? '';
  return path === '/docs' || path.startsWith('/docs/') || path === '/admin/queues' || path.startsWith('/admin/queues/');
}

export function sessionCookieHeader(value: string, opts: { maxAgeSec: number; secure: boolean }): string {
  return [
    `${SESSION_COOKIE}=${value}`,
    'Path=/',
    `Max-Age=${opts.maxAgeSec}`,
    'HttpOnly',
    'SameSite=Strict',
    ...(opts.secure ? ['Secure'] : []),
  ].join('; ');
}
