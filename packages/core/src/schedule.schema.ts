/*
 * Schedules in Velero's `Schedule` shape: `{name, spec: {schedule, template, paused, skipImmediately}}`.
 * `schedule` is a cron expression (5 fields, or 6 with seconds first), a descriptor (`@daily`,
 * `@hourly`, …) or `@every <duration>`, with an optional `CRON_TZ=<zone> ` or `TZ=<zone> ` prefix
 * as Velero accepts. `template` is a backup spec, validated exactly as a backup's own spec.
 * Every problem is reported at once, each with its JSON path.
 */
import { CronExpressionParser } from 'cron-parser';
import { z } from 'zod';
import type { BackupSpec, BackupSpecDefaults } from './backup-spec.js';
import { backupSpecSchema, validateBackupRequest } from './backup-spec.schema.js';
import { parseDuration } from './duration.js';
import { explainDns1123Label } from './names.js';
import type { ValidationProblem } from './spec-validation.js';

/** When a schedule fires: a cron pattern in a time zone, or a fixed interval. */
export type ScheduleTiming = { kind: 'cron'; pattern: string; timeZone: string } | { kind: 'every'; everyMs: number };

export interface ScheduleSpec {
  /** As submitted (shown back to the user). */
  schedule: string;
  timing: ScheduleTiming;
  template: BackupSpec;
  paused: boolean;
  skipImmediately: boolean;
}

export type ScheduleRequestValidation = { ok: true; name: string; value: ScheduleSpec } | { ok: false; problems: ValidationProblem[] };

/** `-yyyyMMddHHmmss` is appended to a schedule's name to name its backups (a label of ≤ 63 chars). */
export const SCHEDULE_NAME_MAX_LENGTH = 63 - 15;
/** Below this, a schedule would start backups faster than any backup can run. */
export const MIN_SCHEDULE_INTERVAL_MS = 1_000;

const DESCRIPTORS: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

export type CronParseResult = { ok: true; timing: ScheduleTiming } | { ok: false; message: string };

/**
 * Parses a Velero schedule expression. A time-zone prefix applies to cron patterns; without one
 * the zone is UTC (Velero's server runs in UTC unless told otherwise).
 */
export function parseScheduleExpression(text: string): CronParseResult {
  let rest = text.trim();
  let timeZone = 'UTC';
  const tz = /^(?:CRON_TZ|TZ)=(\S+)\s+/.exec(rest);
  if (tz) {
    timeZone = tz[1] ?? '';
    rest = rest.slice(tz[0].length).trim();
    if (!isTimeZone(timeZone))
      return { ok: false, message: `time zone ${JSON.stringify(timeZone)} is not an IANA zone name, e.g. "Europe/Berlin"` };
  }
  if (rest.length === 0) return { ok: false, message: 'is empty: give a cron expression, e.g. "0 3 * * *" (03:00 every day)' };
  if (rest.startsWith('@every')) {
    if (tz) return { ok: false, message: '@every takes no time zone (it is a fixed interval)' };
    const parsed = parseDuration(rest.slice('@every'.length));
    if (!parsed.ok) return { ok: false, message: `@every needs a duration, e.g. "@every 6h": ${parsed.message}` };
    if (parsed.ms < MIN_SCHEDULE_INTERVAL_MS) return { ok: false, message: `@every must be at least 1s (got ${rest.slice(6).trim()})` };
    return { ok: true, timing: { kind: 'every', everyMs: parsed.ms } };
  }
  const pattern = DESCRIPTORS[rest] ?? rest;
  if (pattern.startsWith('@')) {
    return {
      ok: false,
      message: `unknown descriptor ${JSON.stringify(rest)}; use one of ${Object.keys(DESCRIPTORS).join(', ')} or "@every <duration>"`,
    };
  }
  const fields = pattern.split(/\s+/).length;
  if (fields !== 5 && fields !== 6) {
    return {
      ok: false,
      message: `a cron expression has 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first; got ${fields}`,
    };
  }
  try {
    // From a fixed instant, not the clock: only whether some next tick exists matters here.
    CronExpressionParser.parse(pattern, { tz: timeZone, currentDate: new Date(0) }).next();
  } catch (err) {
    return { ok: false, message: `is not a valid cron expression: ${(err as Error).message}` };
  }
  return { ok: true, timing: { kind: 'cron', pattern, timeZone } };
}

/** The tick after `afterMs` (ms since epoch). */
export function nextScheduleTick(timing: ScheduleTiming, afterMs: number): number {
  if (timing.kind === 'every') return afterMs + timing.everyMs;
  return CronExpressionParser.parse(timing.pattern, { tz: timing.timeZone, currentDate: new Date(afterMs) })
    .next()
    .getTime();
}

/** The label every backup a schedule started carries, naming the schedule (Velero's `velero.io/schedule-name`). */
export const SCHEDULE_NAME_LABEL = 'stowage.dev/schedule-name';

/** `<schedule>-<yyyyMMddHHmmss>` of the tick in UTC, as Velero names scheduled backups: one name per tick. */
export function scheduledBackupName(scheduleName: string, tickMs: number): string {
  const iso = new Date(tickMs).toISOString(); // 2026-12-04T03:00:05.000Z
  return `${scheduleName}-${iso.slice(0, 19).replace(/[-T:]/g, '')}`;
}

function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The schedule spec's shape, for what is generated from it (the CRDs' OpenAPI schemas) and for the
 * fields `validateScheduleRequest` accepts; the validation itself is that function's (cron
 * expressions, every problem with its path).
 */
export const scheduleSpecSchema = z.strictObject({
  schedule: z.string(),
  template: backupSpecSchema,
  paused: z.boolean().optional(),
  skipImmediately: z.boolean().optional(),
});

const SPEC_FIELDS = Object.keys(scheduleSpecSchema.shape);

/**
 * Validates a schedule request `{name, spec: {schedule, template, paused?, skipImmediately?}}`
 * (untrusted JSON). `template` problems carry paths under `spec.template`.
 */
export function validateScheduleRequest(request: unknown, defaults: BackupSpecDefaults = {}): ScheduleRequestValidation {
  const problems: ValidationProblem[] = [];
  if (!isRecord(request)) return { ok: false, problems: [{ path: '', message: 'must be an object: {name, spec: {schedule, template}}' }] };
  for (const key of Object.keys(request)) {
    if (key !== 'name' && key !== 'spec') problems.push({ path: key, message: 'is not a field of a schedule (name, spec)' });
  }
  const name = request.name;
  if (typeof name !== 'string') problems.push({ path: 'name', message: 'is required: a DNS-1123 label, e.g. "nightly"' });
  else {
    for (const message of explainDns1123Label(name)) problems.push({ path: 'name', message });
    if (name.length > SCHEDULE_NAME_MAX_LENGTH) {
      problems.push({
        path: 'name',
        message: `is longer than ${SCHEDULE_NAME_MAX_LENGTH} characters (its backups are named <name>-yyyyMMddHHmmss, at most 63)`,
      });
    }
  }
  const spec = request.spec;
  if (!isRecord(spec)) {
    problems.push({ path: 'spec', message: 'is required: {schedule, template}' });
    return { ok: false, problems };
  }
  for (const key of Object.keys(spec)) {
    if (!SPEC_FIELDS.includes(key))
      problems.push({ path: `spec.${key}`, message: `is not a field of a schedule spec (${SPEC_FIELDS.join(', ')})` });
  }
  let timing: ScheduleTiming | undefined;
  if (typeof spec.schedule !== 'string')
    problems.push({ path: 'spec.schedule', message: 'is required: a cron expression, e.g. "0 3 * * *"' });
  else {
    const parsed = parseScheduleExpression(spec.schedule);
    if (parsed.ok) timing = parsed.timing;
    else problems.push({ path: 'spec.schedule', message: parsed.message });
  }
  for (const flag of ['paused', 'skipImmediately'] as const) {
    if (spec[flag] !== undefined && typeof spec[flag] !== 'boolean')
      problems.push({ path: `spec.${flag}`, message: 'must be true or false' });
  }
  const template = validateBackupRequest({ spec: spec.template ?? {} }, defaults);
  if (!template.ok) {
    for (const p of template.problems) problems.push({ path: p.path.replace(/^spec/, 'spec.template'), message: p.message });
  }
  if (problems.length > 0 || !template.ok || !timing || typeof name !== 'string') return { ok: false, problems };
  return {
    ok: true,
    name,
    value: {
      schedule: spec.schedule as string,
      timing,
      template: template.value,
      paused: spec.paused === true,
      skipImmediately: spec.skipImmediately === true,
    },
  };
}

/** What `PATCH /v1/schedules/:name` may change, validated against the stored schedule. */
export function validateSchedulePatch(
  current: { name: string; spec: Record<string, unknown> },
  patch: unknown,
  defaults: BackupSpecDefaults = {},
) {
  if (!isRecord(patch) || !isRecord(patch.spec) || Object.keys(patch).some((k) => k !== 'spec')) {
    return {
      ok: false as const,
      problems: [{ path: '', message: 'must be {spec: {...}} with the fields to change (schedule, template, paused, skipImmediately)' }],
    };
  }
  return validateScheduleRequest({ name: current.name, spec: { ...current.spec, ...patch.spec } }, defaults);
}
