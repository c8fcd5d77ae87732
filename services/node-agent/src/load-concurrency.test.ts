import { describe, expect, it } from 'vitest';
import { parseLoadConcurrency, resolveLoadConcurrency } from './load-concurrency.js';

describe('resolveLoadConcurrency', () => {
  const config = {
    globalConfig: 3,
    perNodeConfig: [
      { nodeSelector: { matchLabels: { pool: 'big' } }, number: 4 },
      { nodeSelector: { matchExpressions: [{ key: 'zone', operator: 'In' as const, values: ['z1', 'z2'] }] }, number: 2 },
    ],
  };

  it('uses globalConfig for a node that matches no rule', () => {
    expect(resolveLoadConcurrency(config, { pool: 'small' })).toBe(3);
  });

  it('gives a node matching one rule that rule’s number', () => {
    expect(resolveLoadConcurrency(config, { pool: 'big' })).toBe(4);
  });

  it('gives a node matching several rules the smallest number, even below globalConfig', () => {
    expect(resolveLoadConcurrency(config, { pool: 'big', zone: 'z2' })).toBe(2);
  });

  it('defaults to 1 without globalConfig or with a number ≤ 0', () => {
    expect(resolveLoadConcurrency({}, {})).toBe(1);
    expect(resolveLoadConcurrency({ globalConfig: 0 }, {})).toBe(1);
    expect(resolveLoadConcurrency({ globalConfig: -2 }, {})).toBe(1);
  });
});

describe('parseLoadConcurrency', () => {
  it('accepts the Velero shape, and a ConfigMap value that wraps it', () => {
    const inner = '{"globalConfig":2,"perNodeConfig":[{"nodeSelector":{"matchLabels":{"pool":"big"}},"number":5}]}';
    for (const text of [inner, `{"loadConcurrency":${inner}}`]) {
      const parsed = parseLoadConcurrency(text, 'X');
      expect(parsed.ok).toBe(true);
      if (parsed.ok) expect(resolveLoadConcurrency(parsed.config, { pool: 'big' })).toBe(5);
    }
  });

  it('ignores rules with an invalid selector or number, with a warning naming the rule', () => {
    const parsed = parseLoadConcurrency(
      JSON.stringify({
        globalConfig: 2,
        perNodeConfig: [
          { nodeSelector: { matchExpressions: [{ key: 'a', operator: 'Near' }] }, number: 1 },
          { nodeSelector: { matchLabels: { a: 'b' } }, number: 0 },
        ],
      }),
      'STOWAGE_LOAD_CONCURRENCY',
    );
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.config.perNodeConfig).toEqual([]);
    expect(parsed.warnings).toHaveLength(2);
    expect(parsed.warnings[0]).toContain('STOWAGE_LOAD_CONCURRENCY.perNodeConfig[0] is ignored');
    expect(resolveLoadConcurrency(parsed.config, { a: 'b' })).toBe(2);
  });

  it('rejects broken JSON, a wrong type and unknown fields with the source named', () => {
    const bad = ['{', '[]', '{"globalConfig":"two"}', '{"global":1}', '{"perNodeConfig":{}}'];
    for (const text of bad) {
      const parsed = parseLoadConcurrency(text, '/etc/stowage/load.json');
      expect(parsed.ok, text).toBe(false);
      if (!parsed.ok) expect(parsed.problems[0]).toContain('/etc/stowage/load.json');
    }
  });
});
