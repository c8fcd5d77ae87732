/** Text helpers for terminal output: sizes, durations, times, tables, bars. */
// The subpath, not the package: the CLI loads only what it prints with (a faster start from source).

/** Sizes: core's, shared with the console. */
import { formatBytes } from '@stowage/core';
import { formatDuration as formatGoDuration } from '@stowage/core/duration';

export { formatBytes };

/**
 * A duration the way Go (and so Velero and kubectl) writes one: `350ms`, `2.3s`, `1m5s`,
 * `1h2m3s` — core's formatDuration, rounded for a person: tenths of a second under a minute,
 * whole seconds above. One style for every duration the CLI prints.
 */
export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '-';
  const a = Math.abs(ms);
  const rounded = a < 1_000 ? Math.round(ms) : a < 60_000 ? Math.round(ms / 100) * 100 : Math.round(ms / 1_000) * 1_000;
  return formatGoDuration(rounded);
}

/** How long ago (or, negative, how far ahead): whole seconds, minutes past an hour, hours past two days. */
export function formatAge(ms: number): string {
  const a = Math.abs(ms);
  const unit = a >= 48 * 3_600_000 ? 3_600_000 : a >= 3_600_000 ? 60_000 : 1_000;
  return formatGoDuration(Math.round(ms / unit) * unit);
}

const pad = (n: number, width = 2) => String(Math.trunc(Math.abs(n))).padStart(width, '0');

/** A timestamp in the local time zone (TZ) with its offset: `2026-03-01 14:03:22 +01:00` (a table cell). */
export function formatLocalTime(iso: string | undefined): string {
  if (!iso) return '-';
  const at = Date.parse(iso);
  if (!Number.isFinite(at)) return iso;
  const d = new Date(at);
  const offset = -d.getTimezoneOffset();
  const zone = `${offset >= 0 ? '+' : '-'}${pad(offset / 60)}:${pad(offset % 60)}`;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${zone}`;
}

/** Local time plus age, `2026-03-01 14:03:22 +01:00 (5m0s ago)`; `now` comes in so tests can pin it. */
export function formatTime(iso: string | undefined, now: number = Date.now()): string {
  const local = formatLocalTime(iso);
  const at = iso ? Date.parse(iso) : Number.NaN;
  if (!Number.isFinite(at)) return local;
  const age = now - at;
  return `${local} (${age >= 0 ? `${formatAge(age)} ago` : `in ${formatAge(-age)}`})`;
}

export const msBetween = (from: string | undefined, to: string | undefined): number | undefined => {
  if (!from || !to) return undefined;
  const a = Date.parse(from);
  const b = Date.parse(to);
  return Number.isFinite(a) && Number.isFinite(b) ? b - a : undefined;
};

/** A plain left-aligned table; every row has as many cells as the header. */
export function formatTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)];
}

/** `[██████░░░░]` for done/total (an unknown total shows an empty bar). */
export function bar(done: number, total: number, width = 24): string {
  const ratio = total > 0 ? Math.min(1, Math.max(0, done / total)) : 0;
  const full = Math.round(ratio * width);
  return `[${'█'.repeat(full)}${'░'.repeat(width - full)}]`;
}

/** What a run asked of object storage (the API's `storage`), as one line. Older servers send none. */
export interface StorageCost {
  requests: { put: number; get: number; head: number; list: number; delete: number };
  bytesWritten: number;
  bytesRead: number;
}

export function formatStorageCost(cost: StorageCost | undefined): string {
  if (!cost) return 'not counted by this server';
  const r = cost.requests;
  const total = r.put + r.get + r.head + r.list + r.delete;
  return `${total} requests (put ${r.put}, get ${r.get}, list ${r.list}, head ${r.head}, delete ${r.delete}); ${formatBytes(cost.bytesWritten)} written, ${formatBytes(cost.bytesRead)} read`;
}
