import { describe, expect, it } from 'vitest';
import { mapInTurns, runInTurns, TURN_MS } from './in-turns.js';

/** Holds the thread for `ms` (the synchronous work a plan does per item). */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spin
  }
}

describe('mapInTurns', () => {
  it('maps in order, as map does', async () => {
    const items = Array.from({ length: 95 }, (_, i) => i);
    expect(await mapInTurns(items, 10, (i) => i * 2)).toEqual(items.map((i) => i * 2));
    expect(await mapInTurns([], 10, (i: number) => i)).toEqual([]);
  });

  it('lets other work run once a turn has lasted TURN_MS: a callback queued before it runs well before the last item', async () => {
    let mapped = 0;
    let mappedWhenOtherWorkRan: number | undefined;
    setImmediate(() => {
      mappedWhenOtherWorkRan = mapped;
    });
    // Each item holds the thread for a fifth of a turn: a turn ends after about 5 of the 100.
    await mapInTurns(
      Array.from({ length: 100 }, (_, i) => i),
      1,
      () => {
        busy(TURN_MS / 5);
        return ++mapped;
      },
    );
    expect(mappedWhenOtherWorkRan).toBeGreaterThanOrEqual(1);
    expect(mappedWhenOtherWorkRan).toBeLessThan(100);
  });
});

describe('runInTurns', () => {
  it("drives a stepwise computation to its value, letting other work run between a turn's steps", async () => {
    let steps = 0;
    let stepsWhenOtherWorkRan: number | undefined;
    setImmediate(() => {
      stepsWhenOtherWorkRan = steps;
    });
    function* work(): Generator<void, string, void> {
      for (let i = 0; i < 100; i++) {
        busy(TURN_MS / 5);
        steps++;
        yield;
      }
      return 'done';
    }
    expect(await runInTurns(work())).toBe('done');
    expect(steps).toBe(100);
    expect(stepsWhenOtherWorkRan).toBeGreaterThanOrEqual(1);
    expect(stepsWhenOtherWorkRan).toBeLessThan(100);
  });
});
