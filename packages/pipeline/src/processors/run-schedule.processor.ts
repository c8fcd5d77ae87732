import {
  confineBackupSpec,
  namespacedBackupProblems,
  nextScheduleTick,
  SCHEDULE_NAME_LABEL,
  type ScheduleTiming,
  scheduledBackupName,
  validateScheduleRequest,
} from '@stowage/core';
import { parseRunScheduleJobData } from '@stowage/queue';
import type { Job } from 'bullmq';
import type { PipelineRuntime } from '../runtime.js';
import { isRunning } from '../schedules/schedule-control.js';
import { type ScheduleRecord, ScheduleStore } from '../schedules/schedule-store.js';
import { submitBackup } from '../submit.js';

export type RunScheduleResult =
  | { outcome: 'started'; backup: string }
  /** The tick's backup exists already: a repeated tick, or this job ran twice. */
  | { outcome: 'exists'; backup: string }
  | { outcome: 'skipped'; backup: string; reason: string }
  | { outcome: 'schedule-gone' }
  | { outcome: 'paused' };

/**
 * run-schedule (backups queue): one tick of a schedule. Starts the backup named after the tick,
 * unless the schedule's previous backup still runs or its spec no longer validates — then the
 * tick is recorded as skipped, with why. Safe to run twice: the backup name is the tick's, and
 * submitting an existing name adds nothing.
 */
export async function processRunSchedule(rt: PipelineRuntime, job: Job): Promise<RunScheduleResult> {
  const { state, logger, clock, connection, queuePrefix } = rt.deps;
  const data = parseRunScheduleJobData(job.data);
  const store = new ScheduleStore(connection, state.prefix);
  const record = await store.get(data.schedule);
  if (!record) return { outcome: 'schedule-gone' };
  const tickMs = data.tickMs ?? job.opts.prevMillis ?? job.timestamp;
  const backup = scheduledBackupName(record.name, tickMs);
  const log = logger.child({ schedule: record.name, backup });

  const skip = async (reason: string): Promise<RunScheduleResult> => {
    await store.recordSkip(record.name, { at: clock.now(), backup, reason });
    log.warn({ reason }, 'scheduled backup skipped');
    return { outcome: 'skipped', backup, reason };
  };

  const validated = validateScheduleRequest({ name: record.name, spec: record.spec });
  if (validated.ok && !validated.value.paused) await recordMissedTicks(rt, job, store, record, validated.value.timing, tickMs);
  if (await state.getBackup(backup)) {
    await store.recordBackup(record.name, backup, tickMs, clock.now());
    return { outcome: 'exists', backup };
  }
  if (!validated.ok) {
    return skip(`the schedule's spec is not valid: ${validated.problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`);
  }
  if (validated.value.paused) return { outcome: 'paused' };
  if (record.lastBackup) {
    const previous = await state.getBackup(record.lastBackup);
    if (isRunning(previous?.phase)) return skip(`the previous backup ${record.lastBackup} of this schedule is still ${previous?.phase}`);
  }
  // A namespaced schedule's backups act on its namespace only, as a Backup resource's do.
  const namespace = record.namespace;
  const outside = namespace ? namespacedBackupProblems(validated.value.template, namespace, 'spec.template') : [];
  if (outside.length > 0)
    return skip(`the schedule's template reaches outside its namespace: ${outside.map((p) => `${p.path}: ${p.message}`).join('; ')}`);
  const submitted = await submitBackup(
    { state, flowProducer: rt.flowProducer, queuePrefix, now: clock.now },
    {
      name: backup,
      spec: namespace ? confineBackupSpec(validated.value.template, namespace) : validated.value.template,
      requestId: `schedule-${record.name}`,
      labels: { [SCHEDULE_NAME_LABEL]: record.name },
      ...(namespace ? { namespace } : {}),
      ...(record.requester ? { requester: record.requester } : {}),
    },
  );
  await store.recordBackup(record.name, backup, tickMs, clock.now());
  // Another run of this tick made it between the check above and here: it started the backup, not this one.
  if (!submitted.created) return { outcome: 'exists', backup };
  log.info({ tickMs }, 'scheduled backup started');
  return { outcome: 'started', backup };
}

/** Missed ticks looked at one by one at most; more are reported as "at least". */
export const MISSED_TICKS_COUNTED = 1_000;

/**
 * BullMQ's job scheduler adds the next tick's job when a worker picks this one up, as the first
 * tick after *then*: a job picked up late (the queue busy, no api process running) drops every
 * tick in between, with no job to record it. They are counted here, once per tick (its re-runs
 * and retries count nothing again), as skipped and why: a missed tick is never silent, and this
 * late tick's own run goes on (a backup started late, as Velero runs a missed schedule).
 * A tick was dropped when the scheduler holds no job for it; the first one it holds is the next.
 */
async function recordMissedTicks(
  rt: PipelineRuntime,
  job: Job,
  store: ScheduleStore,
  record: ScheduleRecord,
  timing: ScheduleTiming,
  tickMs: number,
): Promise<void> {
  // Only a scheduler's job (not the run of a create or unpause, which has its tick in its data).
  const schedulerId = job.repeatJobKey;
  if (!schedulerId || job.data?.tickMs !== undefined) return;
  const now = rt.deps.clock.now();
  const candidates: number[] = [];
  for (let t = nextScheduleTick(timing, tickMs); t <= now && candidates.length < MISSED_TICKS_COUNTED; t = nextScheduleTick(timing, t)) {
    candidates.push(t);
  }
  if (candidates.length === 0) return;
  const queue = rt.backupsQueue;
  const pipeline = rt.deps.connection.pipeline();
  for (const t of candidates) pipeline.exists(queue.toKey(`repeat:${schedulerId}:${t}`));
  const held = (await pipeline.exec()) ?? [];
  const next = held.findIndex(([err, exists]) => err !== null || exists === 1);
  const missed = next === -1 ? candidates : candidates.slice(0, next);
  if (missed.length === 0) return;
  const iso = (ms: number) => new Date(ms).toISOString();
  const count = next === -1 && candidates.length === MISSED_TICKS_COUNTED ? `at least ${missed.length}` : String(missed.length);
  const last = missed[missed.length - 1]!;
  const reason =
    `missed: the run of the tick at ${iso(tickMs)} was picked up only at ${iso(job.processedOn ?? now)}; ` +
    `${count} tick(s) from ${iso(missed[0]!)} to ${iso(last)} started no backup`;
  const skip = { at: now, backup: scheduledBackupName(record.name, last), reason };
  if (await store.recordMissed(record.name, tickMs, missed.length, skip)) {
    rt.deps.logger.warn({ schedule: record.name, missed: missed.length, reason }, 'scheduled ticks missed');
  }
}
