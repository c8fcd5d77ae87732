import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import {
  mainThreadShare,
  type RunQueueReading,
  readRunQueue,
  readRunQueueWaits,
  runQueueWaitOfParts,
  runQueueWaitSince,
} from './run-queue.js';

/** A reading from per-thread seconds, the first entry the main thread. */
function reading(threads: Record<string, number>): RunQueueReading {
  const byThread = new Map(Object.entries(threads));
  return { mainThreadSeconds: [...byThread.values()][0] ?? 0, byThread };
}

describe('run-queue wait (schedstat)', () => {
  it("reads this process's main thread and each live thread; nothing for a pid that is gone", async () => {
    const idleThread = new Worker('setInterval(() => {}, 1000)', { eval: true });
    await new Promise((r) => idleThread.once('online', r));
    try {
      const r = await readRunQueue(process.pid);
      expect(r?.byThread.get(String(process.pid))).toBe(r?.mainThreadSeconds);
      expect(r?.mainThreadSeconds).toBeGreaterThanOrEqual(0);
      // The worker thread is one of this process's threads besides the main one.
      expect(r?.byThread.size).toBeGreaterThan(1);
    } finally {
      await idleThread.terminate();
    }
    expect(await readRunQueue(2 ** 22 + 12_345)).toBeUndefined();
  });

  it('counts a thread that started in between from 0, one that reused a tid from 0, and one that ended not at all', () => {
    const before = reading({ '10': 1, '11': 0.5, '12': 2, '13': 3 });
    // 11 grew, 12 ended, 14 is new, 13's count went down: a new thread with a reused tid.
    const after = reading({ '10': 1.25, '11': 1, '14': 0.25, '13': 0.125 });
    expect(runQueueWaitSince(before, after)).toEqual({ mainThreadSeconds: 0.25, allThreadsSeconds: 0.25 + 0.5 + 0.25 + 0.125 });
    expect(runQueueWaitSince(undefined, after)).toEqual({ mainThreadSeconds: 0, allThreadsSeconds: 0 });
  });

  it('sums each part over its processes between two readings; a process gone by the second counts 0', () => {
    const before = new Map([
      [10, reading({ '10': 1, '100': 1 })],
      [11, reading({ '11': 0.5 })],
      [20, reading({ '20': 3 })],
    ]);
    const after = new Map([
      [10, reading({ '10': 1.25, '100': 1.25 })],
      [11, reading({ '11': 1, '110': 0.5 })],
      [20, undefined],
    ]);
    expect(runQueueWaitOfParts({ workers: [10, 11], simulator: [20] }, before, after)).toEqual({
      workers: { processes: 2, mainThreadSeconds: 0.75, allThreadsSeconds: 1.5 },
      simulator: { processes: 1, mainThreadSeconds: 0, allThreadsSeconds: 0 },
    });
  });

  it('reads every pid of the parts once', async () => {
    const readings = await readRunQueueWaits({ driver: [process.pid], also: [process.pid] });
    expect([...readings.keys()]).toEqual([process.pid]);
    expect(readings.get(process.pid)?.mainThreadSeconds).toBeGreaterThanOrEqual(0);
  });

  it("gives a part's main-thread share of a run as the mean over its processes; none without processes", () => {
    expect(mainThreadShare({ processes: 2, mainThreadSeconds: 1, allThreadsSeconds: 3 }, 2_000)).toBe(0.25);
    expect(mainThreadShare({ processes: 0, mainThreadSeconds: 0, allThreadsSeconds: 0 }, 2_000)).toBeUndefined();
    expect(mainThreadShare(undefined, 2_000)).toBeUndefined();
  });
});
