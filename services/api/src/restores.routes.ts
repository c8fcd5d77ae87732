import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { assertNever, isDns1123Label, RUN_NAMESPACE_LABEL } from '@stowage/core';
import { type BackupStorage, backupLayout } from '@stowage/storage';
import type { FastifyRequest, FastifySchemaCompiler } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { validatorCompiler as zodValidatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { type Access, runAttributes, takeNamespace, visibleOnly } from './access.js';
import { acceptedSchema, deletedSchema, errorResponseSchema, standardErrors } from './api.schema.js';
import type { RestoreRoutesDeps } from './api-deps.js';
import { ApiError, ApiErrorCode, invalidRequest } from './errors.js';
import {
  createRestoreBodySchema,
  listRestoresQuery,
  restoreItemListSchema,
  restoreItemsQuery,
  restoreListSchema,
  restoreParams,
  restoreSchema,
} from './restore.schema.js';
import { deleteEndedRestore, submitRestoreRequest } from './restore-requests.js';
import { RestoreReads, readRestoreView, toRestoreSummary } from './restore-view.js';

const passBodyThrough: FastifySchemaCompiler<unknown> = (route) =>
  route.httpPart === 'body'
    ? (data: unknown) => ({ value: data })
    : zodValidatorCompiler(route as Parameters<typeof zodValidatorCompiler>[0]);

/** What a restore needs to know of its backup: its phase, and the namespace of a namespaced one. */
export interface BackupOfRestore {
  phase: string;
  namespace?: string | undefined;
}

/**
 * The phase (and namespace) of a backup: its in-flight record in Redis, else the
 * `velero-backup.json` a finished backup left in storage (so a backup known only from storage can
 * be restored), whose `stowage.dev/namespace` label names a namespaced backup's namespace.
 */
export function backupPhaseReader(
  state: { getBackup(name: string): Promise<{ phase: string; namespace?: string } | undefined> },
  storage: Pick<BackupStorage, 'getObject'>,
): (name: string) => Promise<BackupOfRestore | undefined> {
  return async (name) => {
    const rec = await state.getBackup(name);
    if (rec) return { phase: rec.phase, namespace: rec.namespace };
    const raw = await storage.getObject(backupLayout(name).metadata).catch(() => undefined);
    if (!raw) return undefined;
    try {
      const doc = JSON.parse(raw.toString('utf8')) as {
        metadata?: { labels?: Record<string, unknown> };
        status?: { phase?: string };
        phase?: string;
      };
      const namespace = doc.metadata?.labels?.[RUN_NAMESPACE_LABEL];
      return {
        phase: doc.status?.phase ?? doc.phase ?? 'Unknown',
        ...(typeof namespace === 'string' && isDns1123Label(namespace) ? { namespace } : {}),
      };
    } catch {
      return { phase: 'Unknown' };
    }
  };
}

export const restoresRoutes: FastifyPluginAsyncZod<RestoreRoutesDeps & { access: Access }> = async (app, deps) => {
  const { restores, access } = deps;
  const randomSuffix = deps.randomSuffix ?? (() => randomBytes(5).toString('hex'));
  const reads = new RestoreReads(restores, deps.storage);
  const missing = (name: string) => new ApiError(ApiErrorCode.notFound, `restore "${name}" does not exist`);
  /** Authorized from the name before it is read (Access.findRun): a 404 never tells what exists where the caller may not look. */
  const findAllowed = (req: FastifyRequest, name: string, verb: string) =>
    access.findRun(
      req,
      'restores',
      verb,
      name,
      async () => {
        const found = await reads.find(name);
        return found ? { found, namespace: found.rec.namespace } : undefined;
      },
      () => missing(name),
    );
  /** The restore, once the caller may `verb` it (`get restores` in its namespace, `get clusterrestores` for a cluster-wide one). */
  const mustFind = async (req: FastifyRequest, name: string, verb = 'get') => {
    const allowed = await findAllowed(req, name, verb);
    if (!allowed) throw missing(name);
    return allowed.found;
  };

  app.post(
    '/v1/restores',
    {
      validatorCompiler: passBodyThrough,
      schema: {
        tags: ['restores'],
        summary: 'Submit a restore from a backup',
        description:
          'Records the restore (phase New) and queues it (201). 400 lists every validation problem with its path, and names the phase of a backup that is not Completed or PartiallyFailed; 404 when the backup does not exist; 409 when the name is taken. Retrying with the same X-Request-ID returns the restore that request created (200).',
        body: createRestoreBodySchema,
        response: {
          200: restoreSchema,
          201: restoreSchema,
          ...standardErrors,
          409: errorResponseSchema,
          413: errorResponseSchema,
          415: errorResponseSchema,
        },
      },
    },
    async (req, reply) => {
      if (req.body === undefined || req.body === null) {
        throw new ApiError(
          ApiErrorCode.validation,
          'the request body is empty; send {"name"?: string, "spec": {"backupName": ...}} as JSON',
          [{ path: '(body)', message: 'must be a JSON object with a "spec" field' }],
        );
      }
      // Who may create it is decided first: `create restores` in its namespace, or `create clusterrestores`.
      const scoped = takeNamespace(req.body);
      if (scoped.problems.length > 0) throw invalidRequest('restore request', scoped.problems);
      const { namespace, rest: body } = scoped;
      await access.require(req, runAttributes('restores', 'create', namespace));
      const requester = req.requester;
      const requestId = String(req.id);
      const result = await submitRestoreRequest(
        { ...deps, randomSuffix },
        { body, namespace, requester, requestId, decide: (attrs) => access.decide(requester, attrs) },
      );
      const name = result.restore.name;
      const spec = result.spec;
      if (!result.created) {
        const retried = req.headers['x-request-id'] === requestId && result.restore.requestId === requestId;
        if (!retried) throw new ApiError(ApiErrorCode.conflict, `a restore named "${name}" already exists`);
        return reply
          .code(200)
          .header('location', `/v1/restores/${name}`)
          .send(await readRestoreView(restores, result.restore));
      }
      req.log.info({ restore: name, backup: spec.backupName }, 'restore submitted');
      return reply
        .code(201)
        .header('location', `/v1/restores/${name}`)
        .send(await readRestoreView(restores, result.restore));
    },
  );

  app.get(
    '/v1/restores',
    {
      schema: {
        tags: ['restores'],
        summary: 'List restores, newest first',
        querystring: listRestoresQuery,
        response: { 200: restoreListSchema, 400: errorResponseSchema, 401: errorResponseSchema },
      },
    },
    async (req) => {
      const { phase, limit, cursor } = req.query;
      const page = await restores.listRestores({ limit, ...(cursor ? { cursor } : {}), ...(phase ? { phase } : {}) });
      const items = await visibleOnly(page.items, (rec) => rec.namespace, access.visibility(req, 'restores'));
      return { items: items.map(toRestoreSummary), ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
    },
  );

  app.get(
    '/v1/restores/:name',
    {
      schema: {
        tags: ['restores'],
        summary: 'A restore: spec, phase, progress, item results, tiers, PVRs by phase, hook runs, errors, warnings',
        params: restoreParams,
        response: { 200: restoreSchema, ...standardErrors },
      },
    },
    async (req) => reads.view(await mustFind(req, req.params.name)),
  );

  app.get(
    '/v1/restores/:name/items',
    {
      schema: {
        tags: ['restores'],
        summary: 'Per-item results: created, updated, exists-skipped or failed (with the reason)',
        params: restoreParams,
        querystring: restoreItemsQuery,
        response: { 200: restoreItemListSchema, ...standardErrors },
      },
    },
    async (req) => {
      return reads.items(await mustFind(req, req.params.name), req.query);
    },
  );

  app.get(
    '/v1/restores/:name/logs',
    {
      schema: {
        tags: ['restores'],
        summary: "The restore's log lines as NDJSON (every skip with its reason, every problem)",
        params: restoreParams,
        response: {
          200: { description: 'One JSON log line per line', content: { 'application/x-ndjson': { schema: z.string() } } },
          ...standardErrors,
        },
      },
    },
    async (req, reply) => {
      const found = await mustFind(req, req.params.name);
      async function* lines() {
        for await (const rows of reads.logChunks(found)) yield `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`;
      }
      return reply.type('application/x-ndjson; charset=utf-8').send(Readable.from(lines()) as unknown as string);
    },
  );

  app.post(
    '/v1/restores/:name/cancel',
    {
      schema: {
        tags: ['restores'],
        summary: 'Cancel a running restore',
        description:
          'Batches not started create nothing, no further tier starts, outstanding PVRs are asked to cancel, hooks not yet run are skipped; objects already created stay. The phase ends Canceled. 409 when the restore has already ended.',
        params: restoreParams,
        response: { 202: acceptedSchema, ...standardErrors, 409: errorResponseSchema },
      },
    },
    async (req, reply) => {
      const name = req.params.name;
      await findAllowed(req, name, 'update');
      const result = await deps.control.cancel(name);
      switch (result.outcome) {
        case 'not-found': {
          // Redis does not know it; storage may (a finished restore whose state Redis lost).
          const archived = await reads.find(name);
          if (archived)
            throw new ApiError(
              ApiErrorCode.conflict,
              `restore "${name}" has already ended (phase ${archived.rec.phase}); nothing to cancel`,
            );
          throw new ApiError(ApiErrorCode.notFound, `restore "${name}" does not exist`);
        }
        case 'already-ended':
          throw new ApiError(ApiErrorCode.conflict, `restore "${name}" has already ended (phase ${result.phase}); nothing to cancel`);
        case 'requested':
        case 'already-requested':
          return reply.code(202).send({ name, phase: result.phase, cancelRequested: true as const });
        default:
          return assertNever(result);
      }
    },
  );

  app.delete(
    '/v1/restores/:name',
    {
      schema: {
        tags: ['restores'],
        summary: 'Delete an ended restore: its record, its jobs and its results in backup storage (restored objects stay)',
        description: '409 while the restore is still running (cancel it first).',
        params: restoreParams,
        response: { 200: deletedSchema, ...standardErrors, 409: errorResponseSchema },
      },
    },
    async (req) => {
      const { rec } = await mustFind(req, req.params.name, 'delete');
      if ((await deleteEndedRestore({ ...deps, restores }, rec)) === 'running') {
        throw new ApiError(
          ApiErrorCode.conflict,
          `restore "${rec.name}" is ${rec.phase}; only an ended restore can be deleted (cancel it first)`,
        );
      }
      return { name: rec.name, deleted: true as const };
    },
  );
};
