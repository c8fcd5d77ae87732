import { describe, expect, it } from 'vitest';
import {
  commandStatsDelta,
  commandsByOrigin,
  distribution,
  earliestPerNode,
  nodeAgentBound,
  parseCommandStats,
  percentile,
} from './stats.js';

describe('percentile (nearest rank)', () => {
  it('takes the 99th of 100 values as p99 and the max as p100', () => {
    const values = Array.from({ length: 100 }, (_, i) => 100 - i); // unsorted on purpose
    expect(percentile(values, 99)).toBe(99);
    expect(percentile(values, 100)).toBe(100);
    expect(percentile(values, 50)).toBe(50);
  });
  it('gives the single value for one value and null for none', () => {
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNull();
  });
  it('rejects p outside 0..100', () => {
    expect(() => percentile([1], 101)).toThrow(RangeError);
  });
  it('distribution reports count, p50, p99, max and mean', () => {
    expect(distribution([10, 20, 30, 40])).toEqual({ count: 4, p50: 20, p99: 40, max: 40, mean: 25 });
    expect(distribution([]).p99).toBeNull();
  });
});

describe('nodeAgentBound', () => {
  it('spreads the total copy time over N·K slots when the work is even', () => {
    const pvbs = ['a', 'a', 'b', 'b'].map((node) => ({ node, copyMs: 1000 }));
    const b = nodeAgentBound(pvbs, 2, 1);
    expect(b.totalPvbWorkMs).toBe(4000);
    expect(b.copySlots).toBe(2);
    expect(b.lowerBoundMs).toBe(2000);
    expect(b.boundMs).toBe(2000);
  });
  it('is held up by the busiest node when PVBs are pinned unevenly', () => {
    const pvbs = [
      { node: 'a', copyMs: 3000 },
      { node: 'a', copyMs: 3000 },
      { node: 'b', copyMs: 1000 },
    ];
    const b = nodeAgentBound(pvbs, 2, 2);
    expect(b.lowerBoundMs).toBe(1750);
    expect(b.busiestNodeBoundMs).toBe(3000);
    expect(b.boundMs).toBe(3000);
  });
  it('rejects a non-positive node count or load concurrency', () => {
    expect(() => nodeAgentBound([], 0, 1)).toThrow(RangeError);
    expect(() => nodeAgentBound([], 1, 0)).toThrow(RangeError);
  });
});

describe('INFO commandstats', () => {
  const before = '# Commandstats\r\ncmdstat_evalsha:calls=10,usec=100,usec_per_call=10.00\r\ncmdstat_get:calls=3,usec=3\r\n';
  const after =
    '# Commandstats\r\ncmdstat_evalsha:calls=25,usec=250\r\ncmdstat_get:calls=3,usec=3\r\ncmdstat_client|setname:calls=2,usec=1\r\n';
  it('parses calls per command, subcommands included', () => {
    expect(parseCommandStats(after)).toEqual({ evalsha: 25, get: 3, 'client|setname': 2 });
  });
  it('keeps only commands called in between', () => {
    expect(commandStatsDelta(parseCommandStats(before), parseCommandStats(after))).toEqual({ evalsha: 15, 'client|setname': 2 });
  });
});

describe('earliestPerNode', () => {
  it("keeps each node's earliest item, the first seen on a tie", () => {
    const items = [
      { node: 'a', startMs: 30, id: 1 },
      { node: 'b', startMs: 10, id: 2 },
      { node: 'a', startMs: 20, id: 3 },
      { node: 'b', startMs: 10, id: 4 },
    ];
    const first = earliestPerNode(items, (i) => i.startMs);
    expect([...first.entries()].map(([node, i]) => [node, i.id])).toEqual([
      ['a', 3],
      ['b', 2],
    ]);
  });
});

describe('commandsByOrigin', () => {
  it("gives a script's own commands to the script call before them, and names scripts by SHA1", () => {
    const lines = [
      { args: ['evalsha', 'AB12', '2', 'k1', 'k2'], source: '127.0.0.1:5000' },
      { args: ['hset', 'k1', 'f', 'v'], source: 'lua' },
      { args: ['xadd', 'k2', '*', 'a', 'b'], source: 'lua' },
      { args: ['HGETALL', 'k3'], source: '127.0.0.1:5001' },
      { args: ['evalsha', 'ffff0000ffff', '0'], source: '127.0.0.1:5000' },
      { args: ['get', 'x'], source: 'lua' },
      { args: ['evalsha', 'ab12', '2', 'k1', 'k2'], source: '127.0.0.1:5002' },
    ];
    expect(commandsByOrigin(lines, new Map([['ab12', 'moveToFinished']]))).toEqual({
      moveToFinished: { calls: 2, commands: 4 },
      hgetall: { calls: 1, commands: 1 },
      'evalsha:ffff0000': { calls: 1, commands: 2 },
    });
  });
});
