import { describe, expect, it } from 'vitest';
import { parseRestoreBenchArgs } from './restore-options.js';
import { hookLags, hookLagsByEndSecond, RESTORE_SCENARIO } from './restore-run.js';

describe('parseRestoreBenchArgs', () => {
  it("defaults to the issue's scenario: 20 × 1,000 plain objects, 200 pods, 2 workers, cap 100, 10 ms", () => {
    const r = parseRestoreBenchArgs(['--scenario', 'restore']);
    if (r.ok !== true) throw new Error('expected ok');
    expect(r.options.scenario).toEqual(RESTORE_SCENARIO);
    expect(RESTORE_SCENARIO.plainNamespaces * (RESTORE_SCENARIO.secretsPerNamespace + RESTORE_SCENARIO.configMapsPerNamespace)).toBe(
      20_000,
    );
    expect(RESTORE_SCENARIO).toMatchObject({ pods: 200, workers: 2, maxInFlight: 100, latencyMs: 10 });
    expect(r.options.markdown).toBeUndefined(); // printed only: BENCHMARKS.md is never appended to
    const md = parseRestoreBenchArgs(['--scenario', 'restore', '--markdown', '/tmp/r.md']);
    expect(md.ok === true && md.options.markdown).toBe('/tmp/r.md');
  });

  it('applies flags and reports every problem at once, naming the flag', () => {
    const ok = parseRestoreBenchArgs(['--', '--scenario', 'restore', '--pods', '10', '--bytes', '8KiB', '--no-markdown']);
    if (ok.ok !== true) throw new Error('expected ok');
    expect(ok.options.scenario).toMatchObject({ pods: 10, bytesPerVolume: 8192 });
    expect(ok.options.markdown).toBeUndefined();
    expect(ok.options.part).toBe('all');
    const pods = parseRestoreBenchArgs(['--scenario', 'restore', '--restore-part', 'pods']);
    expect(pods.ok === true && pods.options.part).toBe('pods');
    const bad = parseRestoreBenchArgs([
      '--scenario',
      'restore',
      '--pods',
      '0',
      '--max-inflight',
      'x',
      '--plain-namespaces',
      '1',
      '--serial-namespaces',
      '2',
      '--frobnicate',
      '--restore-part',
      'plain',
    ]);
    if (bad.ok !== false) throw new Error('expected problems');
    expect(bad.problems).toEqual([
      '--pods needs an integer >= 1, got 0',
      '--max-inflight needs an integer >= 1, got x',
      'unknown option --frobnicate (for --scenario restore)',
      '--restore-part needs all or pods, got plain',
      '--serial-namespaces (2) must not exceed --plain-namespaces (1)',
    ]);
  });
});

describe('hookLags', () => {
  it("measures each hook from the last of its pod's PVR completions", () => {
    const pvr = (pod: string, done: string) =>
      ({ spec: { pod: { namespace: 'ns', name: pod } }, status: { completionTimestamp: done } }) as never;
    const lags = hookLags(
      [pvr('a', '2026-01-01T00:00:01.000Z'), pvr('a', '2026-01-01T00:00:02.000Z'), pvr('b', '2026-01-01T00:00:03.000Z')],
      [
        { namespace: 'ns', pod: 'a', startedAt: '2026-01-01T00:00:02.120Z' },
        { namespace: 'ns', pod: 'b', startedAt: '2026-01-01T00:00:03.040Z' },
        { namespace: 'ns', pod: 'c', startedAt: '2026-01-01T00:00:09.000Z' },
      ],
    );
    expect(lags).toEqual([120, 40]);
  });
});

describe('hookLagsByEndSecond', () => {
  it("groups the lags by the second, from the first PVR end, in which each pod's last PVR ended", () => {
    const pvr = (pod: string, done: string) =>
      ({ spec: { pod: { namespace: 'ns', name: pod } }, status: { completionTimestamp: done } }) as never;
    const exec = (pod: string, startedAt: string) => ({ namespace: 'ns', pod, startedAt });
    const groups = hookLagsByEndSecond(
      [pvr('a', '2026-01-01T00:00:01.000Z'), pvr('b', '2026-01-01T00:00:01.900Z'), pvr('c', '2026-01-01T00:00:03.500Z')],
      [exec('a', '2026-01-01T00:00:01.500Z'), exec('b', '2026-01-01T00:00:02.000Z'), exec('c', '2026-01-01T00:00:03.540Z')],
    );
    expect(groups.map((g) => [g.second, g.lagMs.count, g.lagMs.max])).toEqual([
      [0, 2, 500],
      [2, 1, 40],
    ]);
    expect(hookLagsByEndSecond([], [])).toEqual([]);
  });
});
