import {
  confineBackupSpec,
  namespacedBackupProblems,
  SCHEDULE_NAME_LABEL,
  scheduledBackupName,
  validateScheduleRequest,
} from '@stowage/core';
import { parseRunScheduleJobData } from '@stowage/queue';
import type { Job } from 'bullmq';
import type { PipelineRuntime } from '../runtime.js';
import { isRunning } from '../schedules/schedule-control.js';
import { ScheduleStore } from '../schedules/schedule-store.js';
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

  if (await state.getBackup(backup)) {
    await store.recordBackup(record.name, backup, tickMs, clock.now());
    return { outcome: 'exists', backup };
  }
  const validated = validateScheduleRequest({ name: record.name, spec: record.spec });
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
