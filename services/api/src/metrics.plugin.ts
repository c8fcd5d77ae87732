import type { PruneStatusStore, RestoreState, ScheduleControl, ScheduleStore } from '@stowage/pipeline';
import { runIndexKey } from '@stowage/queue';
import type { Queue } from 'bullmq';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { z } from 'zod';
import { TERMINAL_BACKUP_PHASES } from './api.schema.js';
import { type BackupReads, COUNTER } from './backup-view.js';
import { registerPruneMetrics } from './prune-metrics.js';
import { registerRestoreMetrics } from './restore-metrics.js';

export interface MetricsOptions {
  /** The API's one read path (a finished backup's PVBs are in storage). */
  reads: BackupReads;
  queues: readonly Queue[];
  /** When given, `stowage_schedule_*` per schedule. */
  schedules?: { control: ScheduleControl; store: ScheduleStore } | undefined;
  /** With restores wired, the `stowage_restore_*` metrics too. */
  restores?: RestoreState | undefined;
  /** When given, the `stowage_repository_prune_*` metrics. */
  prune?: PruneStatusStore | undefined;
}

/**
 * Builds the Prometheus registry. Everything is read from the shared state at scrape time, so
 * every API replica reports the same truth whichever process ran the jobs:
 * - `stowage_backups_total{phase}` (a gauge despite the name, which the API contract fixes) and
 *   the queue gauges are recomputed on each scrape (phases of ended backups are remembered, so
 *   a scrape reads only the backups still running);
 * - durations, items and hook counts of a backup are observed once per process, the first
 *   scrape after it reached a terminal phase (a restart re-observes every retained backup,
 *   which is what a fresh histogram should hold).
 */
export interface ApiMetrics {
  registry: Registry;
  /** Brings the state-derived figures up to date and renders the text exposition. */
  scrape(): Promise<string>;
}

export function createApiMetrics(opts: MetricsOptions): ApiMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'stowage_api_' });
  const observed = new Set<string>();

  const backupDuration = new Histogram({
    name: 'stowage_backup_duration_seconds',
    help: 'Duration of finished backups, start to completion',
    labelNames: ['phase'] as const,
    buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400],
    registers: [registry],
  });
  const items = new Counter({ name: 'stowage_backup_items_total', help: 'Items backed up by finished backups', registers: [registry] });
  const hookRuns = new Counter({ name: 'stowage_hook_runs_total', help: 'Hook runs attempted by finished backups', registers: [registry] });
  const hookFailures = new Counter({
    name: 'stowage_hook_failures_total',
    help: 'Hook runs that failed in finished backups',
    registers: [registry],
  });
  const pvbDuration = new Histogram({
    name: 'stowage_pvb_duration_seconds',
    help: 'PodVolumeBackup duration (startTimestamp to completionTimestamp) in finished backups',
    labelNames: ['phase'] as const,
    buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400],
    registers: [registry],
  });

  const observeFinished = async (name: string, phase: string, startedAt?: number, completedAt?: number): Promise<void> => {
    observed.add(name);
    if (startedAt !== undefined && completedAt !== undefined && completedAt >= startedAt) {
      backupDuration.observe({ phase }, (completedAt - startedAt) / 1000);
    }
    const counters = await opts.reads.state.counters(name);
    items.inc(counters[COUNTER.itemsBackedUp] ?? 0);
    hookRuns.inc(counters[COUNTER.hooksAttempted] ?? 0);
    hookFailures.inc(counters[COUNTER.hooksFailed] ?? 0);
    const rec = await opts.reads.record(name);
    if (!rec) return;
    for await (const pvbs of opts.reads.pvbs(rec)) {
      for (const p of pvbs) {
        if (!p.startTimestamp || !p.completionTimestamp) continue;
        const seconds = (Date.parse(p.completionTimestamp) - Date.parse(p.startTimestamp)) / 1000;
        if (Number.isFinite(seconds) && seconds >= 0) pvbDuration.observe({ phase: p.phase }, seconds);
      }
    }
  };

  const backupsByPhase = new Gauge({
    name: 'stowage_backups_total',
    help: 'Backups recorded in Stowage, by current phase',
    labelNames: ['phase'] as const,
    registers: [registry],
  });

  // Phases of backups that have ended never change again (only deletion removes them): they are
  // kept here, so a scrape reads the phase of the backups still running and of new names only,
  // not of every retained backup.
  const endedPhase = new Map<string, string>();

  /** Counts backups by phase; observes backups that ended since the last scrape. */
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
      const rows = await Promise.all(slice.map((n) => redis.hmget(state.key(n, 'rec'), 'phase', 'startedAt', 'completedAt')));
      for (let j = 0; j < slice.length; j++) {
        const [phase, startedAt, completedAt] = rows[j] ?? [];
        if (!phase) continue;
        byPhase.set(phase, (byPhase.get(phase) ?? 0) + 1);
        const name = slice[j] as string;
        if (!TERMINAL_BACKUP_PHASES.has(phase)) continue;
        endedPhase.set(name, phase);
        if (!observed.has(name)) {
          await observeFinished(name, phase, startedAt ? Number(startedAt) : undefined, completedAt ? Number(completedAt) : undefined);
        }
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
    const perSchedule = (name: string, help: string, read: (s: Awaited<ReturnType<ScheduleControl['status']>>) => number | undefined) =>
      new Gauge({
        name,
        help,
        labelNames: ['schedule'] as const,
        registers: [registry],
        async collect() {
          this.reset();
          for (const record of await schedules.store.list()) {
            const value = read(await schedules.control.status(record));
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
      'stowage_schedule_skipped_ticks',
      'Ticks of each schedule that started no backup (the previous one still ran, or the spec is invalid)',
      (s) => s.skipped,
    );
    perSchedule('stowage_schedule_failed_validation', '1 when a schedule spec no longer validates (it starts no backup)', (s) =>
      s.phase === 'FailedValidation' ? 1 : 0,
    );
  }
  const refreshRestores = opts.restores ? registerRestoreMetrics(registry, opts.restores) : undefined;
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
