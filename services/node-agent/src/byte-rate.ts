/**
 * Parses a bandwidth limit: bytes per second as a plain number (`52428800`) or with a unit
 * (`50MiB`, `50Mi`, `50MB`, `1.5GiB/s`, `800k`). Binary units (Ki, Mi, Gi) are powers of 1024,
 * decimal ones (k, M, G) powers of 1000; a trailing `B` and `/s` are optional.
 */
export type ByteRateResult = { ok: true; bytesPerSec: number } | { ok: false; message: string };

const UNITS: Record<string, number> = {
  '': 1,
  k: 1e3,
  m: 1e6,
  g: 1e9,
  t: 1e12,
  ki: 1024,
  mi: 1024 ** 2,
  gi: 1024 ** 3,
  ti: 1024 ** 4,
};

export function parseByteRate(text: string): ByteRateResult {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?(?:\/s)?\s*$/i.exec(text);
  const fail = { ok: false as const, message: `${JSON.stringify(text)} is not a byte rate; use bytes per second like 52428800 or 50MiB` };
  if (!match) return fail;
  const unit = UNITS[(match[2] ?? '').toLowerCase()];
  if (unit === undefined) return fail;
  const bytesPerSec = Math.floor(Number(match[1]) * unit);
  if (!(bytesPerSec > 0) || !Number.isSafeInteger(bytesPerSec)) {
    return { ok: false, message: `${JSON.stringify(text)} must be above 0 bytes per second (leave it unset for no limit)` };
  }
  return { ok: true, bytesPerSec };
}
