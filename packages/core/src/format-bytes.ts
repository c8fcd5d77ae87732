/**
 * A byte count for people: `1.5 KiB`, `12 MiB`, `512 B` (binary units, one decimal under 100).
 * One implementation for the CLI and the console (the api serves it to the console, console.plugin.ts):
 * keep it self-contained — no imports, no helpers outside it — since its source is sent to the browser.
 */
export function formatBytes(n: number | null | undefined, missing = '-'): string {
  if (n === undefined || n === null || !Number.isFinite(n)) return missing;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(v >= 100 ? 0 : 1)} ${units[i]}`;
}
