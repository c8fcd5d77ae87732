import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { assertNever, generateBackupName, validateRestoreRequest } from '@stowage/core';
import type { CancelRestoreResult, RestoreState, SubmitRestoreInput, SubmitRestoreResult } from '@stowage/pipeline';
import { restoreLayout } from '@stowage/pipeline';
import { QueueName, restoreJobIds } from '@stowage/queue';
import { type BackupStorage, backupLayout } from '@stowage/storage';
import type { Queue } from 'bullmq';
import type { FastifySchemaCompiler } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { validatorCompiler as zodValidatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { acceptedSchema, deletedSchema, errorResponseSchema, standardErrors, TERMINAL_BACKUP_PHASES } from './api.schema.js';
import { describeProblems } from './app.js';
import { ApiError, ApiErrorCode } from './errors.js';
import {
  createRestoreBodySchema,
  listRestoresQuery,
  restoreItemListSchema,
  restoreItemsQuery,
  restoreListSchema,
  restoreParams,
  restoreSchema,
} from './restore.schema.js';
import { RestoreReads, readRestoreView, toRestoreSummary } from './restore-view.js';

/** Submitting and cancelling restores: the pipeline's job (records the restore, adds `restore-finalize ← restore-plan`). */
export interface RestoreControl {
  submit(input: SubmitRestoreInput): Promise<SubmitRestoreResult>;
  cancel(name: string): Promise<CancelRestoreResult>;
}

export interface RestoreRoutesDeps {
  restores: RestoreState;
  control: RestoreControl;
  /** The phase of a backup, or undefined when there is no such backup (in flight or in storage). */
  backupPhase(name: string): Promise<string | undefined>;
  /** Backup storage: a finished restore's archive is read from it (when Redis lost it); DELETE removes `restores/<name>/`. */
  storage: Pick<BackupStorage, 'deletePrefix' | 'getObject'>;
  queues: readonly Queue[];
  randomSuffix?: () => string;
}

/** Backups a restore may read (Velero: Completed or PartiallyFailed). */
const RESTORABLE_BACKUP_PHASES = new Set(['Completed', 'PartiallyFailed']);

const passBodyThrough: FastifySchemaCompiler<unknown> = (route) =>
  route.httpPart === 'body'
    ? (data: unknown) => ({ value: data })
    : zodValidatorCompiler(route as Parameters<typeof zodValidatorCompiler>[0]);

/**
 * The phase of a backup: its in-flight record in Redis, else the `velero-backup.json` a finished
 * backup left in storage (so a backup known only from storage can be restored).
 */
export function backupPhaseReader(
  state: { getBackup(name: string): Promise<{ phase: string } | undefined> },
  storage: Pick<BackupStorage, 'getObject'>,
): (name: string) => Promise<string | undefined> {
  return async (name) => {
    const rec = await state.getBackup(name);
    if (rec) return rec.phase;
    const raw = await storage.getObject(backupLayout(name).metadata).catch(() => undefined);
    if (!raw) return undefined;
    try {
      const doc = JSON.parse(raw.toString('utf8')) as { status?: { phase?: string }; phase?: string };
      return doc.status?.phase ?? doc.phase ?? 'Unknown';
    } catch {
      return 'Unknown';
    }
  };
}

export const restoresRoutes: FastifyPluginAsyncZod<RestoreRoutesDeps> = async (app, deps) => {
  const { restores } = deps;
  const randomSuffix = deps.randomSuffix ?? (() => randomBytes(5).toString('hex'));
  const reads = new RestoreReads(restores, deps.storage);
  const mustFind = async (name: string) => {
    const found = await reads.find(name);
    if (!found) throw new ApiError(ApiErrorCode.notFound, `restore "${name}" does not exist`);
    return found;
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
      const validation = validateRestoreRequest(req.body);
      if (!validation.ok) {
        throw new ApiError(
          ApiErrorCode.validation,
          `invalid restore request: ${describeProblems(validation.problems)}`,
          validation.problems,
        );
      }
      const spec = validation.value;
      const phase = await deps.backupPhase(spec.backupName);
      if (phase === undefined) throw new ApiError(ApiErrorCode.notFound, `backup "${spec.backupName}" does not exist`);
      if (!RESTORABLE_BACKUP_PHASES.has(phase)) {
        const message = `backup "${spec.backupName}" is ${phase}; only a Completed or PartiallyFailed backup can be restored`;
        throw new ApiError(ApiErrorCode.validation, message, [{ path: 'spec.backupName', message }]);
      }
      const name = validation.name ?? generateBackupName(spec.backupName, randomSuffix());
      const requestId = String(req.id);
      const result = await deps.control.submit({ name, spec, requestId });
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
      return { items: page.items.map(toRestoreSummary), ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
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
    async (req) => reads.view(await mustFind(req.params.name)),
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
      return reads.items(await mustFind(req.params.name), req.query);
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
      const found = await mustFind(req.params.name);
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
      const { rec } = await mustFind(req.params.name);
      if (!TERMINAL_BACKUP_PHASES.has(rec.phase)) {
        throw new ApiError(
          ApiErrorCode.conflict,
          `restore "${rec.name}" is ${rec.phase}; only an ended restore can be deleted (cancel it first)`,
        );
      }
      // Storage first: restore sync would bring back a catalogue entry whose restore.json remained.
      await deps.storage.deletePrefix(restoreLayout(rec.name).dir);
      const queue = deps.queues.find((q) => q.name === QueueName.restores);
      if (queue) await queue.remove(restoreJobIds.finalize(rec.name), { removeChildren: true });
      await restores.deleteRestore(rec.name);
      return { name: rec.name, deleted: true as const };
    },
  );
};
