import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { readRunQueueWaits, runQueueWait, runQueueWaitOfParts, runQueueWaitSince } from './run-queue.js';

describe('run-queue wait (schedstat)', () => {
  it("reads this process's main thread and all its threads; nothing for a pid that is gone", async () => {
    // A second thread that lives through the reading: its count is in allThreads, not in mainThread.
    const idleThread = new Worker('setInterval(() => {}, 1000)', { eval: true });
    await new Promise((r) => idleThread.once('online', r));
    try {
      const w = await runQueueWait(process.pid);
      expect(w).toBeDefined();
      expect(w!.mainThreadSeconds).toBeGreaterThanOrEqual(0);
      expect(w!.allThreadsSeconds).toBeGreaterThanOrEqual(w!.mainThreadSeconds);
    } finally {
      await idleThread.terminate();
    }
    expect(await runQueueWait(2 ** 22 + 12_345)).toBeUndefined();
  });

  it('sums each part over its processes between two readings; a process gone by the second counts 0', () => {
    const before = new Map([
      [10, { mainThreadSeconds: 1, allThreadsSeconds: 2 }],
      [11, { mainThreadSeconds: 0.5, allThreadsSeconds: 0.5 }],
      [20, { mainThreadSeconds: 3, allThreadsSeconds: 4 }],
    ]);
    const after = new Map([
      [10, { mainThreadSeconds: 1.25, allThreadsSeconds: 2.5 }],
      [11, { mainThreadSeconds: 1, allThreadsSeconds: 1.5 }],
      [20, undefined],
    ]);
    expect(runQueueWaitOfParts({ workers: [10, 11], simulator: [20] }, before, after)).toEqual({
      workers: { processes: 2, mainThreadSeconds: 0.75, allThreadsSeconds: 1.5 },
      simulator: { processes: 1, mainThreadSeconds: 0, allThreadsSeconds: 0 },
    });
    expect(runQueueWaitSince(undefined, { mainThreadSeconds: 1, allThreadsSeconds: 1 })).toEqual({
      mainThreadSeconds: 0,
      allThreadsSeconds: 0,
    });
  });

  it('reads every pid of the parts once', async () => {
    const readings = await readRunQueueWaits({ driver: [process.pid], also: [process.pid] });
    expect([...readings.keys()]).toEqual([process.pid]);
    expect(readings.get(process.pid)?.allThreadsSeconds).toBeGreaterThanOrEqual(0);
  });
});
