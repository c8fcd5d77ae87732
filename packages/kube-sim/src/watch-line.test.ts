import { describe, expect, it } from 'vitest';
import type { KubeObject } from './kube-object.js';
import { servedAs, watchLine } from './watch-line.js';

const pvr = (rv: string): KubeObject => ({
  apiVersion: 'stowage.dev/v1',
  kind: 'PodVolumeRestore',
  metadata: { name: 'r1', namespace: 'stowage', resourceVersion: rv, labels: { 'a"b': 'x\ny' } },
  spec: { pod: { name: 'p', namespace: 'ns', uid: 'u' } },
});

describe('watchLine', () => {
  it('is the JSON line of the event, for every event type and for each watcher of the same object', () => {
    const object = pvr('7');
    for (const type of ['ADDED', 'MODIFIED', 'DELETED'] as const) {
      const event = { type, object };
      expect(watchLine(event)).toBe(`${JSON.stringify(event)}\n`);
      expect(watchLine({ type, object })).toBe(`${JSON.stringify(event)}\n`);
    }
  });

  it('serialises the new object after an update (stored objects are replaced, never mutated)', () => {
    const before = pvr('7');
    watchLine({ type: 'ADDED', object: before });
    const after = { ...before, metadata: { ...before.metadata, resourceVersion: '8' } };
    expect(JSON.parse(watchLine({ type: 'MODIFIED', object: after })).object.metadata.resourceVersion).toBe('8');
  });

  it('sends bookmarks and errors as they are', () => {
    const bookmark = { type: 'BOOKMARK', object: { kind: 'PodVolumeRestore', metadata: { resourceVersion: '9' } } };
    expect(watchLine(bookmark)).toBe(`${JSON.stringify(bookmark)}\n`);
  });
});

describe('servedAs', () => {
  it('gives the object under the version a watcher asked for, one shared copy per version', () => {
    const object = pvr('7');
    expect(servedAs(object, 'stowage.dev/v1')).toBe(object);
    const old = servedAs(object, 'stowage.dev/v1beta1');
    expect(old).toEqual({ ...object, apiVersion: 'stowage.dev/v1beta1' });
    expect(servedAs(object, 'stowage.dev/v1beta1')).toBe(old);
    expect(object.apiVersion).toBe('stowage.dev/v1');
  });
});
