import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dispatchOrder } from './dispatch-order.js';

interface Block {
  id: string;
  pvbNodes: string[];
}
const block = (id: string, ...pvbNodes: string[]): Block => ({ id, pvbNodes });
const ids = (blocks: Block[]) => blocks.map((b) => b.id);
const order = (blocks: Block[]) => dispatchOrder(blocks, (b) => b.pvbNodes);

describe('dispatchOrder', () => {
  it('interleaves blocks by node, the nodes with most volume backups first, then blocks without any', () => {
    const blocks = [
      block('a1', 'n-a'),
      block('a2', 'n-a', 'n-a'),
      block('none1'),
      block('a3', 'n-a'),
      block('b1', 'n-b'),
      block('c1', 'n-c'),
      block('c2', 'n-c'),
      block('none2'),
    ];
    expect(ids(order(blocks))).toEqual(['a1', 'c1', 'b1', 'a2', 'c2', 'a3', 'none1', 'none2']);
  });

  it('puts a block on the node with most of its volume backups (ties: the first by name)', () => {
    const blocks = [block('x', 'n-b', 'n-a', 'n-b'), block('y', 'n-b', 'n-a'), block('z', 'n-a')];
    // n-b: x (2 of 3); y ties n-a/n-b → n-a. Totals: n-a 3, n-b 3 → n-a first by name.
    expect(ids(order(blocks))).toEqual(['y', 'x', 'z']);
  });

  it('spreads pods that plan order keeps together: the first N blocks reach N nodes', () => {
    // 80 pods round-robin over 40 nodes, listed in an order that clusters nodes (as hashed block ids did).
    const blocks = Array.from({ length: 80 }, (_, i) => block(`app-${i}`, `node-${i % 40}`, `node-${i % 40}`));
    const clustered = [...blocks].sort((a, b) => (a.pvbNodes[0]! < b.pvbNodes[0]! ? -1 : a.pvbNodes[0]! > b.pvbNodes[0]! ? 1 : 0));
    const firstForty = order(clustered).slice(0, 40);
    expect(new Set(firstForty.map((b) => b.pvbNodes[0])).size).toBe(40);
  });

  it('is a stable permutation that reaches as many nodes as it can, block by block', () => {
    const arbitrary = fc.array(fc.array(fc.constantFrom('n0', 'n1', 'n2', 'n3', 'n4'), { maxLength: 3 }), { maxLength: 60 });
    fc.assert(
      fc.property(arbitrary, (nodeLists) => {
        const blocks = nodeLists.map((nodes, i) => block(`b${i}`, ...nodes));
        const out = order(blocks);
        expect([...ids(out)].sort()).toEqual([...ids(blocks)].sort());
        expect(ids(order(blocks))).toEqual(ids(out));
        const firstWithout = out.findIndex((b) => b.pvbNodes.length === 0);
        if (firstWithout >= 0) expect(out.slice(firstWithout).every((b) => b.pvbNodes.length === 0)).toBe(true);
        // Blocks without volume backups keep their order.
        expect(ids(out.filter((b) => b.pvbNodes.length === 0))).toEqual(ids(blocks.filter((b) => b.pvbNodes.length === 0)));
        // Each prefix reaches min(prefix length, nodes with work) distinct primary nodes.
        const primaries = new Set(out.flatMap((b) => (b.pvbNodes.length > 0 ? [b] : [])).map((b) => primaryOf(b.pvbNodes)));
        const seen = new Set<string>();
        out.forEach((b, i) => {
          if (b.pvbNodes.length > 0) seen.add(primaryOf(b.pvbNodes));
          if (i < primaries.size) expect(seen.size).toBe(i + 1);
        });
      }),
    );
  });
});

function primaryOf(nodes: string[]): string {
  const counts = new Map<string, number>();
  for (const n of nodes) counts.set(n, (counts.get(n) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))[0]![0];
}
