import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from './duration.js';
import { checkGlob, matchGlob } from './glob.js';
import { matchesLabelSelector } from './label-selector.js';
import { parseQuantity } from './quantity.js';

describe('parseDuration', () => {
  it.each([
    ['45s', 45_000],
    ['1h30m', 5_400_000],
    ['1.5h', 5_400_000],
    ['300ms', 300],
    ['2m3s', 123_000],
    ['0', 0],
    ['720h', 2_592_000_000],
    ['1500us', 2],
    ['-1s', -1000],
  ])('%j → %d ms', (text, ms) => {
    expect(parseDuration(text)).toEqual({ ok: true, ms });
  });

  it.each(['', 'abc', '10', '1x', '1h 30m', 'h', '1.2.3s'])('rejects %j with an example', (text) => {
    const result = parseDuration(text);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toMatch(/e\.g\. "30s"/);
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [500, '500ms'],
    [45_000, '45s'],
    [1_500, '1.5s'],
    [90_000, '1m30s'],
    [4 * 3_600_000, '4h0m0s'],
  ])('%d ms → %j, which parses back', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
    expect(parseDuration(text)).toEqual({ ok: true, ms });
  });
});

describe('parseQuantity', () => {
  it.each([
    ['10Gi', 10 * 2 ** 30],
    ['500Mi', 500 * 2 ** 20],
    ['1Ki', 1024],
    ['1G', 1e9],
    ['1.5G', 1.5e9],
    ['100m', 0.1],
    ['1e3', 1000],
    ['42', 42],
  ])('%j → %d', (text, value) => {
    expect(parseQuantity(text)).toEqual({ ok: true, value });
  });

  it.each(['', 'Gi', '10GB', 'ten'])('rejects %j', (text) => {
    expect(parseQuantity(text).ok).toBe(false);
  });
});

describe('matchGlob', () => {
  it.each([
    ['prod-*', 'prod-eu', true],
    ['prod-*', 'staging', false],
    ['*', 'anything', true],
    ['team-?', 'team-a', true],
    ['team-?', 'team-ab', false],
    ['db-[ab]', 'db-b', true],
    ['db-[!ab]', 'db-b', false],
    ['db-[a-c]', 'db-c', true],
    ['exact', 'exact', true],
    ['exact', 'exactly', false],
    ['a.b', 'axb', false],
  ])('%j vs %j → %s', (pattern, value, expected) => {
    expect(matchGlob(pattern, value)).toBe(expected);
  });

  it('flags unbalanced brackets', () => {
    expect(checkGlob('a[b').ok).toBe(false);
    expect(checkGlob('a]b').ok).toBe(false);
    expect(checkGlob('a[b]').ok).toBe(true);
  });
});

describe('matchesLabelSelector', () => {
  const labels = { app: 'web', tier: 'front' };
  it.each([
    [{}, true],
    [{ matchLabels: { app: 'web' } }, true],
    [{ matchLabels: { app: 'db' } }, false],
    [{ matchExpressions: [{ key: 'tier', operator: 'In' as const, values: ['front', 'back'] }] }, true],
    [{ matchExpressions: [{ key: 'tier', operator: 'NotIn' as const, values: ['front'] }] }, false],
    [{ matchExpressions: [{ key: 'zone', operator: 'NotIn' as const, values: ['a'] }] }, true],
    [{ matchExpressions: [{ key: 'app', operator: 'Exists' as const }] }, true],
    [{ matchExpressions: [{ key: 'app', operator: 'DoesNotExist' as const }] }, false],
    [{ matchLabels: { app: 'web' }, matchExpressions: [{ key: 'zone', operator: 'Exists' as const }] }, false],
  ])('%j → %s', (selector, expected) => {
    expect(matchesLabelSelector(selector, labels)).toBe(expected);
  });
});
