import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

/*
 * One Prometheus registry per process, and the counters of what the pipeline does in it. Every
 * counter starts at 0 with the process and moves only where the event happens — the process whose
 * compare-and-set ended a backup counts that backup, once — so nothing is replayed from state at a
 * restart or counted by every replica; `sum(rate(...))` over the replicas is the cluster's rate.
 * The names follow Velero's metrics by meaning, under `stowage_` (docs/metrics.md has the table).
 */

/** Duration buckets (seconds): a few seconds up to Velero's 4 h. */
const RUN_BUCKETS = [5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400];

/** The pipeline's events (structurally @stowage/pipeline's PipelineMetrics). */
export interface PipelineEventMetrics {
  backupStarted(e: { schedule: string }): void;
  backupEnded(e: { schedule: string; phase: string; durationMs?: number | undefined; items?: number | undefined }): void;
  backupDeletion(e: { schedule: string; outcome: 'attempt' | 'success' | 'failure' }): void;
  restoreStarted(): void;
  restoreEnded(e: { phase: string; durationMs?: number | undefined }): void;
  podVolumeBackupEnded(e: { phase: string }): void;
  podVolumeRestoreEnded(e: { phase: string }): void;
}

export interface ProcessMetrics {
  registry: Registry;
  pipeline: PipelineEventMetrics;
}

/** Phase → the counter of that outcome (Velero's success / partial_failure / failure / validation_failure, plus canceled). */
const OUTCOME_OF_PHASE: Record<string, string> = {
  Completed: 'success',
  PartiallyFailed: 'partial_failure',
  Failed: 'failure',
  FailedValidation: 'validation_failure',
  Canceled: 'canceled',
};

/** The registry of a process (`service`: api, worker) with Node's default metrics under `stowage_<service>_`. */
export function createProcessMetrics(service: string, opts: { storageCost?: StorageCostSource } = {}): ProcessMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: `stowage_${service}_` });
  const counter = (name: string, help: string, labelNames: string[] = []) => new Counter({ name, help, labelNames, registers: [registry] });

  const backupAttempts = counter('stowage_backup_attempt_total', 'Backups started (moved out of New)', ['schedule']);
  const backupOutcomes = new Map(
    Object.values(OUTCOME_OF_PHASE).map((outcome) => [
      outcome,
      counter(`stowage_backup_${outcome}_total`, `Backups that ended ${outcome.replace('_', ' ')}`, ['schedule']),
    ]),
  );
  const backupDuration = new Histogram({
    name: 'stowage_backup_duration_seconds',
    help: 'Time from a backup starting to its end, by schedule',
    labelNames: ['schedule'],
    buckets: RUN_BUCKETS,
    registers: [registry],
  });
  const backupItems = counter('stowage_backup_items_total', 'Items backed up by backups that ended', ['schedule']);
  const deletions = new Map(
    (['attempt', 'success', 'failure'] as const).map((o) => [
      o,
      counter(`stowage_backup_deletion_${o}_total`, `Backup deletions: ${o}`, ['schedule']),
    ]),
  );
  const restoreAttempts = counter('stowage_restore_attempt_total', 'Restores started (moved out of New)');
  const restoreOutcomes = new Map(
    Object.values(OUTCOME_OF_PHASE).map((outcome) => [
      outcome,
      counter(`stowage_restore_${outcome}_total`, `Restores that ended ${outcome.replace('_', ' ')}`),
    ]),
  );
  const restoreDuration = new Histogram({
    name: 'stowage_restore_duration_seconds',
    help: 'Time from a restore starting to its end',
    buckets: RUN_BUCKETS,
    registers: [registry],
  });
  const pvbs = counter('stowage_pod_volume_backup_total', 'PodVolumeBackups that ended, by phase (Completed, Failed, Canceled, TimedOut)', [
    'phase',
  ]);
  const pvrs = counter('stowage_pod_volume_restore_total', 'PodVolumeRestores that ended, by phase', ['phase']);
  if (opts.storageCost) registerStorageMetrics(registry, opts.storageCost);

  return {
    registry,
    pipeline: {
      backupStarted: ({ schedule }) => backupAttempts.inc({ schedule }),
      backupEnded: ({ schedule, phase, durationMs, items }) => {
        backupOutcomes.get(OUTCOME_OF_PHASE[phase] ?? 'failure')?.inc({ schedule });
        if (durationMs !== undefined && durationMs >= 0) backupDuration.observe({ schedule }, durationMs / 1000);
        if (items !== undefined && items > 0) backupItems.inc({ schedule }, items);
      },
      backupDeletion: ({ schedule, outcome }) => deletions.get(outcome)?.inc({ schedule }),
      restoreStarted: () => restoreAttempts.inc(),
      restoreEnded: ({ phase, durationMs }) => {
        restoreOutcomes.get(OUTCOME_OF_PHASE[phase] ?? 'failure')?.inc();
        if (durationMs !== undefined && durationMs >= 0) restoreDuration.observe(durationMs / 1000);
      },
      podVolumeBackupEnded: ({ phase }) => pvbs.inc({ phase }),
      podVolumeRestoreEnded: ({ phase }) => pvrs.inc({ phase }),
    },
  };
}

/**
 * What the process asked of object storage by kind of work: @stowage/storage's storageCostByWork
 * (passed in, so this package does not depend on storage, whose tests depend on it).
 */
export type StorageCostSource = () => ReadonlyArray<{
  work: string;
  cost: { requests: Readonly<Record<string, number>>; bytesWritten: number; bytesRead: number };
}>;

/**
 * `stowage_storage_requests_total{operation,work}` and `stowage_storage_bytes_total{direction,work}`:
 * what this process asked of object storage (@stowage/storage's request meter), by the kind of work
 * (backup, restore, prune, other). Read from the meter at scrape time; they only grow.
 */
export function registerStorageMetrics(registry: Registry, storageCost: StorageCostSource): void {
  new Counter({
    name: 'stowage_storage_requests_total',
    help: 'Object storage requests this process made, by operation (put, get, head, list, delete) and work (backup, restore, prune, other)',
    labelNames: ['operation', 'work'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { work, cost } of storageCost()) {
        for (const [operation, n] of Object.entries(cost.requests)) this.inc({ operation, work }, n);
      }
    },
  });
  new Counter({
    name: 'stowage_storage_bytes_total',
    help: 'Object bytes this process sent to (written) and read out of (read) object storage, by work',
    labelNames: ['direction', 'work'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { work, cost } of storageCost()) {
        this.inc({ direction: 'written', work }, cost.bytesWritten);
        this.inc({ direction: 'read', work }, cost.bytesRead);
      }
    },
  });
}
