import {
  SCHEDULE_NAME_LABEL,
  type ScheduleSpec,
  scheduledBackupName,
  specLimitProblems,
  validateSchedulePatch,
  validateScheduleRequest,
} from '@stowage/core';
import type { ScheduleRecord } from '@stowage/pipeline';
import type { FastifyRequest, FastifySchemaCompiler } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { validatorCompiler as zodValidatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { type Access, runAttributes } from './access.js';
import { backupNameParam, backupSummarySchema, deletedSchema, errorResponseSchema, problemSchema, standardErrors } from './api.schema.js';
import type { ScheduleRoutesDeps } from './api-deps.js';
import { toBackupSummary } from './backup-view.js';
import { ApiError, ApiErrorCode, invalidRequest } from './errors.js';
import { admitSchedule, validateScheduleBody } from './schedule-requests.js';

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

export const scheduleSchema = z
  .object({
    name: z.string(),
    spec: z
      .record(z.string(), z.unknown())
      .describe('As submitted: schedule (cron, optional CRON_TZ=/TZ= prefix), template (a backup spec), paused, skipImmediately'),
    status: z.object({
      phase: z.enum(['Enabled', 'FailedValidation']),
      validationErrors: z.array(problemSchema),
      lastBackup: z.object({ name: z.string(), startedAt: z.string() }).optional(),
      lastSuccessfulBackup: z.object({ name: z.string(), completedAt: z.string().optional() }).optional(),
      nextRunAt: z.string().optional().describe('When the next tick fires (absent while paused)'),
      lastSkipped: z
        .object({ at: z.string(), backup: z.string(), reason: z.string() })
        .optional()
        .describe('The newest tick that started no backup, and why'),
      skipped: z.number().int().describe('Ticks that started no backup'),
    }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .describe("A schedule, in Velero's Schedule shape");

const scheduleListSchema = z.object({ items: z.array(scheduleSchema) });
const scheduleParams = z.object({ name: backupNameParam });
const createScheduleBodySchema = z
  .object({ name: z.string(), spec: z.record(z.string(), z.unknown()) })
  .describe('{name, spec: {schedule, template, paused?, skipImmediately?}}');
const patchScheduleBodySchema = z.object({ spec: z.record(z.string(), z.unknown()) }).describe('{spec: {...the fields to change}}');

/** Bodies are validated by core (every problem with its path); the route schema only documents them. */
const passBodyThrough: FastifySchemaCompiler<unknown> = (route) =>
  route.httpPart === 'body'
    ? (data: unknown) => ({ value: data })
    : zodValidatorCompiler(route as Parameters<typeof zodValidatorCompiler>[0]);

/**
 * Schedules through REST are cluster-wide (`clusterschedules`): each route asks for its verb on
 * them; a run now also needs `create clusterbackups`.
 */
export const schedulesRoutes: FastifyPluginAsyncZod<ScheduleRoutesDeps & { access: Access }> = async (app, deps) => {
  const { control, store } = deps.schedules;
  const may = (req: FastifyRequest, verb: string) => deps.access.require(req, runAttributes('schedules', verb));

  const view = async (record: ScheduleRecord): Promise<z.infer<typeof scheduleSchema>> => {
    const status = await control.status(record);
    return {
      name: record.name,
      spec: record.spec,
      status: {
        phase: status.phase,
        validationErrors: status.validationErrors,
        ...(status.lastBackup
          ? { lastBackup: { name: status.lastBackup.name, startedAt: iso(status.lastBackup.startedAt) as string } }
          : {}),
        ...(status.lastSuccessfulBackup
          ? {
              lastSuccessfulBackup: {
                name: status.lastSuccessfulBackup.name,
                ...(status.lastSuccessfulBackup.completedAt ? { completedAt: iso(status.lastSuccessfulBackup.completedAt) } : {}),
              },
            }
          : {}),
        ...(status.nextRunAt !== undefined ? { nextRunAt: iso(status.nextRunAt) } : {}),
        ...(status.lastSkip ? { lastSkipped: { ...status.lastSkip, at: iso(status.lastSkip.at) as string } } : {}),
        skipped: status.skipped,
      },
      createdAt: iso(record.createdAt) as string,
      updatedAt: iso(record.updatedAt) as string,
    };
  };

  const mustGet = async (req: FastifyRequest, name: string, verb = 'get') => {
    await may(req, verb);
    const record = await store.get(name);
    if (!record) throw new ApiError(ApiErrorCode.notFound, `schedule "${name}" does not exist`);
    return record;
  };

  const invalid = (problems: Array<{ path: string; message: string }>) => invalidRequest('schedule', problems);
  /** The rules past the spec's shape (prune grace, the requester's pods/exec): schedule-requests.ts, as for Schedule resources. */
  const admit = (req: FastifyRequest, spec: ScheduleSpec) => {
    const requester = req.requester;
    return admitSchedule(deps, spec, { requester, decide: (attrs) => deps.access.decide(requester, attrs) });
  };

  app.post(
    '/v1/schedules',
    {
      validatorCompiler: passBodyThrough,
      schema: {
        tags: ['schedules'],
        summary: 'Create a schedule',
        description:
          'Runs a backup from `template` on every tick of `schedule` (BullMQ job scheduler: one backup per tick however many api replicas run), named `<schedule>-<yyyyMMddHHmmss>` after the tick. Unless paused or `skipImmediately`, the first backup starts at once (as in Velero). 400 lists every problem; 409 when the name is taken.',
        body: createScheduleBodySchema,
        response: { 201: scheduleSchema, ...standardErrors, 409: errorResponseSchema },
      },
    },
    async (req, reply) => {
      await may(req, 'create');
      const validation = validateScheduleBody(deps, req.body);
      await admit(req, validation.value);
      const spec = (req.body as { spec: Record<string, unknown> }).spec;
      const result = await control.create(validation.name, spec, validation.value);
      if (!result.created) throw new ApiError(ApiErrorCode.conflict, `a schedule named "${validation.name}" already exists`);
      req.log.info({ schedule: validation.name }, 'schedule created');
      return reply
        .code(201)
        .header('location', `/v1/schedules/${validation.name}`)
        .send(await view(result.record));
    },
  );

  app.get(
    '/v1/schedules',
    { schema: { tags: ['schedules'], summary: 'List schedules', response: { 200: scheduleListSchema, 401: errorResponseSchema } } },
    async (req) => {
      await may(req, 'list');
      return { items: await Promise.all((await store.list()).map(view)) };
    },
  );

  app.get(
    '/v1/schedules/:name',
    {
      schema: {
        tags: ['schedules'],
        summary: 'Get a schedule and its status',
        params: scheduleParams,
        response: { 200: scheduleSchema, ...standardErrors },
      },
    },
    async (req) => view(await mustGet(req, req.params.name)),
  );

  app.patch(
    '/v1/schedules/:name',
    {
      validatorCompiler: passBodyThrough,
      schema: {
        tags: ['schedules'],
        summary: 'Change a schedule (pause, unpause, new cron or template)',
        description:
          'The fields given replace the stored ones; the result is validated as a whole. Unpausing runs a backup at once unless skipImmediately.',
        params: scheduleParams,
        body: patchScheduleBodySchema,
        response: { 200: scheduleSchema, ...standardErrors },
      },
    },
    async (req) => {
      const current = await mustGet(req, req.params.name, 'update');
      const overLimits = specLimitProblems('schedule', req.body, deps.specLimits);
      if (overLimits.length > 0) throw invalid(overLimits);
      const validation = validateSchedulePatch(current, req.body);
      if (!validation.ok) throw invalid(validation.problems);
      await admit(req, validation.value);
      const spec = { ...current.spec, ...(req.body as { spec: Record<string, unknown> }).spec };
      const updated = await control.update(current, spec, validation.value);
      req.log.info({ schedule: current.name, paused: validation.value.paused }, 'schedule changed');
      return view(updated);
    },
  );

  app.post(
    '/v1/schedules/:name/backups',
    {
      schema: {
        tags: ['schedules'],
        summary: "Back up now from a schedule's template (Velero's `backup create --from-schedule`)",
        description:
          "Starts a backup from the schedule's template now, paused or not, named `<schedule>-<yyyyMMddHHmmss>` after this moment and labelled `stowage.dev/schedule-name`; it counts among the schedule's backups. 400 when the schedule's spec no longer validates (as on create: its template's fsBackupTimeout must be shorter than the prune grace); 409 when a backup of that name exists (two runs in one second).",
        params: scheduleParams,
        response: { 201: backupSummarySchema, ...standardErrors, 409: errorResponseSchema },
      },
    },
    async (req, reply) => {
      const record = await mustGet(req, req.params.name);
      await deps.access.require(req, runAttributes('backups', 'create'));
      // The rules a new schedule meets, today's: the spec may predate them, or the prune grace may have shrunk.
      const validated = validateScheduleRequest({ name: record.name, spec: record.spec });
      if (!validated.ok) throw invalid(validated.problems);
      await admit(req, validated.value);
      const at = (deps.now ?? Date.now)();
      const name = scheduledBackupName(record.name, at);
      const result = await deps.backups.submit({
        name,
        spec: validated.value.template,
        requestId: String(req.id),
        labels: { [SCHEDULE_NAME_LABEL]: record.name },
        ...(req.requester ? { requester: req.requester } : {}),
      });
      if (!result.created) throw new ApiError(ApiErrorCode.conflict, `a backup named "${name}" already exists`);
      await store.recordBackup(record.name, name, at, at);
      req.log.info({ schedule: record.name, backup: name }, 'backup started from a schedule');
      return reply.code(201).header('location', `/v1/backups/${name}`).send(toBackupSummary(result.backup));
    },
  );

  app.delete(
    '/v1/schedules/:name',
    {
      schema: {
        tags: ['schedules'],
        summary: 'Delete a schedule (its backups stay)',
        params: scheduleParams,
        response: { 200: deletedSchema, ...standardErrors },
      },
    },
    async (req) => {
      await mustGet(req, req.params.name, 'delete');
      await control.remove(req.params.name);
      req.log.info({ schedule: req.params.name }, 'schedule deleted');
      return { name: req.params.name, deleted: true as const };
    },
  );
};
