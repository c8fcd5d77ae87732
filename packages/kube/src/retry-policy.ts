import { isConnectionError } from './kube-errors.js';

/** How hard to try one request before giving up. */
export interface RetryPolicy {
  /** Attempts in all, the first one included. */
  maxAttempts: number;
  /** Ceiling of the first backoff; doubles per retry. */
  baseDelayMs: number;
  /** Ceiling of any one computed backoff. */
  maxDelayMs: number;
  /** Budget from the first attempt: no retry is started that would sleep past it. */
  maxTotalMs: number;
  /** Longest Retry-After we obey; a server asking for more gets this. */
  maxRetryAfterMs: number;
}

export const defaultRetryPolicy: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: 6,
  baseDelayMs: 200,
  maxDelayMs: 10_000,
  maxTotalMs: 60_000,
  maxRetryAfterMs: 30_000,
});

/** Injected so tests neither sleep nor depend on chance. */
export interface RetryDeps {
  /** Uniform in [0, 1). */
  random: () => number;
  sleep: (ms: number) => Promise<void>;
  now: () => number;
}

export const realRetryDeps: RetryDeps = {
  random: Math.random,
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  now: Date.now,
};

/** Counters for metrics (`stowage_kube_retries_total{reason}` and friends). */
export interface RetryStats {
  /** Every request sent, retries included. */
  attempts: number;
  /** Attempts that were followed by another attempt. */
  retries: number;
  /** Retries by reason: `status-429`, `status-503`, `connection`, ... */
  retriesByReason: Record<string, number>;
  /** Requests that failed after the last allowed attempt or the time budget. */
  exhausted: number;
}

export function createRetryStats(): RetryStats {
  return { attempts: 0, retries: 0, retriesByReason: {}, exhausted: 0 };
}

export const retryableStatuses: ReadonlySet<number> = new Set([429, 500, 502, 503, 504]);

/**
 * Full jitter (AWS architecture blog): a uniform delay in [0, min(maxDelay, base * 2^retry)).
 * `retry` is 0 for the first retry.
 */
export function computeBackoffMs(retry: number, policy: Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>, random: () => number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, retry));
  return Math.floor(random() * ceiling);
}

/**
 * Retry-After is either delta-seconds or an HTTP date (RFC 9110 §10.2.3). Returns milliseconds
 * from `nowMs`, or undefined when the header is absent or unreadable.
 */
export function parseRetryAfterMs(header: string | undefined | null, nowMs: number): number | undefined {
  if (header === undefined || header === null) return undefined;
  const trimmed = header.trim();
  if (trimmed === '') return undefined;
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const dateMs = Date.parse(trimmed);
  if (Number.isNaN(dateMs)) return undefined;
  return Math.max(0, dateMs - nowMs);
}

/** What one attempt produced, as far as the retry decision cares. */
export type AttemptResult = { kind: 'status'; status: number; retryAfter?: string | undefined } | { kind: 'error'; error: unknown };

export type RetryDecision = { retry: true; delayMs: number; reason: string } | { retry: false; reason: string };

/**
 * Decides whether attempt number `attempt` (1-based) is retried and after how long.
 * 429/500/502/503/504 and connection errors are retried; everything else (404, 409, 422, ...) is an
 * answer. Retry-After on 429/503 replaces the computed backoff (capped at maxRetryAfterMs).
 */
export function decideRetry(
  result: AttemptResult,
  attempt: number,
  elapsedMs: number,
  policy: RetryPolicy,
  deps: Pick<RetryDeps, 'random' | 'now'>,
): RetryDecision {
  let reason: string;
  let retryAfterMs: number | undefined;
  if (result.kind === 'status') {
    if (!retryableStatuses.has(result.status)) return { retry: false, reason: `status-${result.status}` };
    reason = `status-${result.status}`;
    if (result.status === 429 || result.status === 503) retryAfterMs = parseRetryAfterMs(result.retryAfter, deps.now());
  } else {
    if (!isConnectionError(result.error)) return { retry: false, reason: 'error' };
    reason = 'connection';
  }
  if (attempt >= policy.maxAttempts) return { retry: false, reason: 'max-attempts' };
  const delayMs =
    retryAfterMs !== undefined ? Math.min(retryAfterMs, policy.maxRetryAfterMs) : computeBackoffMs(attempt - 1, policy, deps.random);
  if (elapsedMs + delayMs > policy.maxTotalMs) return { retry: false, reason: 'time-budget' };
  return { retry: true, delayMs, reason };
}

export interface RetryContext {
  policy: RetryPolicy;
  deps: RetryDeps;
  stats: RetryStats;
  /** Called before each retry's sleep (for logs). */
  onRetry?: ((info: { attempt: number; delayMs: number; reason: string; description: string }) => void) | undefined;
}

/**
 * Runs `attemptFn` until its result is not retryable. `classify` turns a resolved value into an
 * AttemptResult (a response with a status); a thrown error is classified as a connection error or not.
 * Resolves with the last value; rethrows the last error. `discard` releases a value that is retried.
 */
export async function runWithRetry<T>(
  ctx: RetryContext,
  description: string,
  attemptFn: (attempt: number) => Promise<T>,
  classify: (value: T) => AttemptResult,
  discard?: (value: T) => Promise<void>,
): Promise<T> {
  const startedAt = ctx.deps.now();
  for (let attempt = 1; ; attempt++) {
    ctx.stats.attempts++;
    let outcome: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: await attemptFn(attempt) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    const result: AttemptResult = outcome.ok ? classify(outcome.value) : { kind: 'error', error: outcome.error };
    const isFailure = !outcome.ok || (result.kind === 'status' && retryableStatuses.has(result.status));
    const decision = decideRetry(result, attempt, ctx.deps.now() - startedAt, ctx.policy, ctx.deps);
    if (!decision.retry) {
      if (isFailure && (decision.reason === 'max-attempts' || decision.reason === 'time-budget')) ctx.stats.exhausted++;
      if (outcome.ok) return outcome.value;
      throw outcome.error;
    }
    if (outcome.ok && discard) await discard(outcome.value);
    ctx.stats.retries++;
    ctx.stats.retriesByReason[decision.reason] = (ctx.stats.retriesByReason[decision.reason] ?? 0) + 1;
    ctx.onRetry?.({ attempt, delayMs: decision.delayMs, reason: decision.reason, description });
    await ctx.deps.sleep(decision.delayMs);
  }
}
