/*
 * Write requests per token: @fastify/rate-limit (a kept library: per-key windows in an LRU, the
 * standard RateLimit headers and Retry-After) on POST, PUT, PATCH and DELETE. The key is the
 * caller (a hash of its token or session cookie, else its address: stream-slots' callerKey), so a
 * token that floods the api with submits is answered 429 while other tokens are served. Counted
 * per api process, like the event-stream caps; checked before the body is parsed or validated, so a
 * refused request costs no more than its headers.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import { ApiError, ApiErrorCode } from './errors.js';
import { callerKey } from './stream-slots.js';

export interface WriteRateLimit {
  /** Write requests one caller may make per window; 0 turns the limit off. */
  max: number;
  windowMs: number;
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export async function registerWriteRateLimit(app: FastifyInstance, limit: WriteRateLimit | undefined): Promise<void> {
  if (!limit || limit.max === 0) return;
  await app.register(rateLimit, {
    global: true,
    max: limit.max,
    timeWindow: limit.windowMs,
    hook: 'preParsing',
    keyGenerator: callerKey,
    allowList: (req) => !WRITE_METHODS.has(req.method),
    errorResponseBuilder: (_req, ctx) =>
      new ApiError(
        ApiErrorCode.tooManyRequests,
        `too many write requests: at most ${ctx.max} per ${Math.round(limit.windowMs / 1000)} s from one token; retry in ${ctx.after}`,
      ),
  });
}
