import { formatDuration } from './duration.js';

/**
 * A validated spec as a Velero user writes it: every duration field stored in milliseconds
 * (`fsBackupTimeoutMs: 14400000`, `ttlMs`, a hook's `timeoutMs`) is shown under its Velero name
 * as a Go duration (`fsBackupTimeout: 4h0m0s`, `ttl: 720h0m0s`, `timeout: 30s`). Every other field
 * is kept as it is. The REST views, the CLI and the console all show specs through this.
 */
export function specForDisplay(spec: unknown): unknown {
  if (Array.isArray(spec)) return spec.map(specForDisplay);
  if (typeof spec !== 'object' || spec === null) return spec;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(spec)) {
    const durationKey = key.length > 2 && key.endsWith('Ms') && typeof value === 'number' && Number.isFinite(value);
    if (durationKey) out[key.slice(0, -2)] = formatDuration(value);
    else out[key] = specForDisplay(value);
  }
  return out;
}
