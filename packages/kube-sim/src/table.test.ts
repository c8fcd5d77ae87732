import { describe, expect, it } from 'vitest';
import { humanDuration, wantsTable } from './table.js';

describe('server-side printing', () => {
  it('answers a Table only when the client asks for one first', () => {
    const kubectl = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json';
    expect(wantsTable(kubectl)).toBe('v1');
    expect(wantsTable('application/json;as=Table;v=v1beta1;g=meta.k8s.io')).toBe('v1beta1');
    expect(wantsTable('application/json')).toBeUndefined();
    expect(wantsTable('application/json, application/json;as=Table;v=v1;g=meta.k8s.io')).toBeUndefined();
    expect(wantsTable(undefined)).toBeUndefined();
  });

  it('words ages as apimachinery does', () => {
    const s = 1000;
    const m = 60 * s;
    const h = 60 * m;
    const d = 24 * h;
    expect(
      [0, 45 * s, 119 * s, 3 * m + 20 * s, 5 * m, 15 * m, 5 * h + 30 * m, 20 * h, 3 * d + 4 * h, 30 * d, 2 * 365 * d + 10 * d].map(
        humanDuration,
      ),
    ).toEqual(['0s', '45s', '119s', '3m20s', '5m', '15m', '5h30m', '20h', '3d4h', '30d', '2y10d']);
    expect(humanDuration(-5 * s)).toBe('<invalid>');
  });
});
