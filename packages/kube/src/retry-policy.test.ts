import { HttpMethod, Observable, RequestContext, ResponseContext } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  computeBackoffMs,
  createRetryStats,
  decideRetry,
  defaultRetryPolicy,
  parseRetryAfterMs,
  type RetryContext,
  type RetryPolicy,
  runWithRetry,
} from './retry-policy.js';
import { RetryingHttpLibrary } from './retrying-http-library.js';

const policy: RetryPolicy = { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 1000, maxTotalMs: 60_000, maxRetryAfterMs: 5000 };

/** A clock that only moves when the code under test sleeps. */
function fakeTime(randomValue = 0.5) {
  let now = 1_000_000;
  const sleeps: number[] = [];
  return {
    sleeps,
    deps: {
      random: () => randomValue,
      now: () => now,
      sleep: async (ms: number) => {
        sleeps.push(ms);
        now += ms;
      },
    },
  };
}

function connectionError(code: string): Error {
  return Object.assign(new Error(`request to http://x failed, reason: ${code}`), { code, type: 'system' });
}

describe('computeBackoffMs (full jitter)', () => {
  it('is random() times a ceiling that doubles per retry and stops at maxDelayMs', () => {
    expect(computeBackoffMs(0, policy, () => 0.5)).toBe(50);
    expect(computeBackoffMs(1, policy, () => 0.5)).toBe(100);
    expect(computeBackoffMs(3, policy, () => 0.5)).toBe(400);
    expect(computeBackoffMs(10, policy, () => 0.5)).toBe(500);
    expect(computeBackoffMs(10, policy, () => 0.999)).toBe(999);
  });

  it('spans the whole range [0, ceiling): jitter, not a fixed delay', () => {
    expect(computeBackoffMs(2, policy, () => 0)).toBe(0);
    expect(computeBackoffMs(2, policy, () => 0.25)).toBe(100);
  });
});

describe('parseRetryAfterMs', () => {
  it('reads delta-seconds', () => {
    expect(parseRetryAfterMs('3', 0)).toBe(3000);
    expect(parseRetryAfterMs(' 0 ', 0)).toBe(0);
  });

  it('reads an HTTP date relative to now', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfterMs('Thu, 01 Jan 2026 00:00:07 GMT', now)).toBe(7000);
    expect(parseRetryAfterMs('Wed, 31 Dec 2025 23:59:00 GMT', now)).toBe(0);
  });

  it('ignores absent or unreadable values', () => {
    expect(parseRetryAfterMs(undefined, 0)).toBeUndefined();
    expect(parseRetryAfterMs('', 0)).toBeUndefined();
    expect(parseRetryAfterMs('soon', 0)).toBeUndefined();
  });
});

describe('decideRetry', () => {
  const deps = { random: () => 0.5, now: () => 0 };

  it.each([429, 500, 502, 503, 504])('retries status %i', (status) => {
    expect(decideRetry({ kind: 'status', status }, 1, 0, policy, deps)).toMatchObject({ retry: true, reason: `status-${status}` });
  });

  it.each([200, 201, 400, 401, 403, 404, 409, 410, 422])('never retries status %i', (status) => {
    expect(decideRetry({ kind: 'status', status }, 1, 0, policy, deps).retry).toBe(false);
  });

  it.each(['ECONNRESET', 'ECONNREFUSED'])('retries connection error %s', (code) => {
    expect(decideRetry({ kind: 'error', error: connectionError(code) }, 1, 0, policy, deps)).toMatchObject({
      retry: true,
      reason: 'connection',
    });
  });

  it('retries "socket hang up" and does not retry programming errors', () => {
    expect(decideRetry({ kind: 'error', error: new Error('socket hang up') }, 1, 0, policy, deps).retry).toBe(true);
    expect(decideRetry({ kind: 'error', error: new TypeError('x is not a function') }, 1, 0, policy, deps).retry).toBe(false);
  });

  it('uses Retry-After on 429 and 503 instead of the computed backoff, capped at maxRetryAfterMs', () => {
    expect(decideRetry({ kind: 'status', status: 429, retryAfter: '2' }, 1, 0, policy, deps)).toEqual({
      retry: true,
      delayMs: 2000,
      reason: 'status-429',
    });
    expect(decideRetry({ kind: 'status', status: 503, retryAfter: '2' }, 1, 0, policy, deps)).toEqual({
      retry: true,
      delayMs: 2000,
      reason: 'status-503',
    });
    expect(decideRetry({ kind: 'status', status: 429, retryAfter: '3600' }, 1, 0, policy, deps)).toMatchObject({ delayMs: 5000 });
    // 500 carries no Retry-After semantics: the jittered backoff applies.
    expect(decideRetry({ kind: 'status', status: 500, retryAfter: '2' }, 1, 0, policy, deps)).toMatchObject({ delayMs: 50 });
  });

  it('stops at maxAttempts and when the next sleep would pass the time budget', () => {
    expect(decideRetry({ kind: 'status', status: 503 }, 5, 0, policy, deps)).toEqual({ retry: false, reason: 'max-attempts' });
    expect(decideRetry({ kind: 'status', status: 429, retryAfter: '2' }, 1, 59_000, policy, deps)).toEqual({
      retry: false,
      reason: 'time-budget',
    });
  });
});

describe('runWithRetry', () => {
  function context(deps: RetryContext['deps'], overrides: Partial<RetryPolicy> = {}): RetryContext {
    return { policy: { ...policy, ...overrides }, deps, stats: createRetryStats() };
  }

  it('retries a storm of 429/500 and returns the first good answer, sleeping as told', async () => {
    const time = fakeTime(0.5);
    const ctx = context(time.deps);
    const answers = [{ status: 429, retryAfter: '1' }, { status: 500 }, { status: 503, retryAfter: '2' }, { status: 200 }];
    let calls = 0;
    const result = await runWithRetry(
      ctx,
      'GET /x',
      async () => answers[calls++]!,
      (a) => ({ kind: 'status', status: a.status, retryAfter: a.retryAfter }),
    );
    expect(result.status).toBe(200);
    expect(calls).toBe(4);
    // 1 s from Retry-After, 0.5 * 200 ms jittered backoff for the second retry, 2 s Retry-After.
    expect(time.sleeps).toEqual([1000, 100, 2000]);
    expect(ctx.stats).toEqual({
      attempts: 4,
      retries: 3,
      retriesByReason: { 'status-429': 1, 'status-500': 1, 'status-503': 1 },
      exhausted: 0,
    });
  });

  it('returns a 404 at once, without sleeping', async () => {
    const time = fakeTime();
    const ctx = context(time.deps);
    const result = await runWithRetry(
      ctx,
      'GET /x',
      async () => ({ status: 404 }),
      (a) => ({ kind: 'status', status: a.status }),
    );
    expect(result.status).toBe(404);
    expect(time.sleeps).toEqual([]);
    expect(ctx.stats.attempts).toBe(1);
  });

  it('gives up after maxAttempts and hands back the last answer, counting the exhaustion', async () => {
    const time = fakeTime();
    const ctx = context(time.deps, { maxAttempts: 3 });
    let calls = 0;
    const result = await runWithRetry(
      ctx,
      'GET /x',
      async () => ({ status: 502, n: ++calls }),
      (a) => ({ kind: 'status', status: a.status }),
    );
    expect(result).toEqual({ status: 502, n: 3 });
    expect(time.sleeps).toHaveLength(2);
    expect(ctx.stats.exhausted).toBe(1);
  });

  it('retries connection errors and rethrows the last one when they persist', async () => {
    const time = fakeTime();
    const ctx = context(time.deps, { maxAttempts: 4 });
    let calls = 0;
    await expect(
      runWithRetry(
        ctx,
        'GET /x',
        async () => {
          calls++;
          throw connectionError(calls % 2 ? 'ECONNREFUSED' : 'ECONNRESET');
        },
        () => ({ kind: 'status', status: 200 }),
      ),
    ).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(calls).toBe(4);
    expect(ctx.stats.retriesByReason).toEqual({ connection: 3 });
  });

  it('never retries an error that is not about the connection', async () => {
    const time = fakeTime();
    const ctx = context(time.deps);
    let calls = 0;
    await expect(
      runWithRetry(
        ctx,
        'GET /x',
        async () => {
          calls++;
          throw new RangeError('bad');
        },
        () => ({ kind: 'status', status: 200 }),
      ),
    ).rejects.toThrow('bad');
    expect(calls).toBe(1);
  });
});

describe('RetryingHttpLibrary', () => {
  function response(status: number, headers: Record<string, string> = {}, text = '{}') {
    let reads = 0;
    const context = new ResponseContext(status, headers, {
      text: async () => {
        reads++;
        if (reads > 1) throw new Error('body used already');
        return text;
      },
      binary: async () => Buffer.from(text),
    });
    return context;
  }

  it('resends the same request until a non-retryable answer, honouring Retry-After', async () => {
    const time = fakeTime(0.5);
    const ctx: RetryContext = { policy: defaultRetryPolicy, deps: time.deps, stats: createRetryStats() };
    const seen: string[] = [];
    const answers = [response(429, { 'retry-after': '3' }), response(503), response(200, {}, '{"kind":"Pod"}')];
    const library = new RetryingHttpLibrary(ctx, 5000, {
      send: (request) => {
        seen.push(`${request.getHttpMethod()} ${request.getUrl()} ${request.getSignal() ? 'with-timeout' : 'no-timeout'}`);
        return new Observable(Promise.resolve(answers.shift()!));
      },
    });
    const request = new RequestContext('http://127.0.0.1:1/api/v1/namespaces/a/pods/b', HttpMethod.GET);
    const result = await library.send(request).toPromise();
    expect(result.httpStatusCode).toBe(200);
    expect(await result.body.text()).toBe('{"kind":"Pod"}');
    expect(seen).toEqual(Array(3).fill('GET http://127.0.0.1:1/api/v1/namespaces/a/pods/b with-timeout'));
    expect(time.sleeps).toEqual([3000, 200]);
  });

  it('passes a 409 through on the first attempt', async () => {
    const time = fakeTime();
    const ctx: RetryContext = { policy: defaultRetryPolicy, deps: time.deps, stats: createRetryStats() };
    let sends = 0;
    const library = new RetryingHttpLibrary(ctx, 5000, {
      send: () => {
        sends++;
        return new Observable(Promise.resolve(response(409, {}, '{"reason":"AlreadyExists"}')));
      },
    });
    const result = await library.send(new RequestContext('http://127.0.0.1:1/x', HttpMethod.POST)).toPromise();
    expect(result.httpStatusCode).toBe(409);
    expect(await result.body.text()).toContain('AlreadyExists');
    expect(sends).toBe(1);
  });
});
