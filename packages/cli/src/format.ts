/** Text helpers for terminal output: sizes, durations, tables, bars. */

export function formatBytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(v >= 100 ? 0 : 1)} ${units[i]}`;
}

export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '-';
  const sign = ms < 0 ? '-' : '';
  const a = Math.abs(ms);
  if (a < 1_000) return `${sign}${Math.round(a)} ms`;
  if (a < 60_000) return `${sign}${(a / 1_000).toFixed(a < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(a / 60_000);
  const s = Math.round((a % 60_000) / 1_000);
  return m < 60 ? `${sign}${m}m${String(s).padStart(2, '0')}s` : `${sign}${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
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
