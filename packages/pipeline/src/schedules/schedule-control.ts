import {
  ENDED_BACKUP_PHASES,
  type ScheduleSpec,
  scheduledBackupName,
  type ValidationProblem,
  validateScheduleRequest,
} from '@stowage/core';
import { DEFAULT_JOB_OPTIONS, JobName, QueueName } from '@stowage/queue';
import type { Queue } from 'bullmq';
import type { BackupState } from '../state/backup-state.js';
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
 */
export class ScheduleControl {
  private readonly now: () => number;

  constructor(private readonly deps: { store: ScheduleStore; backupsQueue: Queue; state: BackupState; now?: () => number }) {
    this.now = deps.now ?? Date.now;
  }

  async create(name: string, spec: Record<string, unknown>, validated: ScheduleSpec): Promise<CreateScheduleResult> {
    const at = this.now();
    const record: ScheduleRecord = { name, spec, createdAt: at, updatedAt: at, skipped: 0 };
    if (!(await this.deps.store.create(record))) return { created: false };
    await this.apply(name, validated, { runNow: !validated.paused && !validated.skipImmediately });
    return { created: true, record };
  }

  /** Replaces the spec (already merged and validated by the caller); unpausing runs at once unless skipImmediately. */
  async update(current: ScheduleRecord, spec: Record<string, unknown>, validated: ScheduleSpec): Promise<ScheduleRecord> {
    const wasPaused = current.spec.paused === true;
    await this.deps.store.updateSpec(current.name, spec, this.now());
    await this.apply(current.name, validated, { runNow: wasPaused && !validated.paused && !validated.skipImmediately });
    return { ...current, spec, updatedAt: this.now() };
  }

  /** Stops the ticks, then forgets the schedule; its backups stay (as in Velero). */
  async remove(name: string): Promise<boolean> {
    await this.deps.backupsQueue.removeJobScheduler(jobSchedulerId(name));
    return this.deps.store.delete(name);
  }

  /** Brings every stored schedule's job scheduler in line with its spec (safe from any replica, any time). */
  async reconcile(): Promise<void> {
    for (const record of await this.deps.store.list()) {
      const validated = validateScheduleRequest({ name: record.name, spec: record.spec });
      if (validated.ok) await this.apply(record.name, validated.value, { runNow: false });
      else await this.deps.backupsQueue.removeJobScheduler(jobSchedulerId(record.name));
    }
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

  private async apply(name: string, spec: ScheduleSpec, opts: { runNow: boolean }): Promise<void> {
    const queue = this.deps.backupsQueue;
    if (spec.paused) {
      await queue.removeJobScheduler(jobSchedulerId(name));
      return;
    }
    const repeat =
      spec.timing.kind === 'cron' ? { pattern: spec.timing.pattern, tz: spec.timing.timeZone } : { every: spec.timing.everyMs };
    const { removeOnComplete, removeOnFail, attempts, backoff } = DEFAULT_JOB_OPTIONS[QueueName.backups];
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

/** True while a backup is still running (its next scheduled backup must wait). */
export function isRunning(phase: string | undefined): boolean {
  return phase !== undefined && !(ENDED_BACKUP_PHASES as readonly string[]).includes(phase);
}
