import { describe, expect, it } from 'vitest';
import { podsRestores, renderRestoreMarkdown, restoreTargets } from './restore-main.js';
import { parseRestoreBenchArgs } from './restore-options.js';
import { RESTORE_SCENARIO, type RestoreBenchResult, type RestorePhaseResult } from './restore-run.js';
import { distribution } from './stats.js';

/** A pods restore whose hooks lagged by `lags` (ms). */
function podsRun(name: string, lags: number[]): RestorePhaseResult {
  return {
    name,
    phase: 'Completed',
    items: 2 * lags.length,
    itemsRestored: 2 * lags.length,
    itemsFailed: 0,
    makespanMs: 3_000,
    objectsPerSecond: (2 * lags.length) / 3,
    maxInFlightAtApiServer: 40,
    apiRequests: 1_000,
    cpuSeconds: { workers: 2, simulator: 1, redis: 0.2, driver: 0.2, nodeAgents: 2.5, total: 5.9 },
    pvrs: { total: lags.length, completed: lags.length },
    hookExecs: lags.length,
    hookLagSamplesMs: lags,
    hookLagMs: distribution(lags),
    problems: [],
  };
}

describe('--pods-repeat: the hook lag pooled over several pods restores', () => {
  it('is parsed, at least 1', () => {
    const ok = parseRestoreBenchArgs(['--scenario', 'restore', '--pods-repeat', '3']);
    expect(ok.ok === true && ok.options.scenario.podsRepeat).toBe(3);
    expect(RESTORE_SCENARIO.podsRepeat).toBe(1);
    const bad = parseRestoreBenchArgs(['--scenario', 'restore', '--pods-repeat', '0']);
    expect(bad.ok === false && bad.problems).toEqual(['--pods-repeat needs an integer >= 1, got 0']);
  });

  it('judges the p99 target on the pooled lags, and reports each restore and the pool', () => {
    // 100 hooks each: one restore's p99 is its second-slowest hook; pooled, the slow pair of one run counts less.
    const fast = Array.from({ length: 100 }, (_, i) => 100 + i);
    const slowTail = [...fast.slice(0, 98), 900, 950];
    const first = podsRun('par-pods', slowTail);
    const again = [podsRun('par-pods-2', fast), podsRun('par-pods-3', fast)];
    const result: RestoreBenchResult = {
      scenario: { ...RESTORE_SCENARIO, podsRepeat: 3 },
      backup: { name: 'bench-source', phase: 'Completed', makespanMs: 1_000, items: 600 },
      modes: [
        {
          mode: 'parallel',
          maxInFlight: 100,
          shares: { jobsAtOnce: 10, perJob: 10 },
          pods: first,
          podsAgain: again,
          podsHookLagPooledMs: distribution([...slowTail, ...fast, ...fast]),
        },
      ],
      problems: [],
    };
    expect(podsRestores(result.modes[0]!).map(([label]) => label)).toEqual([
      'pods + volumes + hooks (1 of 3)',
      'pods + volumes + hooks (2 of 3)',
      'pods + volumes + hooks (3 of 3)',
    ]);
    expect(first.hookLagMs?.p99).toBeGreaterThan(250);
    const t = restoreTargets(result);
    expect(t?.hookLagP99Ms.value).toBe(result.modes[0]!.podsHookLagPooledMs!.p99);
    expect(t?.hookLagP99Ms.met).toBe(true);
    const md = renderRestoreMarkdown(result, {
      command: 'pnpm bench --scenario restore --pods-repeat 3',
      startedAt: new Date(0).toISOString(),
      machine: 'm.',
    });
    expect(md).toContain('| pods + volumes + hooks (3 of 3) | parallel |');
    expect(md).toContain('Hook lag pooled over the 3 pods restores (parallel, 300 hooks)');
    expect(md).toMatch(
      /post-restore hook lag p99 ≤ 250 ms \(parallel, pooled over 3 restores; each alone: \d+ \/ \d+ \/ \d+ ms\): \d+ ms — met/,
    );
  });
});

describe('the run-queue table', () => {
  it("shows each part's main-thread wait as a share of the makespan (mean per process) and all threads' seconds", () => {
    const pods = {
      ...podsRun('par-pods', [100, 200]),
      makespanMs: 2_000,
      runQueueWaitSeconds: {
        workers: { processes: 2, mainThreadSeconds: 1.6, allThreadsSeconds: 3.25 },
        simulator: { processes: 1, mainThreadSeconds: 0.5, allThreadsSeconds: 0.75 },
        redis: { processes: 1, mainThreadSeconds: 0.2, allThreadsSeconds: 0.2 },
        driver: { processes: 1, mainThreadSeconds: 0, allThreadsSeconds: 0.01 },
        nodeAgents: { processes: 0, mainThreadSeconds: 0, allThreadsSeconds: 0 },
      },
    };
    const md = renderRestoreMarkdown(
      {
        scenario: RESTORE_SCENARIO,
        backup: { name: 'bench-source', phase: 'Completed', makespanMs: 1_000, items: 4 },
        modes: [{ mode: 'parallel', maxInFlight: 100, shares: { jobsAtOnce: 10, perJob: 10 }, pods }],
        problems: [],
      },
      { command: 'pnpm bench --scenario restore', startedAt: new Date(0).toISOString(), machine: 'm.' },
    );
    // workers: 1.6 s over 2 processes in 2 s = 40 %; a part without processes shows a dash.
    expect(md).toContain('| pods + volumes + hooks | parallel | 2000 | 40 % (3.25 s) | 25 % (0.75 s) | 10 % (0.20 s) | 0 % (0.01 s) | – |');
  });
});
