import type { RedisClient } from '@stowage/queue';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorResponseSchema } from './api.schema.js';
import { ApiError, ApiErrorCode } from './errors.js';

export interface HealthOptions {
  redis: RedisClient;
  isClosing: () => boolean;
  isReady?: (() => boolean) | undefined;
  pingTimeoutMs?: number;
}

const okSchema = z.object({ status: z.literal('ok') });

/** `/livez`: the process answers. `/readyz`: it can serve (Redis reachable, not shutting down). Both open. */
export const healthRoutes: FastifyPluginAsyncZod<HealthOptions> = async (app, opts) => {
  const pingTimeoutMs = opts.pingTimeoutMs ?? 1_000;
  app.get(
    '/livez',
    { config: { public: true }, schema: { tags: ['operations'], summary: 'Liveness', security: [], response: { 200: okSchema } } },
    async () => ({ status: 'ok' as const }),
  );
  app.get(
    '/readyz',
    {
      config: { public: true },
      schema: {
        tags: ['operations'],
        summary: 'Readiness: RedisClient reachable and not shutting down',
        security: [],
        response: { 200: okSchema, 503: errorResponseSchema },
      },
    },
    async () => {
      const reasons: string[] = [];
      if (opts.isClosing()) reasons.push('shutting down');
      if (opts.isReady && !opts.isReady()) reasons.push('workers not running');
      if (opts.redis.status !== 'ready') reasons.push(`redis connection is ${opts.redis.status}`);
      else if (!(await pingWithin(opts.redis, pingTimeoutMs))) reasons.push(`redis did not answer PING within ${pingTimeoutMs} ms`);
      if (reasons.length > 0) throw new ApiError(ApiErrorCode.unavailable, `not ready: ${reasons.join('; ')}`);
      return { status: 'ok' as const };
    },
  );
};

async function pingWithin(redis: RedisClient, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([redis.ping().then((r) => r === 'PONG'), timeout]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
