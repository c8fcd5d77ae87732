import { PRUNE_SUMMARY_FIELDS, type PruneStatus, type PruneStatusStore } from '@stowage/pipeline';
import { Gauge, type Registry } from 'prom-client';

/** camelCase summary field → the metric's snake_case name. */
const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * The `stowage_repository_prune_*` metrics, read at scrape time from the prune status in Redis
 * (written by whichever process ran the prune job), so every api replica reports the same. A
 * scrape collects every gauge at once; they share one read. Before any run the values are 0.
 */
export function registerPruneMetrics(registry: Registry, status: PruneStatusStore): void {
  let pending: Promise<PruneStatus> | undefined;
  const current = () => {
    if (!pending) {
      const read = status.read();
      pending = read;
      read.then(
        () => (pending = undefined),
        () => (pending = undefined),
      );
    }
    return pending;
  };
  const gauge = (name: string, help: string, value: (s: PruneStatus) => number | undefined) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        this.set(value(await current()) ?? 0);
      },
    });
  gauge('stowage_repository_prune_runs', 'Repository prune runs finished', (s) => s.runs);
  gauge('stowage_repository_prune_freed_bytes', 'Bytes freed by repository prune runs in total', (s) => s.bytesFreedTotal);
  gauge('stowage_repository_prune_last_success_timestamp_seconds', 'When the last repository prune finished', (s) =>
    s.lastSuccessAt === undefined ? undefined : s.lastSuccessAt / 1000,
  );
  gauge('stowage_repository_prune_last_failed', '1 when the last repository prune run failed', (s) => (s.lastError ? 1 : 0));
  for (const field of PRUNE_SUMMARY_FIELDS) {
    gauge(`stowage_repository_prune_last_${snake(field)}`, `The last repository prune's ${field}`, (s) => s.last?.[field]);
  }
}
