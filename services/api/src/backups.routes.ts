import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  assertNever,
  confineBackupSpec,
  fsBackupTimeoutProblem,
  generateBackupName,
  namespacedBackupProblems,
  runKey,
  specLimitProblems,
  validateBackupRequest,
} from '@stowage/core';
import { backupLayout, readGzipJson } from '@stowage/storage';
import type { FastifyRequest, FastifySchemaCompiler } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { validatorCompiler as zodValidatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { type Access, runAttributes, takeNamespace, visibleOnly } from './access.js';
import {
  acceptedSchema,
  backupListSchema,
  backupParams,
  backupSchema,
  blockListSchema,
  blocksQuery,
  createBackupBodySchema,
  deletedSchema,
  deletingSchema,
  errorResponseSchema,
  listBackupsQuery,
  standardErrors,
  TERMINAL_BACKUP_PHASES,
} from './api.schema.js';
import type { ApiDeps } from './api-deps.js';
import { type BackupReads, toBackupSummary } from './backup-view.js';
import { runDryRun } from './dry-run.js';
import { dryRunPlanSchema, dryRunQuery } from './dry-run.schema.js';
import { ApiError, ApiErrorCode, invalidRequest } from './errors.js';

/**
 * The body of POST /v1/backups is validated by core, not by the route schema: core reports
 * every problem at once with its JSON path (the schema here only documents the shape). So the
 * body part passes through and the handler validates; params and query use zod as everywhere.
 */
const passBodyThrough: FastifySchemaCompiler<unknown> = (route) =>
  route.httpPart === 'body'
    ? (data: unknown) => ({ value: data })
    : zodValidatorCompiler(route as Parameters<typeof zodValidatorCompiler>[0]);

const defaultSuffix = (): string => randomBytes(5).toString('hex');

export const backupsRoutes: FastifyPluginAsyncZod<ApiDeps & { reads: BackupReads; access: Access }> = async (app, deps) => {
  const { state, reads, access } = deps;
  const randomSuffix = deps.randomSuffix ?? defaultSuffix;

  const missing = (name: string) => new ApiError(ApiErrorCode.notFound, `backup "${name}" does not exist`);
  /**
   * The backup, once the caller may `verb` it (`get backups` in its namespace, `get clusterbackups`
   * for a cluster-wide one): authorized from the name before it is read (Access.findRun).
   */
  const mustGet = async (req: FastifyRequest, name: string, verb = 'get') => {
    const rec = await access.findRun(
      req,
      'backups',
      verb,
      name,
      () => reads.record(name),
      () => missing(name),
    );
    if (!rec) throw missing(name);
    return rec;
  };
  /** Before cancel or delete: the caller's right to `verb` the backup, asked before it is read (else the control answers 404). */
  const mayChange = async (req: FastifyRequest, name: string, verb: string) => {
    await access.findRun(
      req,
      'backups',
      verb,
      name,
      () => reads.record(name),
      () => missing(name),
    );
  };

  app.post(
    '/v1/backups',
    {
      validatorCompiler: passBodyThrough,
      schema: {
        tags: ['backups'],
        summary: 'Submit a backup',
        description:
          'Records the backup (phase New) and queues it (201). 400 lists every validation problem with its path; 409 when the name is taken. Retrying with the same X-Request-ID returns the backup that request created (200). With `dryRun=true` it validates the same way (same 400) and answers 200 with the plan a real run would make now — ItemBlocks, hooks per pod and phase, every volume decision, estimated bytes per node, warnings — reading the cluster with the lists a real plan uses and writing or executing nothing.',
        querystring: dryRunQuery,
        body: createBackupBodySchema,
        response: {
          200: z.union([backupSchema, dryRunPlanSchema]),
          201: backupSchema,
          ...standardErrors,
          409: errorResponseSchema,
          413: errorResponseSchema,
          415: errorResponseSchema,
        },
      },
    },
    async (req, reply) => {
      if (req.body === undefined || req.body === null) {
        throw new ApiError(ApiErrorCode.validation, 'the request body is empty; send {"name"?: string, "spec": {...}} as JSON', [
          { path: '(body)', message: 'must be a JSON object with a "spec" field' },
        ]);
      }
      // Who may create it is decided first (as kube-apiserver authorizes before it validates).
      const scoped = takeNamespace(req.body);
      if (scoped.problems.length > 0) throw invalidRequest('backup request', scoped.problems);
      const { namespace, rest: body } = scoped;
      await access.require(req, runAttributes('backups', 'create', namespace));
      const overLimits = specLimitProblems('backup', body, deps.specLimits);
      if (overLimits.length > 0) throw invalidRequest('backup request', overLimits);
      const validation = validateBackupRequest(body);
      const outlivesGrace =
        validation.ok && deps.pruneGraceMs !== undefined
          ? fsBackupTimeoutProblem(validation.value.fsBackupTimeoutMs, deps.pruneGraceMs)
          : undefined;
      if (outlivesGrace) {
        throw invalidRequest('backup request', [outlivesGrace]);
      }
      if (!validation.ok) {
        throw invalidRequest('backup request', validation.problems);
      }
      // A namespaced backup acts on its namespace only: anything wider is refused, the rest narrowed to it.
      const outside = namespace ? namespacedBackupProblems(validation.value, namespace) : [];
      if (outside.length > 0) throw invalidRequest('backup request', outside);
      const spec = namespace ? confineBackupSpec(validation.value, namespace) : validation.value;
      await access.requireSpecHookExec(req, spec);
      const name = runKey(namespace, validation.name ?? generateBackupName('backup', randomSuffix()));
      if (req.query.dryRun === 'true') {
        const plan = await runDryRun(deps, { name, spec });
        // The plan is core's DryRunPlan, built by our code; checking it against its schema on the
        // way out took hundreds of ms of the event loop for a large cluster's plan (issue #45).
        return reply.code(200).serializer(JSON.stringify).send(plan);
      }
      const requestId = String(req.id);
      const result = await deps.control.submit({
        name,
        spec,
        requestId,
        ...validation.metadata,
        ...(namespace ? { namespace } : {}),
        ...(req.requester ? { requester: req.requester } : {}),
      });
      if (!result.created) {
        // The same request retried (same client-supplied X-Request-ID) gets the backup it created.
        const retried = req.headers['x-request-id'] === requestId && result.backup.requestId === requestId;
        if (!retried) throw new ApiError(ApiErrorCode.conflict, `a backup named "${name}" already exists`);
        return reply
          .code(200)
          .header('location', `/v1/backups/${name}`)
          .send(await reads.view(result.backup));
      }
      req.log.info({ backup: name }, 'backup submitted');
      return reply
        .code(201)
        .header('location', `/v1/backups/${name}`)
        .send(await reads.view(result.backup));
    },
  );

  app.get(
    '/v1/backups',
    {
      schema: {
        tags: ['backups'],
        summary: 'List backups, newest first',
        description:
          'Only the backups the caller may list: a namespaced one where it may `list backups` in that namespace, a cluster-wide one where it may `list clusterbackups`. A page may so hold fewer than `limit` items; follow `nextCursor`.',
        querystring: listBackupsQuery,
        response: { 200: backupListSchema, 400: errorResponseSchema, 401: errorResponseSchema },
      },
    },
    async (req) => {
      const { phase, limit, cursor } = req.query;
      const page = await state.listBackups({ limit, ...(cursor ? { cursor } : {}), ...(phase ? { phase } : {}) });
      const items = await visibleOnly(page.items, (rec) => rec.namespace, access.visibility(req, 'backups'));
      return { items: items.map(toBackupSummary), ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
    },
  );

  app.get(
    '/v1/backups/:name',
    {
      schema: {
        tags: ['backups'],
        summary: 'A backup: spec, phase, progress, hook status, PVB counts, errors, warnings, timestamps',
        params: backupParams,
        response: { 200: backupSchema, ...standardErrors },
      },
    },
    async (req) => reads.view(await mustGet(req, req.params.name)),
  );

  app.get(
    '/v1/backups/:name/blocks',
    {
      schema: {
        tags: ['backups'],
        summary: "The backup's ItemBlocks in plan order: pods, items, state, PVBs and hook runs",
        params: backupParams,
        querystring: blocksQuery,
        response: { 200: blockListSchema, ...standardErrors },
      },
    },
    async (req) => {
      const rec = await mustGet(req, req.params.name);
      const offset = req.query.cursor ? Number(req.query.cursor) : 0;
      return reads.blockPage(rec, offset, req.query.limit);
    },
  );

  app.get(
    '/v1/backups/:name/logs',
    {
      schema: {
        tags: ['backups'],
        summary: "The backup's log lines as NDJSON (one JSON object per line)",
        params: backupParams,
        response: {
          200: { description: 'One JSON log line per line', content: { 'application/x-ndjson': { schema: z.string() } } },
          ...standardErrors,
        },
      },
    },
    async (req, reply) => {
      const name = req.params.name;
      const rec = await mustGet(req, name);
      async function* lines() {
        for await (const rows of reads.logs(rec)) {
          if (rows.length > 0) yield `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`;
        }
      }
      // A stream is piped as-is (no serializer); the schema above documents its text.
      return reply.type('application/x-ndjson; charset=utf-8').send(Readable.from(lines()) as unknown as string);
    },
  );

  /** A finished backup's file in storage, or 404/409 saying why there is none. */
  const finishedFile = async (req: FastifyRequest, name: string, what: string): Promise<string> => {
    const rec = await mustGet(req, name);
    if (!TERMINAL_BACKUP_PHASES.has(rec.phase))
      throw new ApiError(ApiErrorCode.conflict, `backup "${name}" is ${rec.phase}; its ${what} exists once it has ended`);
    return rec.name;
  };

  app.get(
    '/v1/backups/:name/download',
    {
      schema: {
        tags: ['backups'],
        summary: "The backup's resources tarball (Velero's `<name>.tar.gz`), streamed",
        description:
          'The gzip tar of every backed-up item as JSON (`resources/<group-resource>/namespaces/<ns>/<name>.json`), as Velero lays it out. Volume data stays in the repository. 409 while the backup runs; 404 when it has no tarball (it failed before writing one).',
        params: backupParams,
        response: {
          200: { description: 'gzip tar', content: { 'application/gzip': { schema: z.string() } } },
          ...standardErrors,
          409: errorResponseSchema,
        },
      },
    },
    async (req, reply) => {
      const name = await finishedFile(req, req.params.name, 'tarball');
      const stream = await deps.storage.getStream(backupLayout(name).tarball);
      if (!stream) throw new ApiError(ApiErrorCode.notFound, `backup "${name}" has no resources tarball (it ended before writing one)`);
      return reply
        .type('application/gzip')
        .header('content-disposition', `attachment; filename="${name}-data.tar.gz"`)
        .send(Readable.from(stream) as unknown as string);
    },
  );

  app.get(
    '/v1/backups/:name/resources',
    {
      schema: {
        tags: ['backups'],
        summary: "The resources a finished backup holds, by kind (Velero's resource list)",
        description: '`<apiVersion>/<Kind>` → the sorted `namespace/name` (or `name`) of each item. 409 while the backup runs.',
        params: backupParams,
        response: {
          200: z.object({ resources: z.record(z.string(), z.array(z.string())) }),
          ...standardErrors,
          409: errorResponseSchema,
        },
      },
    },
    async (req) => {
      const name = await finishedFile(req, req.params.name, 'resource list');
      const list = (await readGzipJson(deps.storage, backupLayout(name).resourceList)) as Record<string, string[]> | undefined;
      return { resources: list ?? {} };
    },
  );

  app.post(
    '/v1/backups/:name/cancel',
    {
      schema: {
        tags: ['backups'],
        summary: 'Cancel a running backup',
        description:
          'No new block starts, outstanding PVBs are asked to cancel, post hooks of started blocks still run; the phase ends Canceled. 409 when the backup has already ended.',
        params: backupParams,
        response: { 202: acceptedSchema, ...standardErrors, 409: errorResponseSchema },
      },
    },
    async (req, reply) => {
      const name = req.params.name;
      await mayChange(req, name, 'update');
      const result = await deps.control.cancel(name);
      switch (result.outcome) {
        case 'not-found':
          throw new ApiError(ApiErrorCode.notFound, `backup "${name}" does not exist`);
        case 'already-ended':
          throw new ApiError(ApiErrorCode.conflict, `backup "${name}" has already ended (phase ${result.phase}); nothing to cancel`);
        case 'requested':
        case 'already-requested':
          req.log.info({ backup: name, outcome: result.outcome }, 'backup cancel requested');
          return reply.code(202).send({ name, phase: result.phase, cancelRequested: true as const });
        default:
          return assertNever(result);
      }
    },
  );

  app.delete(
    '/v1/backups/:name',
    {
      schema: {
        tags: ['backups'],
        summary: 'Delete a backup: its data in backup storage, its PodVolumeBackups and its record',
        description:
          'Runs as a durable job (a crash half-way is finished by another api process). An ended backup answers 200 once it is gone; a running one is canceled first and answers 202 (deleting) — it disappears once it has stopped. Deleting twice is harmless.',
        params: backupParams,
        response: { 200: deletedSchema, 202: deletingSchema, ...standardErrors },
      },
    },
    async (req, reply) => {
      await mayChange(req, req.params.name, 'delete');
      const result = await deps.control.delete(req.params.name);
      switch (result.outcome) {
        case 'not-found':
          throw new ApiError(ApiErrorCode.notFound, `backup "${req.params.name}" does not exist`);
        case 'deleted':
          req.log.info({ backup: req.params.name }, 'backup deleted');
          return reply.code(200).send({ name: req.params.name, deleted: true as const });
        case 'deleting':
          req.log.info({ backup: req.params.name, phase: result.phase }, 'backup deletion under way');
          return reply.code(202).send({ name: req.params.name, phase: result.phase, deleting: true as const });
        default:
          return assertNever(result);
      }
    },
  );
};
