import type { PruneStatusStore, RestoreState, ScheduleControl, ScheduleRecord, ScheduleStore } from '@stowage/pipeline';
import { createProcessMetrics } from '@stowage/platform';
import { runIndexKey } from '@stowage/queue';
import type { Queue } from 'bullmq';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { Gauge, type Registry } from 'prom-client';
import { z } from 'zod';
import { TERMINAL_BACKUP_PHASES } from './api.schema.js';
import type { BackupReads } from './backup-view.js';
import { registerPruneMetrics } from './prune-metrics.js';
import { registerRestoreGauge } from './restore-metrics.js';

export interface MetricsOptions {
  /** The API's one read path. */
  reads: BackupReads;
  queues: readonly Queue[];
  /** The process's registry (createProcessMetrics), whose counters the pipeline moves where events happen; a fresh one by default. */
  registry?: Registry | undefined;
  /** When given, `stowage_schedule_*` per schedule. */
  schedules?: { control: ScheduleControl; store: ScheduleStore } | undefined;
  /** With restores wired, `stowage_restores{phase}` too. */
  restores?: RestoreState | undefined;
  /** When given, the `stowage_repository_prune_*` metrics. */
  prune?: PruneStatusStore | undefined;
}

/**
 * The api's `/metrics`. Two kinds, kept apart on purpose:
 * - counters and histograms (`stowage_backup_success_total`, `…_duration_seconds`, …) live in the
 *   process's registry and move where the event happens (pipeline → createProcessMetrics): never
 *   replayed from state, so a restart starts them at 0 and each replica counts only what it did;
 * - gauges of the shared state (`stowage_backups{phase}`, queue depths, per-schedule timestamps and
 *   intervals, prune status) are read at scrape time, the same on every replica (aggregate with max).
 */
export interface ApiMetrics {
  registry: Registry;
  /** Brings the state-derived gauges up to date and renders the text exposition. */
  scrape(): Promise<string>;
}

export function createApiMetrics(opts: MetricsOptions): ApiMetrics {
  const registry = opts.registry ?? createProcessMetrics('api').registry;

  const backupsByPhase = new Gauge({
    name: 'stowage_backups',
    help: 'Backups Stowage holds, by current phase (drops when backups expire or are deleted)',
    labelNames: ['phase'] as const,
    registers: [registry],
  });

  // Phases of backups that have ended never change again (only deletion removes them): they are
  // kept here, so a scrape reads the phase of the backups still running and of new names only,
  // not of every retained backup.
  const endedPhase = new Map<string, string>();

  /** Counts backups by phase. */
  const refreshFromState = async (): Promise<void> => {
    const { state } = opts.reads;
    const redis = state.redis;
    const names = await redis.zrange(runIndexKey(state.prefix, 'backups'), 0, -1);
    const byPhase = new Map<string, number>();
    const present = new Set(names);
    for (const name of endedPhase.keys()) if (!present.has(name)) endedPhase.delete(name);
    const toRead: string[] = [];
    for (const name of names) {
      const phase = endedPhase.get(name);
      if (phase === undefined) toRead.push(name);
      else byPhase.set(phase, (byPhase.get(phase) ?? 0) + 1);
    }
    for (let i = 0; i < toRead.length; i += 500) {
      const slice = toRead.slice(i, i + 500);
      // One command per backup, not one pipeline: on Redis Cluster backups live on different shards.
      const phases = await Promise.all(slice.map((n) => redis.hget(state.key(n, 'rec'), 'phase')));
      for (let j = 0; j < slice.length; j++) {
        const phase = phases[j];
        if (!phase) continue;
        byPhase.set(phase, (byPhase.get(phase) ?? 0) + 1);
        if (TERMINAL_BACKUP_PHASES.has(phase)) endedPhase.set(slice[j] as string, phase);
      }
    }
    backupsByPhase.reset();
    for (const [phase, n] of byPhase) backupsByPhase.set({ phase }, n);
  };

  new Gauge({
    name: 'stowage_queue_jobs',
    help: 'Jobs per Stowage queue and state',
    labelNames: ['queue', 'state'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const q of opts.queues) {
        const counts = await q.getJobCounts('waiting', 'active', 'delayed', 'failed', 'waiting-children');
        for (const [state, n] of Object.entries(counts)) this.set({ queue: q.name, state }, n);
      }
    },
  });

  const schedules = opts.schedules;
  if (schedules) {
    const seconds = (ms: number | undefined) => (ms === undefined ? undefined : ms / 1000);
    const perSchedule = (
      name: string,
      help: string,
      read: (s: Awaited<ReturnType<ScheduleControl['status']>>, record: ScheduleRecord) => number | undefined,
    ) =>
      new Gauge({
        name,
        help,
        labelNames: ['schedule'] as const,
        registers: [registry],
        async collect() {
          this.reset();
          for (const record of await schedules.store.list()) {
            const value = read(await schedules.control.status(record), record);
            if (value !== undefined) this.set({ schedule: record.name }, value);
          }
        },
      });
    perSchedule('stowage_schedule_last_success_timestamp_seconds', 'When the newest Completed backup of each schedule completed', (s) =>
      seconds(s.lastSuccessfulBackup?.completedAt),
    );
    perSchedule('stowage_schedule_last_backup_timestamp_seconds', 'When each schedule last started a backup', (s) =>
      seconds(s.lastBackup?.startedAt),
    );
    perSchedule('stowage_schedule_next_run_timestamp_seconds', 'When each schedule fires next (absent while paused)', (s) =>
      seconds(s.nextRunAt),
    );
    perSchedule(
      'stowage_schedule_interval_seconds',
      "Seconds between a schedule's ticks (its next two), for alerts on a schedule with no recent success",
      (s) => seconds(s.intervalMs),
    );
    perSchedule('stowage_schedule_paused', '1 while a schedule is paused (it starts no backup; its last-success alert is moot)', (s) =>
      s.paused ? 1 : 0,
    );
    perSchedule(
      'stowage_schedule_skipped_ticks',
      'Ticks of each schedule that started no backup (the previous one still ran, or the spec is invalid)',
      (s) => s.skipped,
    );
    perSchedule('stowage_schedule_failed_validation', '1 when a schedule spec no longer validates (it starts no backup)', (s) =>
      s.phase === 'FailedValidation' ? 1 : 0,
    );
  }
  const refreshRestores = opts.restores ? registerRestoreGauge(registry, opts.restores) : undefined;
  if (opts.prune) registerPruneMetrics(registry, opts.prune);

  return {
    registry,
    async scrape() {
      await refreshFromState();
      await refreshRestores?.();
      return await registry.metrics();
    },
  };
}

/** `/metrics` (open, like health): Prometheus text format. */
export const metricsPlugin: FastifyPluginAsyncZod<MetricsOptions> = async (app, opts) => {
  const metrics = createApiMetrics(opts);
  app.get(
    '/metrics',
    {
      config: { public: true },
      schema: {
        tags: ['operations'],
        summary: 'Prometheus metrics',
        security: [],
        response: { 200: { description: 'Prometheus text exposition format', content: { 'text/plain': { schema: z.string() } } } },
      },
    },
    async (_req, reply) => {
      const text = await metrics.scrape();
      return reply.type(metrics.registry.contentType).send(text);
    },
  );
};
