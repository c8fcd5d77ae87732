import { isDeepStrictEqual } from 'node:util';
import {
  ENDED_BACKUP_PHASES,
  nextScheduleTick,
  type Requester,
  type ScheduleSpec,
  scheduledBackupName,
  type ValidationProblem,
  validateScheduleRequest,
} from '@stowage/core';
import { DEFAULT_JOB_OPTIONS, JobName, QueueName } from '@stowage/queue';
import type { Queue } from 'bullmq';
import type { BackupState } from '../state/backup-state.js';
import type { ArchivedSchedule, ScheduleArchive } from './schedule-archive.js';
import type { ScheduleRecord, ScheduleSkip, ScheduleStore } from './schedule-store.js';

/** What a schedule shows besides its spec (Velero's `Schedule.status`, plus why ticks were skipped). */
export interface ScheduleStatus {
  /** `FailedValidation` when the stored spec no longer validates (it then starts no backup). */
  phase: 'Enabled' | 'FailedValidation';
  validationErrors: ValidationProblem[];
  lastBackup: { name: string; startedAt: number } | undefined;
  lastSuccessfulBackup: { name: string; completedAt: number | undefined } | undefined;
  /** When the next tick fires; undefined while paused. */
  nextRunAt: number | undefined;
  /** Time between two ticks (the next two after now); undefined when the spec does not validate. */
  intervalMs: number | undefined;
  paused: boolean;
  lastSkip: ScheduleSkip | undefined;
  skipped: number;
}

export type CreateScheduleResult = { created: true; record: ScheduleRecord } | { created: false };

/** The BullMQ job scheduler of a schedule: one per schedule, on the backups queue. */
export function jobSchedulerId(schedule: string): string {
  return `schedule-${schedule}`;
}

/** How far back "last successful backup" looks among a schedule's newest backups. */
const SUCCESS_LOOKBACK = 50;

/**
 * Schedules on BullMQ Job Schedulers: each schedule is one job scheduler on the `backups` queue,
 * so one `run-schedule` job is produced per tick however many api replicas run, and the backup's
 * name comes from the tick, so a repeated tick adds nothing. Upserting is idempotent, so every
 * replica may reconcile at start.
 *
 * Every change is written to backup storage too (schedule-archive.ts), before it is acknowledged:
 * a schedule the API accepted survives the loss of Redis (backup sync brings it back, paused).
 */
export class ScheduleControl {
  private readonly now: () => number;

  constructor(
    private readonly deps: { store: ScheduleStore; archive: ScheduleArchive; backupsQueue: Queue; state: BackupState; now?: () => number },
  ) {
    this.now = deps.now ?? Date.now;
  }

  /** `scope`: a namespaced schedule's namespace (its ticks back up that namespace only) and whose rights its hooks need. */
  async create(
    name: string,
    spec: Record<string, unknown>,
    validated: ScheduleSpec,
    scope: { namespace?: string | undefined; requester?: Requester | undefined } = {},
  ): Promise<CreateScheduleResult> {
    const at = this.now();
    const record: ScheduleRecord = {
      name,
      spec,
      createdAt: at,
      updatedAt: at,
      skipped: 0,
      ...(scope.namespace ? { namespace: scope.namespace } : {}),
      ...(scope.requester ? { requester: scope.requester } : {}),
    };
    // Redis decides who gets the name; a schedule storage could not keep is taken back.
    if (!(await this.deps.store.create(record))) return { created: false };
    try {
      await this.deps.archive.write(record);
    } catch (err) {
      await this.deps.store.delete(name);
      throw err;
    }
    await this.apply(name, validated, { runNow: !validated.paused && !validated.skipImmediately });
    return { created: true, record };
  }

  /** Replaces the spec (already merged and validated by the caller); unpausing runs at once unless skipImmediately. */
  async update(current: ScheduleRecord, spec: Record<string, unknown>, validated: ScheduleSpec): Promise<ScheduleRecord> {
    const wasPaused = current.spec.paused === true;
    const at = this.now();
    // Storage first: a change it could not keep is not made.
    await this.deps.archive.write({
      name: current.name,
      spec,
      createdAt: current.createdAt,
      updatedAt: at,
      namespace: current.namespace,
      requester: current.requester,
    });
    await this.deps.store.updateSpec(current.name, spec, at);
    await this.apply(current.name, validated, { runNow: wasPaused && !validated.paused && !validated.skipImmediately });
    return { ...current, spec, updatedAt: at };
  }

  /** Stops the ticks, then forgets the schedule (storage first, so it never comes back); its backups stay (as in Velero). */
  async remove(name: string): Promise<boolean> {
    await this.deps.backupsQueue.removeJobScheduler(jobSchedulerId(name));
    await this.deps.archive.remove(name);
    return this.deps.store.delete(name);
  }

  /**
   * Brings every stored schedule's job scheduler in line with its spec, and writes to storage the
   * schedules it lacks (made before schedules were kept there). Safe from any replica, any time.
   */
  async reconcile(): Promise<void> {
    for (const record of await this.deps.store.list()) {
      const validated = validateScheduleRequest({ name: record.name, spec: record.spec });
      if (validated.ok) await this.apply(record.name, validated.value, { runNow: false, keepIfSame: true });
      else await this.deps.backupsQueue.removeJobScheduler(jobSchedulerId(record.name));
      if (!(await this.deps.archive.exists(record.name))) {
        await this.deps.archive.write(record);
        // Deleted meanwhile (storage, then Redis): the copy just written must not outlive it.
        if (!(await this.deps.store.get(record.name))) await this.deps.archive.remove(record.name);
      }
    }
  }

  /**
   * A schedule found in storage that Redis does not know (backup sync after Redis was lost):
   * recorded paused whatever it was, so a recovered install starts no backup until someone
   * unpauses it. False when Redis knows the name already (another replica was first).
   */
  async restorePaused(archived: ArchivedSchedule): Promise<boolean> {
    const spec = { ...archived.spec, paused: true };
    const record: ScheduleRecord = {
      name: archived.name,
      spec,
      createdAt: archived.createdAt,
      updatedAt: this.now(),
      skipped: 0,
      ...(archived.namespace ? { namespace: archived.namespace } : {}),
      ...(archived.requester ? { requester: archived.requester } : {}),
    };
    if (!(await this.deps.store.create(record))) return false;
    await this.deps.backupsQueue.removeJobScheduler(jobSchedulerId(archived.name));
    return true;
  }

  async status(record: ScheduleRecord): Promise<ScheduleStatus> {
    const validated = validateScheduleRequest({ name: record.name, spec: record.spec });
    const scheduler =
      validated.ok && !validated.value.paused ? await this.deps.backupsQueue.getJobScheduler(jobSchedulerId(record.name)) : undefined;
    return {
      phase: validated.ok ? 'Enabled' : 'FailedValidation',
      validationErrors: validated.ok ? [] : validated.problems,
      lastBackup: record.lastBackup ? { name: record.lastBackup, startedAt: record.lastBackupAt ?? 0 } : undefined,
      lastSuccessfulBackup: await this.lastSuccessfulBackup(record.name),
      nextRunAt: typeof scheduler?.next === 'number' ? scheduler.next : undefined,
      intervalMs: validated.ok ? tickInterval(validated.value.timing, this.now()) : undefined,
      paused: validated.ok ? validated.value.paused === true : record.spec.paused === true,
      lastSkip: record.lastSkip,
      skipped: record.skipped,
    };
  }

  private async lastSuccessfulBackup(name: string): Promise<ScheduleStatus['lastSuccessfulBackup']> {
    for (const backup of await this.deps.store.backups(name, SUCCESS_LOOKBACK)) {
      const rec = await this.deps.state.getBackup(backup);
      if (rec?.phase === 'Completed') return { name: backup, completedAt: rec.completedAt };
    }
    return undefined;
  }

  /** `keepIfSame` (reconcile): a job scheduler that already ticks as the spec says is left alone. */
  private async apply(name: string, spec: ScheduleSpec, opts: { runNow: boolean; keepIfSame?: boolean }): Promise<void> {
    const queue = this.deps.backupsQueue;
    if (spec.paused) {
      await queue.removeJobScheduler(jobSchedulerId(name));
      return;
    }
    const repeat: { pattern?: string; tz?: string; every?: number } =
      spec.timing.kind === 'cron' ? { pattern: spec.timing.pattern, tz: spec.timing.timeZone } : { every: spec.timing.everyMs };
    const { removeOnComplete, removeOnFail, attempts, backoff } = DEFAULT_JOB_OPTIONS[QueueName.backups];
    if (opts.keepIfSame) {
      // An upsert replaces the scheduler's pending job with one for the first tick after now: at an
      // api start after a pause in service, the overdue tick would go without a trace. Left alone,
      // it runs late and counts the ticks missed meanwhile (run-schedule).
      const current = await queue.getJobScheduler(jobSchedulerId(name));
      const same =
        current !== undefined &&
        current.pattern === repeat.pattern &&
        current.tz === repeat.tz &&
        current.every === repeat.every &&
        isDeepStrictEqual(pick(current.template?.opts), { removeOnComplete, removeOnFail, attempts, backoff });
      // Only while its next tick's job still waits to be picked up: a scheduler whose next job was
      // lost (BullMQ failed to add it) is upserted, which adds one again.
      if (
        same &&
        typeof current.next === 'number' &&
        PENDING.has(await queue.getJobState(`repeat:${jobSchedulerId(name)}:${current.next}`))
      )
        return;
    }
    await queue.upsertJobScheduler(jobSchedulerId(name), repeat, {
      name: JobName.runSchedule,
      data: { schedule: name },
      opts: { removeOnComplete, removeOnFail, attempts, backoff },
    });
    if (opts.runNow) {
      // Velero runs a new (or unpaused) schedule at once unless skipImmediately; the tick is now.
      const tickMs = this.now();
      await queue.add(JobName.runSchedule, { schedule: name, tickMs }, { jobId: `run-${scheduledBackupName(name, tickMs)}` });
    }
  }
}

/** States of a job not picked up yet. */
const PENDING: ReadonlySet<string> = new Set(['delayed', 'waiting', 'prioritized', 'paused']);

/** The job options apply sets on a scheduler's template, as stored (to tell whether they changed). */
function pick(opts: Record<string, unknown> | undefined): Record<string, unknown> {
  const { removeOnComplete, removeOnFail, attempts, backoff } = opts ?? {};
  return { removeOnComplete, removeOnFail, attempts, backoff };
}

/** The time between the next two ticks after `now` (a cron's interval, which may vary: this one's). */
function tickInterval(timing: ScheduleSpec['timing'], now: number): number {
  const next = nextScheduleTick(timing, now);
  return nextScheduleTick(timing, next) - next;
}

/** True while a backup is still running (its next scheduled backup must wait). */
export function isRunning(phase: string | undefined): boolean {
  return phase !== undefined && !(ENDED_BACKUP_PHASES as readonly string[]).includes(phase);
}
