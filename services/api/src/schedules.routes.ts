import { validateSchedulePatch, validateScheduleRequest } from '@stowage/core';
import type { ScheduleControl, ScheduleRecord, ScheduleStore } from '@stowage/pipeline';
import type { FastifySchemaCompiler } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { validatorCompiler as zodValidatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { backupNameParam, deletedSchema, errorResponseSchema, problemSchema, standardErrors } from './api.schema.js';
import { describeProblems } from './app.js';
import { ApiError, ApiErrorCode } from './errors.js';

export interface ScheduleRoutesDeps {
  schedules: { control: ScheduleControl; store: ScheduleStore };
}

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

export const schedulesRoutes: FastifyPluginAsyncZod<ScheduleRoutesDeps> = async (app, deps) => {
  const { control, store } = deps.schedules;

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

  const mustGet = async (name: string) => {
    const record = await store.get(name);
    if (!record) throw new ApiError(ApiErrorCode.notFound, `schedule "${name}" does not exist`);
    return record;
  };

  const invalid = (problems: Array<{ path: string; message: string }>) =>
    new ApiError(ApiErrorCode.validation, `invalid schedule: ${describeProblems(problems)}`, problems);

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
      const validation = validateScheduleRequest(req.body);
      if (!validation.ok) throw invalid(validation.problems);
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
    async () => ({ items: await Promise.all((await store.list()).map(view)) }),
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
    async (req) => view(await mustGet(req.params.name)),
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
      const current = await mustGet(req.params.name);
      const validation = validateSchedulePatch(current, req.body);
      if (!validation.ok) throw invalid(validation.problems);
      const spec = { ...current.spec, ...(req.body as { spec: Record<string, unknown> }).spec };
      const updated = await control.update(current, spec, validation.value);
      req.log.info({ schedule: current.name, paused: validation.value.paused }, 'schedule changed');
      return view(updated);
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
      await mustGet(req.params.name);
      await control.remove(req.params.name);
      req.log.info({ schedule: req.params.name }, 'schedule deleted');
      return { name: req.params.name, deleted: true as const };
    },
  );
};
