/*
 * Go-style durations (`time.ParseDuration`): a sequence of decimal numbers with units
 * ns, us (µs), ms, s, m, h — e.g. `1h30m`, `45s`, `1.5h`, `300ms`. `0` alone is allowed.
 * Values are returned in milliseconds (rounded to the nearest ms).
 */
const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const SEGMENT = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

export type DurationParseResult = { ok: true; ms: number } | { ok: false; message: string };

export function parseDuration(text: string): DurationParseResult {
  const invalid = (): DurationParseResult => ({
    ok: false,
    message: `${JSON.stringify(text)} is not a duration; use a number with a unit (ns, us, ms, s, m, h), e.g. "30s", "1h30m", "4h"`,
  });
  let rest = text.trim();
  let sign = 1;
  if (rest.startsWith('-') || rest.startsWith('+')) {
    if (rest.startsWith('-')) sign = -1;
    rest = rest.slice(1);
  }
  if (rest === '0') return { ok: true, ms: 0 };
  if (rest.length === 0) return invalid();
  let total = 0;
  SEGMENT.lastIndex = 0;
  while (SEGMENT.lastIndex < rest.length) {
    const start = SEGMENT.lastIndex;
    const match = SEGMENT.exec(rest);
    if (!match || match.index !== start) return invalid();
    total += Number(match[1]) * (UNIT_MS[match[2] ?? ''] ?? Number.NaN);
  }
  if (!Number.isFinite(total)) return invalid();
  return { ok: true, ms: sign * Math.round(total) };
}

/**
 * Milliseconds as a Go-style duration: `0s`, `500ms`, `45s`, `1m30s`, `4h0m0s` (like Go's
 * `Duration.String`, so values round-trip through `parseDuration`).
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) throw new RangeError(`formatDuration: ${ms} is not a finite number`);
  const sign = ms < 0 ? '-' : '';
  let rest = Math.abs(Math.round(ms));
  if (rest === 0) return '0s';
  if (rest < 1000) return `${sign}${rest}ms`;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = rest / 1000;
  const secondsText = `${seconds}s`;
  if (hours > 0) return `${sign}${hours}h${minutes}m${secondsText}`;
  if (minutes > 0) return `${sign}${minutes}m${secondsText}`;
  return `${sign}${secondsText}`;
}
