import { describe, expect, it } from 'vitest';
import { mapInTurns } from './in-turns.js';

describe('mapInTurns', () => {
  it('maps in order, as map does', async () => {
    const items = Array.from({ length: 95 }, (_, i) => i);
    expect(await mapInTurns(items, 10, (i) => i * 2)).toEqual(items.map((i) => i * 2));
    expect(await mapInTurns([], 10, (i: number) => i)).toEqual([]);
  });

  it('lets other work run between turns: a callback queued before it runs after the first turn, not the last item', async () => {
    let mapped = 0;
    let mappedWhenOtherWorkRan: number | undefined;
    setImmediate(() => {
      mappedWhenOtherWorkRan = mapped;
    });
    await mapInTurns(
      Array.from({ length: 100 }, (_, i) => i),
      10,
      () => ++mapped,
    );
    expect(mappedWhenOtherWorkRan).toBe(10);
  });
});
