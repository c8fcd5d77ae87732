import { describe, expect, it } from 'vitest';
import { BlockPlanEncoder, decodeStoredBlock, dictionaryIdOf, PLAN_FORMAT_DEFLATE, PLAN_FORMAT_DICTIONARY } from './plan-codec.js';

function podBlock(i: number) {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `app-${i}`, namespace: 'shop', uid: `uid-${i}`, labels: { app: `app-${i}` } },
    spec: { containers: [{ name: 'app', image: 'busybox:1.36' }] },
  };
  const pv = { apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name: `pv-${i}` }, spec: { capacity: { storage: '1Gi' } } };
  const plan = {
    id: `blk-${i}`,
    pods: [
      { namespace: 'shop', name: `app-${i}`, uid: `uid-${i}`, itemKey: `pods/shop/app-${i}`, hooks: { pre: [], post: [] }, volumes: [] },
    ],
    items: [
      { key: `pods/shop/app-${i}`, apiVersion: 'v1', kind: 'Pod', groupResource: 'pods', namespace: 'shop', name: `app-${i}` },
      {
        key: `persistentvolumes/-cluster-/pv-${i}`,
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        groupResource: 'persistentvolumes',
        name: `pv-${i}`,
      },
      // Not what its manifest says (kept as it is): the codec must not rebuild it.
      { key: 'odd/shop/x', apiVersion: 'v2', kind: 'Odd', groupResource: 'odd', namespace: 'shop', name: 'x' },
    ],
    skips: [],
  };
  return { plan, items: [pod, pv, { apiVersion: 'v1', kind: 'Odd', metadata: { name: 'x' } }] };
}

describe('plan codec', () => {
  it('gives back exactly the JSON it was given, without and with a dictionary learned from the batch', async () => {
    const encoder = new BlockPlanEncoder();
    const small = [podBlock(0)];
    const first = await encoder.encodeBatch(small);
    expect(first.dictionary).toBeUndefined();
    expect(first.values[0]?.[0]).toBe(PLAN_FORMAT_DEFLATE);
    expect(JSON.stringify(decodeStoredBlock(first.values[0] ?? Buffer.alloc(0)))).toBe(JSON.stringify({ ...small[0], legacy: false }));

    const batch = Array.from({ length: 20 }, (_, i) => podBlock(i + 1));
    const { values, dictionary } = await encoder.encodeBatch(batch);
    expect(dictionary).toBeDefined();
    values.forEach((v, i) => {
      expect(v[0]).toBe(PLAN_FORMAT_DICTIONARY);
      expect(dictionaryIdOf(v)).toBe(dictionary?.id);
      expect(JSON.stringify(decodeStoredBlock(v, dictionary?.bytes))).toBe(JSON.stringify({ ...batch[i], legacy: false }));
    });
    // The next batch reuses the dictionary; what the blocks share costs next to nothing.
    const next = await encoder.encodeBatch([podBlock(99)]);
    expect(next.dictionary).toBeUndefined();
    expect(dictionaryIdOf(next.values[0] ?? Buffer.alloc(0))).toBe(dictionary?.id);
    expect(next.values[0]?.length).toBeLessThan(JSON.stringify(podBlock(99)).length / 4);
  });

  it('learns a second dictionary only when the blocks change kind enough to pay for it', async () => {
    const encoder = new BlockPlanEncoder();
    expect((await encoder.encodeBatch(Array.from({ length: 16 }, (_, i) => podBlock(i)))).dictionary).toBeDefined();
    // More of the same kind: the first dictionary stays.
    expect((await encoder.encodeBatch(Array.from({ length: 64 }, (_, i) => podBlock(100 + i)))).dictionary).toBeUndefined();
    // Many blocks of another kind: a dictionary learned from them is worth storing.
    const secret = (i: number) => ({
      plan: { id: `blk-s${i}`, pods: [], items: [], skips: [] },
      items: [
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: `tls-${i}`, namespace: 'edge' },
          type: 'kubernetes.io/tls',
          data: { 'tls.crt': 'LS0tLS1CRUdJTi'.repeat(40), 'ca.crt': `Q0Ev${i}`.repeat(30) },
        },
      ],
    });
    const secrets = Array.from({ length: 200 }, (_, i) => secret(i));
    const { values, dictionary } = await encoder.encodeBatch(secrets);
    expect(dictionary).toBeDefined();
    expect(JSON.stringify(decodeStoredBlock(values[150] ?? Buffer.alloc(0), dictionary?.bytes))).toBe(
      JSON.stringify({ ...secrets[150], legacy: false }),
    );
  });

  it('reads the plain JSON of older versions, and refuses an unknown format naming its first byte', () => {
    expect(decodeStoredBlock(Buffer.from('{"id":"blk-1"}'))).toEqual({ plan: { id: 'blk-1' }, items: undefined, legacy: true });
    expect(() => decodeStoredBlock(Buffer.from([0x7f, 1]))).toThrow(/unknown format \(first byte 0x7f\)/);
  });
});
