/*
 * Kubernetes resource quantities (`10Gi`, `500M`, `1.5G`, `100m`, `1e3`) as a number of base
 * units (bytes for storage). Binary suffixes Ki Mi Gi Ti Pi Ei, decimal k M G T P E, milli m,
 * micro u, nano n, and decimal exponents (e3 / E3).
 */
const SUFFIX_MULTIPLIER: Record<string, number> = {
  '': 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

const QUANTITY = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/;

export type QuantityParseResult = { ok: true; value: number } | { ok: false; message: string };

export function parseQuantity(text: string): QuantityParseResult {
  const match = QUANTITY.exec(text.trim());
  if (!match) {
    return {
      ok: false,
      message: `${JSON.stringify(text)} is not a quantity; use a number with an optional suffix, e.g. "10Gi", "500Mi", "1G"`,
    };
  }
  const base = Number(match[1]);
  if (match[2]) return { ok: true, value: base * 10 ** Number(match[2].slice(1)) };
  return { ok: true, value: base * (SUFFIX_MULTIPLIER[match[3] ?? ''] ?? 1) };
}
