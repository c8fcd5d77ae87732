import { describe, expect, it } from 'vitest';
import { TokenBucket } from './token-bucket.js';

function fakeClock() {
  let nowMs = 0;
  const slept: number[] = [];
  return {
    now: () => nowMs,
    sleep: async (ms: number) => {
      slept.push(ms);
      nowMs += ms;
    },
    advance: (ms: number) => {
      nowMs += ms;
    },
    slept,
  };
}

describe('TokenBucket', () => {
  it('lets a burst through, then holds the long-run rate', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket(1000, { burstBytes: 1000, now: clock.now, sleep: clock.sleep });
    await bucket.take(1000);
    expect(clock.slept).toEqual([]);
    for (let i = 0; i < 10; i++) await bucket.take(500);
    // 5,000 bytes beyond the burst at 1,000 B/s take 5 s of sleeping in all.
    expect(clock.slept.reduce((a, b) => a + b, 0)).toBeCloseTo(5000, 5);
    expect(clock.now()).toBeCloseTo(5000, 5);
  });

  it('refills while idle, capped at the burst', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket(100, { burstBytes: 200, now: clock.now, sleep: clock.sleep });
    await bucket.take(200);
    clock.advance(60_000);
    await bucket.take(200);
    expect(clock.slept).toEqual([]);
    await bucket.take(100);
    expect(clock.slept).toEqual([1000]);
  });

  it('a read larger than the burst waits for its debt', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket(1_000_000, { now: clock.now, sleep: clock.sleep });
    await bucket.take(4_000_000);
    expect(clock.slept).toEqual([3000]);
  });

  it('stops waiting on abort', async () => {
    const bucket = new TokenBucket(1, { burstBytes: 1 });
    const controller = new AbortController();
    const waiting = bucket.take(10_000, controller.signal);
    controller.abort(new Error('stop'));
    await expect(waiting).rejects.toThrow('stop');
  });

  it('rejects a rate that is not positive', () => {
    expect(() => new TokenBucket(0)).toThrow(RangeError);
  });
});
