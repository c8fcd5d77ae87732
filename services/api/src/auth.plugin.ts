import type { Requester } from '@stowage/core';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { type AuthMode, bearerToken, createTokenVerifier, QUERY_TOKEN_PARAMS } from './auth.js';
import { ApiErrorCode, errorBody } from './errors.js';
import { cookieMayOpen, readCookie, SESSION_COOKIE, type SessionCookies } from './session-cookie.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Open without a token (health and metrics only). */
    public?: boolean;
  }
  interface FastifyRequest {
    /**
     * Who asks (set by the auth hook): a Kubernetes user (its token reviewed), or Stowage's own
     * rights (a static token, the API without auth). Public routes leave it unset.
     */
    requester?: Requester;
  }
}

const STATIC_TOKEN: Requester = Object.freeze({ kind: 'stowage', via: 'static-token' });
const AUTH_DISABLED: Requester = Object.freeze({ kind: 'stowage', via: 'auth-disabled' });

export interface AuthPluginOptions {
  auth: AuthMode;
  /** The console's session cookies (tokens mode only): accepted for GET/HEAD of the dashboard and /docs, nothing else. */
  sessions?: SessionCookies | undefined;
  now?: () => number;
}

/**
 * Bearer-token auth on every route except those marked `config: { public: true }`, including the
 * dashboard, /docs and unknown routes. A credential in the query string is refused outright:
 * URLs end up in proxy logs and browser history. Without an Authorization header, a valid console
 * session cookie opens GET/HEAD of the routes `cookieMayOpen` names (decided on the matched route
 * pattern, not the raw URL), so a browser can show the dashboard and the docs; never the REST API.
 * A static token is Stowage's own rights (a cluster-admin equivalent); with `auth.kube`, any other
 * token is asked of the API server (TokenReview) and the request acts as that user, each route
 * asking SubjectAccessReview for what it does (access.ts).
 */
const plugin: FastifyPluginAsync<AuthPluginOptions> = async (app: FastifyInstance, opts) => {
  const verify = opts.auth.mode === 'tokens' ? createTokenVerifier(opts.auth.tokens) : undefined;
  const kube = opts.auth.mode === 'tokens' ? opts.auth.kube : undefined;
  const now = opts.now ?? Date.now;
  app.addHook('onRequest', async (req, reply) => {
    if (req.routeOptions.config?.public === true) return;
    const query = req.url.indexOf('?');
    if (query >= 0) {
      const params = new URLSearchParams(req.url.slice(query + 1));
      for (const key of params.keys()) {
        if ((QUERY_TOKEN_PARAMS as readonly string[]).includes(key.toLowerCase())) {
          return deny(req, reply, `credentials in the query string ("${key}") are not accepted; send "Authorization: Bearer <token>"`);
        }
      }
    }
    if (!verify) {
      req.requester = AUTH_DISABLED;
      return;
    }
    const header = req.headers.authorization;
    const token = bearerToken(header);
    if (header === undefined && opts.sessions && cookieMayOpen(req.method, req.routeOptions.url ?? '')) {
      const cookie = readCookie(req.headers.cookie, SESSION_COOKIE);
      if (cookie !== undefined && opts.sessions.verify(cookie, now())) {
        req.requester = STATIC_TOKEN;
        return;
      }
    }
    if (token === undefined) {
      return deny(
        req,
        reply,
        header ? 'the Authorization header must be "Bearer <token>"' : 'missing "Authorization: Bearer <token>" header',
      );
    }
    if (verify(token)) {
      req.requester = STATIC_TOKEN;
      return;
    }
    if (kube) {
      let user: Awaited<ReturnType<typeof kube.authenticate>>;
      try {
        user = await kube.authenticate(token);
      } catch (err) {
        req.log.warn({ err }, 'TokenReview failed');
        return reply
          .code(503)
          .type('application/json')
          .send(
            errorBody(
              ApiErrorCode.unavailable,
              'the Kubernetes API server did not answer the TokenReview of this token; retry later',
              String(req.id),
            ),
          );
      }
      if (user) {
        req.requester = { kind: 'user', ...user };
        return;
      }
      return deny(
        req,
        reply,
        'the bearer token is neither a Stowage API token nor a Kubernetes token the API server accepts',
        'invalid_token',
      );
    }
    return deny(req, reply, 'the bearer token is not valid', 'invalid_token');
  });
};

/**
 * Answers 401 directly rather than throwing: plugins such as bull-board install their own
 * error handler, which would turn a thrown 401 into their own 500.
 */
function deny(req: FastifyRequest, reply: FastifyReply, message: string, error?: string): FastifyReply {
  req.log.info({ code: ApiErrorCode.unauthorized }, 'request unauthenticated');
  return reply
    .code(401)
    .header('www-authenticate', error ? `Bearer realm="stowage", error="${error}"` : 'Bearer realm="stowage"')
    .type('application/json')
    .send(errorBody(ApiErrorCode.unauthorized, message, String(req.id)));
}

// Not encapsulated: the hook must cover routes registered by sibling plugins.
(plugin as unknown as Record<symbol, boolean>)[Symbol.for('skip-override')] = true;
export const authPlugin = plugin;
