import { SCHEDULE_NAME_LABEL } from '@stowage/core';

/**
 * What the pipeline tells a process's metrics, where each event happens and once: after the
 * compare-and-set or once-count that decided it, so the process that moved a backup to Completed
 * counts that success and no other process (nor a restart) counts it again. Each process exports
 * its own counters from 0 at start; Prometheus sums them across replicas (`sum(rate(...))`).
 * The port keeps prom-client out of the pipeline; services implement it (services/api metrics).
 */
export interface PipelineMetrics {
  /** A backup moved New → InProgress (an attempt), or straight to FailedValidation. */
  backupStarted(e: { schedule: string }): void;
  /** A backup reached its terminal phase (Completed, PartiallyFailed, Failed, FailedValidation, Canceled). */
  backupEnded(e: { schedule: string; phase: string; durationMs?: number | undefined; items?: number | undefined }): void;
  /** A delete-backup job deleting an ended backup: attempt, then success or failure. */
  backupDeletion(e: { schedule: string; outcome: 'attempt' | 'success' | 'failure' }): void;
  restoreStarted(): void;
  restoreEnded(e: { phase: string; durationMs?: number | undefined }): void;
  /** A PodVolumeBackup's first terminal phase as the pipeline counted it (Completed, Failed, Canceled, TimedOut). */
  podVolumeBackupEnded(e: { phase: string }): void;
  /** A PodVolumeRestore's first terminal phase as the pipeline counted it. */
  podVolumeRestoreEnded(e: { phase: string }): void;
}

export const NO_PIPELINE_METRICS: PipelineMetrics = Object.freeze({
  backupStarted: () => {},
  backupEnded: () => {},
  backupDeletion: () => {},
  restoreStarted: () => {},
  restoreEnded: () => {},
  podVolumeBackupEnded: () => {},
  podVolumeRestoreEnded: () => {},
});

/** The `schedule` label of a backup's metrics: the schedule that started it, '' for others (as Velero's). */
export function scheduleOf(record: { labels?: Record<string, string> | undefined } | undefined): string {
  return record?.labels?.[SCHEDULE_NAME_LABEL] ?? '';
}
