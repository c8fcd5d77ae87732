/*
 * The console's record refresher (ui/refresher.js), which the backup and restore pages read their
 * run through while its events come in: one read at a time, so an answer read before the run
 * ended can never land after the one read once its stream had ended (the page would show a phase
 * the run has left, for good: nothing asks again after the end).
 */
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

interface Refresher {
  soon(delayMs?: number): void;
  stop(): void;
}
type CreateRefresher = (opts: {
  load: () => Promise<string>;
  onValue: (value: string) => void;
  onError?: (err: unknown) => void;
}) => Refresher;

// A plain browser module (no types, no build step): loaded by its path.
const modulePath = fileURLToPath(new URL('../ui/refresher.js', import.meta.url));
const { createRefresher, mayRetry } = (await import(modulePath)) as {
  createRefresher: CreateRefresher;
  mayRetry: (err: unknown) => boolean;
};

/** Reads whose answers the test gives, in any order. */
function controlledReads() {
  const pending: Array<{ resolve: (v: string) => void; reject: (e: unknown) => void }> = [];
  let inFlight = 0;
  let most = 0;
  return {
    pending,
    get most() {
      return most;
    },
    load: () => {
      inFlight++;
      most = Math.max(most, inFlight);
      return new Promise<string>((resolve, reject) => {
        pending.push({
          resolve: (v) => {
            inFlight--;
            resolve(v);
          },
          reject: (e) => {
            inFlight--;
            reject(e);
          },
        });
      });
    },
  };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('the console refresher', () => {
  it('asked again while a read is out, reads once more after it: the last answer shown is the last read', async () => {
    const reads = controlledReads();
    const shown: string[] = [];
    const r = createRefresher({ load: reads.load, onValue: (v) => shown.push(v) });

    r.soon(500); // an event while the run is in progress
    await vi.advanceTimersByTimeAsync(500);
    expect(reads.pending).toHaveLength(1);
    // The stream ends while that read is out: the final read is asked for at once.
    r.soon(0);
    r.soon(500);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(reads.pending).toHaveLength(1); // not a second read beside it
    reads.pending[0]?.resolve('InProgress');
    await vi.advanceTimersByTimeAsync(0);
    expect(reads.pending).toHaveLength(2); // the final read, begun after the first was answered
    reads.pending[1]?.resolve('Completed');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(shown).toEqual(['InProgress', 'Completed']);
    expect(reads.most).toBe(1);
    expect(reads.pending).toHaveLength(2);
  });

  it('throttles: events while a read waits join it; an earlier ask moves the read forward', async () => {
    const reads = controlledReads();
    const r = createRefresher({ load: reads.load, onValue: () => undefined });
    r.soon(500);
    await vi.advanceTimersByTimeAsync(200);
    r.soon(500);
    r.soon(500);
    await vi.advanceTimersByTimeAsync(299);
    expect(reads.pending).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(reads.pending).toHaveLength(1);
    reads.pending[0]?.resolve('a');
    await vi.advanceTimersByTimeAsync(0);
    r.soon(500);
    r.soon(0);
    await vi.advanceTimersByTimeAsync(0);
    expect(reads.pending).toHaveLength(2);
  });

  it('reports a failed read; after stop() nothing is read or reported', async () => {
    const reads = controlledReads();
    const shown: string[] = [];
    const errors: unknown[] = [];
    const r = createRefresher({ load: reads.load, onValue: (v) => shown.push(v), onError: (e) => errors.push(e) });
    r.soon(0);
    await vi.advanceTimersByTimeAsync(0);
    reads.pending[0]?.reject(new Error('offline'));
    await vi.advanceTimersByTimeAsync(0);
    expect(errors).toHaveLength(1);
    r.soon(0);
    await vi.advanceTimersByTimeAsync(0);
    r.soon(0); // queued behind the read out
    r.stop();
    reads.pending[1]?.resolve('late');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(shown).toEqual([]);
    expect(reads.pending).toHaveLength(2);
  });

  it('retries a read that got no answer, a 5xx or a 429; not a refusal that stands', () => {
    expect(mayRetry(new TypeError('Failed to fetch'))).toBe(true);
    expect(mayRetry({ status: 503 })).toBe(true);
    expect(mayRetry({ status: 429 })).toBe(true);
    expect(mayRetry({ status: 404 })).toBe(false);
    expect(mayRetry({ status: 403 })).toBe(false);
  });
});
