import { describe, expect, it } from 'vitest';
import { DEFAULT_PIPELINE_CONFIG } from '../deps.js';
import type { PromotingInformerHub } from '../informers/promoting-informer-hub.js';
import type { VolumeOpTracker } from './volume-op-wait-step.js';
import { afterEndRecords, watchVolumeOps } from './watch-volume-ops.js';

interface Op {
  name: string;
  phase: string;
}

const NOW = 1_000_000;

/** Ops by name in a healthy cache; recording an end fails for the names in `failing`. */
function setUp(ops: Op[], failing: string[]) {
  const byName = new Map(ops.map((op) => [op.name, op]));
  const warnings: string[] = [];
  const tracker: VolumeOpTracker<Op, { phase?: string }> = {
    label: 'op',
    readContext: async () => ({ cancelRequested: false, previous: undefined }),
    isSettled: (p) => p?.phase === 'Completed',
    get: async (name) => byName.get(name),
    isTerminal: (o) => o.phase === 'Completed',
    phaseOf: (o) => o.phase,
    cancelAsked: () => false,
    requestCancel: async () => undefined,
    recordSeen: async (_run, op) => (failing.includes(op.name) ? Promise.reject(new Error('redis down')) : undefined),
    recordMissing: async () => undefined,
    recordCancelAsked: async () => undefined,
    recordGaveUp: async () => undefined,
  };
  const hub = { cached: (name: string) => byName.get(name), healthy: () => true } as unknown as PromotingInformerHub<Op>;
  const deps = {
    clock: { now: () => NOW },
    config: DEFAULT_PIPELINE_CONFIG,
    logger: { warn: (_o: unknown, msg: string) => warnings.push(msg) },
  } as never;
  const watch = () =>
    watchVolumeOps(deps, tracker, hub, {
      runName: 'b1',
      ops: ops.map((op) => ({ name: op.name, previous: undefined })),
      cancelRequested: false,
      deadlineAt: NOW + 3_600_000,
      progress: {},
    });
  return { watch, warnings };
}

describe('watchVolumeOps: the records of the ends it saw', () => {
  it('all ended: settled, their records handed back unconfirmed (a failed one rejects there, for the job to fail)', async () => {
    const { watch } = setUp(
      [
        { name: 'a', phase: 'Completed' },
        { name: 'b', phase: 'Completed' },
      ],
      ['b'],
    );
    const res = await watch();
    if (!res.settled) throw new Error('expected settled');
    expect([...res.ended.keys()].sort()).toEqual(['a', 'b']);
    await expect(res.recording).rejects.toThrow('redis down');
  });

  it('one still running: the job re-parks, and an end whose record failed is only warned about (it is looked at again at the next wake)', async () => {
    const { watch, warnings } = setUp(
      [
        { name: 'a', phase: 'Completed' },
        { name: 'b', phase: 'InProgress' },
      ],
      ['a'],
    );
    const res = await watch();
    expect(res).toMatchObject({ settled: false, open: 'b' });
    expect(warnings).toEqual(['op end not recorded; looking again later']);
  });
});

describe('afterEndRecords: the hooks run while the end records are on their way', () => {
  const failed = (msg: string) => {
    const p = Promise.reject(new Error(msg));
    p.catch(() => {}); // as watchVolumeOps hands it back
    return p;
  };

  it('returns what the hooks returned once the records are confirmed', async () => {
    await expect(afterEndRecords(Promise.resolve(), async () => 'ran')).resolves.toBe('ran');
  });

  it('a failed record fails the job when the hooks succeeded', async () => {
    await expect(afterEndRecords(failed('redis down'), async () => 'ran')).rejects.toThrow('redis down');
  });

  it("the hooks' own error (or a re-park's DelayedError) stands over a failed record", async () => {
    await expect(
      afterEndRecords(failed('redis down'), async () => {
        throw new Error('parked');
      }),
    ).rejects.toThrow('parked');
  });
});
