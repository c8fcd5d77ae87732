import { describe, expect, it } from 'vitest';
import { parseByteRate } from './byte-rate.js';

describe('parseByteRate', () => {
  it.each([
    ['52428800', 52_428_800],
    ['50MiB', 50 * 1024 * 1024],
    ['50Mi', 50 * 1024 * 1024],
    ['50MB', 50_000_000],
    ['1.5GiB/s', 1.5 * 1024 ** 3],
    ['800k', 800_000],
    [' 64 KiB ', 64 * 1024],
  ])('%s → %d bytes/s', (text, expected) => {
    expect(parseByteRate(text)).toEqual({ ok: true, bytesPerSec: expected });
  });

  it.each(['', 'fast', '-5MiB', '0', '5 XB', '10MiB/min'])('rejects %j with a hint', (text) => {
    const result = parseByteRate(text);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toMatch(/byte|above 0/);
  });
});
