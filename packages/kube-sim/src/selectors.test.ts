import { describe, expect, it } from 'vitest';
import { applyJsonPatch, applyMergePatch, applyStrategicMergePatch } from './patches.js';
import { matchesLabels, parseLabelSelector } from './selectors.js';

describe('label selectors', () => {
  const labels = { app: 'web', tier: 'front', 'example.com/x': 'y' };
  it.each([
    ['app=web', true],
    ['app==web,tier!=back', true],
    ['app in (db, web)', true],
    ['app notin (web)', false],
    ['example.com/x', true],
    ['!tier', false],
    ['!missing,app', true],
    ['', true],
  ])('%s → %s', (selector, expected) => {
    expect(matchesLabels(parseLabelSelector(selector), labels)).toBe(expected);
  });
  it('rejects malformed selectors', () => {
    for (const bad of ['app in ()', 'app=bad value', '=x', ',']) expect(() => parseLabelSelector(bad), bad).toThrow();
  });
});

describe('patches', () => {
  it('merge patch deletes with null and merges objects', () => {
    expect(applyMergePatch({ a: { b: 1, c: 2 }, d: [1] }, { a: { b: null }, d: [2] })).toEqual({ a: { c: 2 }, d: [2] });
  });
  it('JSON patch applies add/replace/remove/test and fails a failed test', () => {
    const doc = { metadata: { labels: { a: '1' } }, list: [1, 2] };
    expect(
      applyJsonPatch(doc, [
        { op: 'add', path: '/metadata/labels/b~1c', value: '2' },
        { op: 'remove', path: '/list/0' },
        { op: 'test', path: '/list', value: [2] },
      ]),
    ).toEqual({
      metadata: { labels: { a: '1', 'b/c': '2' } },
      list: [2],
    });
    expect(() => applyJsonPatch(doc, [{ op: 'test', path: '/list', value: [] }])).toThrow(/testing value/);
    expect(doc.list).toEqual([1, 2]); // the input is not modified
  });
  it('strategic merge merges named lists by name', () => {
    const pod = {
      spec: {
        containers: [
          { name: 'a', image: 'x:1' },
          { name: 'b', image: 'y:1' },
        ],
      },
    };
    expect(applyStrategicMergePatch(pod, { spec: { containers: [{ name: 'b', image: 'y:2' }], $setElementOrder: [] } })).toEqual({
      spec: {
        containers: [
          { name: 'a', image: 'x:1' },
          { name: 'b', image: 'y:2' },
        ],
      },
    });
  });
});
