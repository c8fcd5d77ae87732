import { describeRequester } from '@stowage/core';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorResponseSchema } from './api.schema.js';
import { bearerToken } from './auth.js';
import { SESSION_COOKIE, type SessionCookies, sessionCookieHeader } from './session-cookie.js';

export interface SessionRoutesOptions {
  /** Undefined when auth is disabled: there is nothing to open, so no cookie is set. */
  sessions: SessionCookies | undefined;
  now?: () => number;
}

const SESSION_SCOPE = ['GET /admin/queues*', 'GET /docs*'];

const sessionSchema = z.object({
  cookie: z
    .boolean()
    .describe(
      'Whether a session cookie was set (false when the API runs without auth, and for a Kubernetes user: the pages it opens run with Stowage’s own rights)',
    ),
  expiresAt: z.string().optional().describe('RFC 3339 time the cookie stops being accepted'),
  scope: z.array(z.string()).describe('What the cookie opens: GET/HEAD of the queue dashboard and the API docs, nothing else'),
});

const identitySchema = z.object({
  kind: z
    .enum(['user', 'stowage'])
    .describe(
      '`user`: a Kubernetes identity (its token reviewed), each call authorized by RBAC on stowage.dev as it; `stowage`: Stowage’s own rights (a static token, auth disabled)',
    ),
  username: z.string().optional().describe('The Kubernetes username, as TokenReview named it (users only)'),
  groups: z.array(z.string()).optional().describe('Its groups, as TokenReview named them (users only)'),
  description: z
    .string()
    .describe('Who the API takes the caller for, in words: `User "alice"`, `a static API token (cluster-admin equivalent)`'),
});

/**
 * `POST /v1/session` (bearer token required, like every API route) sets the console's session
 * cookie, so a browser can open the queue dashboard and the docs, which cannot send a bearer
 * header; `DELETE /v1/session` clears it. The cookie is HttpOnly, SameSite=Strict, Secure over
 * https, and the auth hook accepts it only for GET/HEAD on /admin/queues* and /docs*.
 */
export const sessionRoutes: FastifyPluginAsyncZod<SessionRoutesOptions> = async (app, opts) => {
  const now = opts.now ?? Date.now;
  const secureOf = (req: { protocol: string; headers: Record<string, unknown> }): boolean =>
    req.protocol === 'https' || req.headers['x-forwarded-proto'] === 'https';

  app.post(
    '/v1/session',
    {
      schema: {
        tags: ['operations'],
        summary: 'Open a browser session for the queue dashboard and the docs',
        description: `Sets an HttpOnly, SameSite=Strict cookie "${SESSION_COOKIE}" (Secure over https) that opens GET/HEAD of /admin/queues* and /docs* only; the REST API always needs the bearer header.`,
        response: { 200: sessionSchema, 401: errorResponseSchema },
      },
    },
    async (req, reply) => {
      const token = bearerToken(req.headers.authorization);
      // A Kubernetes user gets none: the cookie opens the dashboard and docs with Stowage's own
      // rights, which RBAC has not granted that user (the dashboard shows every backup's jobs).
      if (!opts.sessions || token === undefined || req.requester?.kind === 'user') return { cookie: false, scope: SESSION_SCOPE };
      const issued = opts.sessions.issue(token, now());
      const maxAgeSec = Math.max(0, Math.floor((issued.expiresAtMs - now()) / 1000));
      reply.header('set-cookie', sessionCookieHeader(issued.value, { maxAgeSec, secure: secureOf(req) }));
      reply.header('cache-control', 'no-store');
      return { cookie: true, expiresAt: new Date(issued.expiresAtMs).toISOString(), scope: SESSION_SCOPE };
    },
  );

  app.get(
    '/v1/identity',
    {
      schema: {
        tags: ['operations'],
        summary: 'Who the API takes the caller for',
        description:
          'The identity a request with this bearer token acts as (`kubectl auth whoami` for the API): a Kubernetes user, whose every call is authorized by RBAC on stowage.dev (docs/tenancy.md), or Stowage’s own rights. The console shows it after sign-in.',
        response: { 200: identitySchema, 401: errorResponseSchema },
      },
    },
    async (req) => {
      const requester = req.requester;
      const description = describeRequester(requester);
      if (requester?.kind === 'user') return { kind: 'user' as const, username: requester.username, groups: requester.groups, description };
      return { kind: 'stowage' as const, description };
    },
  );

  app.delete(
    '/v1/session',
    {
      schema: {
        tags: ['operations'],
        summary: 'End the browser session (clears the cookie)',
        response: { 200: sessionSchema, 401: errorResponseSchema },
      },
    },
    async (req, reply) => {
      reply.header('set-cookie', sessionCookieHeader('', { maxAgeSec: 0, secure: secureOf(req) }));
      return { cookie: false, scope: SESSION_SCOPE };
    },
  );
};
