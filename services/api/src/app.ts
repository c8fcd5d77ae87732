import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import {
  createJsonSchemaTransform,
  hasZodFastifySchemaValidationErrors,
  serializerCompiler,
  validatorCompiler,
} from 'fastify-type-provider-zod';
import { Access } from './access.js';
import { type ApiDeps, DEFAULT_BODY_LIMIT_BYTES } from './api-deps.js';
import { redactUrl } from './auth.js';
import { authPlugin } from './auth.plugin.js';
import { backupEventsRoutes } from './backup-events.routes.js';
import { BackupReads } from './backup-view.js';
import { backupsRoutes } from './backups.routes.js';
import { consolePlugin } from './console.plugin.js';
import { ApiError, ApiErrorCode, type ApiProblem, describeProblems, errorBody, HTTP_STATUS_OF } from './errors.js';
import { healthRoutes } from './health.routes.js';
import { metricsPlugin } from './metrics.plugin.js';
import { queuesDashboardPlugin } from './queues-dashboard.plugin.js';
import { RestoreReads } from './restore-view.js';
import { restoresRoutes } from './restores.routes.js';
import { schedulesRoutes } from './schedules.routes.js';
import { sessionRoutes } from './session.routes.js';
import { createSessionCookies, DEFAULT_SESSION_TTL_MS } from './session-cookie.js';
import { DEFAULT_STREAM_CAPS, StreamSlots } from './stream-slots.js';
import { registerWriteRateLimit } from './write-rate-limit.js';

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._~-]{1,128}$/;

/**
 * Builds the API without listening, so tests use `inject()` and `main.ts` calls `listen`.
 * Swagger is registered before every route so the OpenAPI document lists them all.
 */
export async function buildApp(deps: ApiDeps): Promise<FastifyInstance> {
  const logger = deps.logger.child(
    { component: 'api' },
    {
      // Only these request fields are ever logged: never headers (Authorization), never raw query values that look like tokens.
      serializers: {
        req: (req: { method?: string; url?: string; id?: string; ip?: string }) => ({
          method: req.method,
          url: req.url ? redactUrl(req.url) : undefined,
          remoteAddress: req.ip,
        }),
        res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
      },
    },
  );

  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: deps.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES,
    genReqId: (req: IncomingMessage) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID_PATTERN.test(given) ? given : randomUUID();
    },
    return503OnClosing: true,
    forceCloseConnections: true,
    // Long path params reach the schema (a clear 400 naming the limit), not the router's bare 414.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 1024 },
  });

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // JSON only: a text/plain body is answered 415, not handed to a route as a string.
  app.removeContentTypeParser('text/plain');
  // An empty JSON body means "no body" (curl -X POST …/cancel -H 'content-type: application/json'
  // must not fail); anything else goes through fastify's own parser with prototype-poisoning checks.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if (typeof body === 'string' && body.trim() === '') {
      done(null, undefined);
      return;
    }
    parseJson(req, body as string, done);
  });

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const { code, message, problems } = classifyError(err);
    const status = HTTP_STATUS_OF[code];
    if (status >= 500) req.log.error({ err }, 'request failed');
    else req.log.info({ code, status }, 'request rejected');
    return reply
      .code(status)
      .type('application/json')
      .send(errorBody(code, message, String(req.id), problems));
  });

  app.setNotFoundHandler((req, reply) => {
    return reply
      .code(404)
      .type('application/json')
      .send(errorBody(ApiErrorCode.routeNotFound, `no route ${req.method} ${redactUrl(req.url).split('?')[0]}`, String(req.id)));
  });

  const state = { closing: false };
  app.addHook('preClose', async () => {
    state.closing = true;
  });

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Stowage API',
        description: 'Submit Kubernetes backups and follow them: status, blocks, live events, logs.',
        version: '1.0.0',
      },
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearerAuth: [] }],
      tags: [
        { name: 'backups', description: 'Submit, follow, cancel and delete backups' },
        { name: 'restores', description: 'Restore a backup into the cluster: submit, follow, cancel and delete restores' },
        { name: 'operations', description: 'Health and metrics' },
      ],
    },
    transform: createJsonSchemaTransform({
      skipList: ['/docs', '/docs/', '/docs/json', '/docs/yaml', '/docs/static/*', '/docs/*', '/docs/uiConfig', '/docs/initOAuth'],
    }),
  });

  const sessions =
    deps.auth.mode === 'tokens' ? createSessionCookies(deps.auth.tokens, deps.sessionTtlMs ?? DEFAULT_SESSION_TTL_MS) : undefined;
  const now = deps.now ?? Date.now;
  await app.register(authPlugin, { auth: deps.auth, sessions, now });
  await registerWriteRateLimit(app, deps.writeRateLimit);
  await app.register(healthRoutes, { redis: deps.redis, isClosing: () => state.closing, isReady: deps.isReady });
  const reads = new BackupReads(deps.state, deps.storage);
  const access = new Access(deps.auth.mode === 'tokens' ? deps.auth.kube : undefined);
  await app.register(metricsPlugin, {
    reads,
    registry: deps.metricsRegistry,
    queues: deps.queues,
    schedules: deps.schedules,
    restores: deps.restores?.restores,
    prune: deps.prune,
  });
  await app.register(backupsRoutes, { ...deps, reads, access });
  if (deps.schedules)
    await app.register(schedulesRoutes, {
      schedules: deps.schedules,
      backups: deps.control,
      access,
      now,
      ...(deps.pruneGraceMs !== undefined ? { pruneGraceMs: deps.pruneGraceMs } : {}),
      ...(deps.specLimits ? { specLimits: deps.specLimits } : {}),
    });
  // One count of open event streams for backups' and restores' alike.
  const slots = new StreamSlots(deps.streamCaps ?? DEFAULT_STREAM_CAPS);
  await app.register(backupEventsRoutes, {
    state: deps.state,
    reads,
    redis: deps.redis,
    heartbeatMs: deps.heartbeatMs ?? 15_000,
    slots,
    access,
  });
  if (deps.restores) {
    await app.register(restoresRoutes, {
      ...deps.restores,
      access,
      queues: deps.queues,
      storage: deps.storage,
      ...(deps.randomSuffix ? { randomSuffix: deps.randomSuffix } : {}),
      ...(deps.specLimits ? { specLimits: deps.specLimits } : {}),
    });
    await app.register(backupEventsRoutes, {
      state: deps.restores.restores,
      kind: 'restore',
      reads: new RestoreReads(deps.restores.restores, deps.storage),
      redis: deps.redis,
      heartbeatMs: deps.heartbeatMs ?? 15_000,
      slots,
      access,
    });
  }
  await app.register(queuesDashboardPlugin, {
    queues: deps.queues,
    basePath: '/admin/queues',
    readOnly: deps.dashboardReadOnly ?? false,
    access,
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' });
  await app.register(sessionRoutes, { sessions, now });
  await app.register(consolePlugin);

  return app;
}

/** Maps any error (ours, fastify's, a validator's, Redis's) to one code of the catalogue. */
function classifyError(err: FastifyError): { code: ApiErrorCode; message: string; problems?: ApiProblem[] } {
  if (err instanceof ApiError) return { code: err.code, message: err.message, ...(err.problems ? { problems: err.problems } : {}) };
  if (hasZodFastifySchemaValidationErrors(err) || Array.isArray((err as { validation?: unknown }).validation)) {
    const where = (err as { validationContext?: string }).validationContext ?? 'request';
    const issues = (err as { validation: Array<{ instancePath?: string; message?: string; params?: Record<string, unknown> }> }).validation;
    const problems = issues.map((i) => ({ path: joinPath(where, i.instancePath ?? ''), message: i.message ?? 'is invalid' }));
    return { code: ApiErrorCode.validation, message: `invalid ${where}: ${describeProblems(problems)}`, problems };
  }
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { code: ApiErrorCode.badJson, message: 'the request body is not valid JSON' };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { code: ApiErrorCode.badJson, message: 'the request body is empty but Content-Type is application/json' };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { code: ApiErrorCode.payloadTooLarge, message: 'the request body is larger than the limit of 1 MiB' };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { code: ApiErrorCode.unsupportedMediaType, message: 'the request body must be JSON (Content-Type: application/json)' };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { code: ApiErrorCode.badRequest, message: 'the request body size does not match Content-Length' };
  }
  if (isRedisUnavailable(err))
    return { code: ApiErrorCode.unavailable, message: 'the backup state store (Redis) is unavailable; retry later' };
  const status = typeof err.statusCode === 'number' ? err.statusCode : 500;
  if (status === 413) return { code: ApiErrorCode.payloadTooLarge, message: err.message };
  if (status === 415) return { code: ApiErrorCode.unsupportedMediaType, message: err.message };
  if (status === 404) return { code: ApiErrorCode.notFound, message: err.message };
  if (status === 405) return { code: ApiErrorCode.methodNotAllowed, message: err.message };
  if (status === 401) return { code: ApiErrorCode.unauthorized, message: err.message };
  if (status === 403) return { code: ApiErrorCode.forbidden, message: err.message };
  if (status === 409) return { code: ApiErrorCode.conflict, message: err.message };
  if (status === 503) return { code: ApiErrorCode.unavailable, message: err.message };
  if (status >= 400 && status < 500) return { code: ApiErrorCode.badRequest, message: err.message };
  return { code: ApiErrorCode.internal, message: 'internal error; the request id identifies it in the logs' };
}

function isRedisUnavailable(err: Error): boolean {
  const m = err.message ?? '';
  return (
    err.name === 'MaxRetriesPerRequestError' ||
    m.includes("Stream isn't writeable") ||
    m.includes('Connection is closed') ||
    m.includes('ECONNREFUSED')
  );
}

function joinPath(where: string, instancePath: string): string {
  const segments = instancePath.split('/').filter((s) => s.length > 0);
  let path = where === 'querystring' ? 'query' : where;
  for (const s of segments) path += /^\d+$/.test(s) ? `[${s}]` : `.${s}`;
  return path;
}
