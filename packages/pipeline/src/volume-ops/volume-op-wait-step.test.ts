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
