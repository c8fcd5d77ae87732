import type { RestoreState } from '@stowage/pipeline';
import { runIndexKey } from '@stowage/queue';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { TERMINAL_BACKUP_PHASES } from './api.schema.js';

/**
 * The `stowage_restore_*` metrics, read from restore state at scrape time like the backup ones:
 * restores by phase (recomputed), and per finished restore — observed once per process — its
 * duration, item outcomes, PVR outcomes and hook runs.
 */
export function registerRestoreMetrics(registry: Registry, restores: RestoreState): () => Promise<void> {
  const observed = new Set<string>();
  const endedPhase = new Map<string, string>();
  const byPhaseGauge = new Gauge({
    name: 'stowage_restore_runs',
    help: 'Restores recorded in Stowage, by current phase',
    labelNames: ['phase'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'stowage_restore_duration_seconds',
    help: 'Duration of finished restores, start to completion',
    labelNames: ['phase'] as const,
    buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400],
    registers: [registry],
  });
  const items = new Counter({
    name: 'stowage_restore_items_total',
    help: 'Items of finished restores, by outcome',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const pvrs = new Counter({
    name: 'stowage_restore_pvrs_total',
    help: 'PodVolumeRestores of finished restores, by final phase',
    labelNames: ['phase'] as const,
    registers: [registry],
  });
  const hookRuns = new Counter({
    name: 'stowage_restore_hook_runs_total',
    help: 'Post-restore hooks attempted by finished restores',
    registers: [registry],
  });
  const hookFailures = new Counter({
    name: 'stowage_restore_hook_failures_total',
    help: 'Post-restore hooks that failed in finished restores',
    registers: [registry],
  });

  const observe = async (name: string, phase: string, startedAt?: number, completedAt?: number) => {
    observed.add(name);
    if (startedAt !== undefined && completedAt !== undefined && completedAt >= startedAt)
      duration.observe({ phase }, (completedAt - startedAt) / 1000);
    const c = await restores.counters(name);
    for (const [outcome, field] of [
      ['created', 'itemsCreated'],
      ['updated', 'itemsUpdated'],
      ['exists-skipped', 'itemsSkipped'],
      ['failed', 'itemsFailed'],
    ] as const) {
      items.inc({ outcome }, c[field] ?? 0);
    }
    for (const p of ['Completed', 'Failed', 'Canceled', 'TimedOut']) pvrs.inc({ phase: p }, c[`pvrs${p}`] ?? 0);
    hookRuns.inc(c.hooksAttempted ?? 0);
    hookFailures.inc(c.hooksFailed ?? 0);
  };

  return async () => {
    const redis = restores.redis;
    const names = await redis.zrange(runIndexKey(restores.prefix, 'restores'), 0, -1);
    const present = new Set(names);
    for (const name of endedPhase.keys()) if (!present.has(name)) endedPhase.delete(name);
    const byPhase = new Map<string, number>();
    for (const name of names) {
      let phase = endedPhase.get(name);
      if (phase === undefined) {
        const [p, startedAt, completedAt] = await redis.hmget(restores.key(name, 'rec'), 'phase', 'startedAt', 'completedAt');
        if (!p) continue;
        phase = p;
        if (TERMINAL_BACKUP_PHASES.has(p)) {
          endedPhase.set(name, p);
          if (!observed.has(name))
            await observe(name, p, startedAt ? Number(startedAt) : undefined, completedAt ? Number(completedAt) : undefined);
        }
      }
      byPhase.set(phase, (byPhase.get(phase) ?? 0) + 1);
    }
    byPhaseGauge.reset();
    for (const [phase, n] of byPhase) byPhaseGauge.set({ phase }, n);
  };
}
