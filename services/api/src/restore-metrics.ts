import type { RestoreState } from '@stowage/pipeline';
import { runIndexKey } from '@stowage/queue';
import { Gauge, type Registry } from 'prom-client';
import { TERMINAL_BACKUP_PHASES } from './api.schema.js';

/**
 * `stowage_restores{phase}`: the restores Stowage holds by phase, read from restore state at
 * scrape time like the backups' gauge. Restore outcomes and durations are counters moved where a
 * restore ends (platform's createProcessMetrics), not replayed from here.
 */
export function registerRestoreGauge(registry: Registry, restores: RestoreState): () => Promise<void> {
  const endedPhase = new Map<string, string>();
  const byPhaseGauge = new Gauge({
    name: 'stowage_restores',
    help: 'Restores Stowage holds, by current phase',
    labelNames: ['phase'] as const,
    registers: [registry],
  });
  return async () => {
    const redis = restores.redis;
    const names = await redis.zrange(runIndexKey(restores.prefix, 'restores'), 0, -1);
    const present = new Set(names);
    for (const name of endedPhase.keys()) if (!present.has(name)) endedPhase.delete(name);
    const byPhase = new Map<string, number>();
    for (const name of names) {
      let phase = endedPhase.get(name);
      if (phase === undefined) {
        const p = await redis.hget(restores.key(name, 'rec'), 'phase');
        if (!p) continue;
        phase = p;
        if (TERMINAL_BACKUP_PHASES.has(p)) endedPhase.set(name, p);
      }
      byPhase.set(phase, (byPhase.get(phase) ?? 0) + 1);
    }
    byPhaseGauge.reset();
    for (const [phase, n] of byPhase) byPhaseGauge.set({ phase }, n);
  };
}
