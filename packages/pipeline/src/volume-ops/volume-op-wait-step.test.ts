import { describe, expect, it } from 'vitest';
import { DEFAULT_PIPELINE_CONFIG } from '../deps.js';
import type { PromotingInformerHub } from '../informers/promoting-informer-hub.js';
import { stepVolumeOpWait, type VolumeOpTracker, watchProgressChanged } from './volume-op-wait-step.js';

interface Op {
  name: string;
  phase: string;
}

const NOW = 1_000_000;
const config = DEFAULT_PIPELINE_CONFIG;

/** A tracker over plain objects: what a look records is not the point here. */
function tracker(op: Op | undefined, gets: string[]): VolumeOpTracker<Op, { phase?: string }> {
  return {
    label: 'op',
    readContext: async () => ({ cancelRequested: false, previous: { phase: 'InProgress' } }),
    isSettled: (p) => p?.phase === 'Completed',
    get: async (name) => {
      gets.push(name);
      return op;
    },
    isTerminal: (o) => o.phase === 'Completed',
    phaseOf: (o) => o.phase,
    cancelAsked: () => false,
    requestCancel: async () => undefined,
    recordSeen: async () => undefined,
    recordMissing: async () => undefined,
    recordCancelAsked: async () => undefined,
    recordGaveUp: async () => undefined,
  };
}

/** The two things a look asks of the informer hub: its cache, and whether it is healthy. */
function hubWith(op: Op | undefined, healthy = true): PromotingInformerHub<Op> {
  return { cached: () => (healthy ? op : undefined), healthy: () => healthy } as unknown as PromotingInformerHub<Op>;
}

const step = (
  t: VolumeOpTracker<Op, { phase?: string }>,
  hub: PromotingInformerHub<Op> | undefined,
  lastGetAt: number,
  deadlineAt = NOW + 3_600_000,
  promotedByHub = true,
) =>
  stepVolumeOpWait(
    { clock: { now: () => NOW }, config } as never,
    t,
    hub,
    { runName: 'b1', opName: 'op-1', deadlineAt, promotedByHub },
    { polls: 3, lastGetAt },
  );

describe('stepVolumeOpWait: how long a watcher parks', () => {
  const running = { name: 'op-1', phase: 'InProgress' };

  it('with a healthy informer, sleeps until its next real GET is due (the informer promotes it sooner), poll state untouched', async () => {
    const gets: string[] = [];
    const res = await step(tracker(running, gets), hubWith(running), NOW - 1_000);
    expect(gets).toEqual([]); // the cache answered
    expect(res).toEqual({ kind: 'wait', delayMs: config.pvbRealReadEveryMs - 1_000, progress: { polls: 3, lastGetAt: NOW - 1_000 } });
    if (res.kind !== 'wait') throw new Error('unreachable');
    // Nothing to rewrite in the job's data before parking again.
    expect(watchProgressChanged({ 'op-1': { polls: 3, lastGetAt: NOW - 1_000 } }, { 'op-1': res.progress })).toBe(false);
  });

  it('with a healthy informer, a real GET that was due (still running) parks until the next one is due, not the poll base: one wake per real read', async () => {
    const gets: string[] = [];
    const res = await step(tracker(running, gets), hubWith(running), NOW - config.pvbRealReadEveryMs);
    expect(gets).toEqual(['op-1']);
    expect(res).toEqual({ kind: 'wait', delayMs: config.pvbRealReadEveryMs, progress: { polls: 3, lastGetAt: NOW } });
  });

  it('an operation the cache does not hold yet (just created) is read and polled from the base, counting the poll', async () => {
    const gets: string[] = [];
    const res = await step(tracker(running, gets), hubWith(undefined), NOW - 1_000);
    expect(gets).toEqual(['op-1']);
    expect(res).toMatchObject({ kind: 'wait', progress: { polls: 4, lastGetAt: NOW } });
    if (res.kind !== 'wait') throw new Error('unreachable');
    expect(res.delayMs).toBeLessThanOrEqual(config.pvbPollMaxMs);
  });

  it('waits at least the poll cap when a GET is almost due, and wakes at the deadline', async () => {
    const late = await step(tracker(running, []), hubWith(running), NOW - config.pvbRealReadEveryMs + 10);
    expect(late).toMatchObject({ kind: 'wait', delayMs: config.pvbPollMaxMs });
    const deadline = await step(tracker(running, []), hubWith(running), NOW - 1_000, NOW + 2_000);
    expect(deadline).toMatchObject({ kind: 'wait', delayMs: 2_000 });
  });

  it('a watcher no hub promotes (a legacy pvb-watch or pvr-watch job) polls at the cap, counting the poll', async () => {
    const res = await step(tracker(running, []), hubWith(running), NOW - 1_000, NOW + 3_600_000, false);
    expect(res).toMatchObject({ kind: 'wait', progress: { polls: 4, lastGetAt: NOW - 1_000 } });
    if (res.kind !== 'wait') throw new Error('unreachable');
    expect(res.delayMs).toBeLessThanOrEqual(config.pvbPollMaxMs);
  });

  it('without a usable cache, GETs and backs off from the base, counting the poll', async () => {
    const gets: string[] = [];
    const res = await step(tracker(running, gets), hubWith(running, false), NOW - 1_000);
    expect(gets).toEqual(['op-1']);
    expect(res).toMatchObject({ kind: 'wait', progress: { polls: 4, lastGetAt: NOW } });
    if (res.kind !== 'wait') throw new Error('unreachable');
    expect(res.delayMs).toBeLessThanOrEqual(config.pvbPollMaxMs);
    expect(watchProgressChanged({ 'op-1': { polls: 3, lastGetAt: NOW - 1_000 } }, { 'op-1': res.progress })).toBe(true);
  });
});

describe('stepVolumeOpWait: an end found in the cache', () => {
  const completed = { name: 'op-1', phase: 'Completed' };

  it('is taken from the cache even when a real GET is due (terminal is final): no API round trip before the hooks', async () => {
    // A restore-hooks job starts parked: its first look finds every GET due (lastGetAt 0).
    const gets: string[] = [];
    const res = await step(tracker(completed, gets), hubWith(completed), 0);
    expect(gets).toEqual([]);
    expect(res).toMatchObject({ kind: 'done', result: { phase: 'Completed' } });
  });

  it('a running operation is still read from the API server when its GET is due (a cache may have missed its end)', async () => {
    const gets: string[] = [];
    const res = await step(tracker(completed, gets), hubWith({ name: 'op-1', phase: 'InProgress' }), 0);
    expect(gets).toEqual(['op-1']);
    expect(res).toMatchObject({ kind: 'done', result: { phase: 'Completed' } });
  });

  it('with recordEndLater, its record is handed back unconfirmed: a failed write rejects there (the job fails), never unhandled', async () => {
    const failing = { ...tracker(completed, []), recordSeen: async () => Promise.reject(new Error('redis down')) };
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const res = await stepVolumeOpWait(
        { clock: { now: () => NOW }, config } as never,
        failing,
        hubWith(completed),
        { runName: 'b1', opName: 'op-1', deadlineAt: NOW + 3_600_000, promotedByHub: true, recordEndLater: true },
        { polls: 0, lastGetAt: 0 },
      );
      if (res.kind !== 'done') throw new Error('expected done');
      await new Promise((resolve) => setTimeout(resolve, 20)); // long enough for Node to report an unhandled rejection
      expect(unhandled).toEqual([]);
      await expect(res.recording).rejects.toThrow('redis down');
      // Without it, the look itself fails (and its caller retries the look later).
      await expect(step(failing, hubWith(completed), 0)).rejects.toThrow('redis down');
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
