import type { ExecRecord } from '@stowage/kube-sim';
import { describe, expect, it } from 'vitest';
import { freezeTargets, pooledOf, renderFreezeMarkdown } from './freeze-main.js';
import { parseFreezeBenchArgs } from './freeze-options.js';
import {
  FREEZE_COMMAND,
  FREEZE_SCENARIO,
  type FreezeRunResult,
  freezeFixture,
  freezeSpec,
  freezeWindows,
  roundOrder,
  spread,
  THAW_COMMAND,
} from './freeze-run.js';
import { machineInfo } from './report.js';

const T0 = Date.parse('2026-12-06T12:00:00.000Z');
const iso = (ms: number) => new Date(T0 + ms).toISOString();
let id = 0;
function exec(pod: string, command: string[], start: number, end: number | null, namespace = 'freeze-0'): ExecRecord {
  return {
    id: id++,
    namespace,
    pod,
    container: 'app',
    command,
    startedAt: iso(start),
    endedAt: end === null ? null : iso(end),
    exitCode: end === null ? null : 0,
    aborted: false,
    protocol: 'v5.channel.k8s.io',
  };
}

function run(mode: FreezeRunResult['mode'], totalMs: number, freezes: number[]): FreezeRunResult {
  const pods = freezes.map((f, i) => ({ pod: `app-${i}`, preStartMs: 0, preEndMs: 100, postStartMs: f - 20, postEndMs: f, freezeMs: f }));
  return {
    mode,
    round: 0,
    orderInRound: mode === 'fs-backup' ? 1 : 2,
    phase: 'Completed',
    startedAt: iso(0),
    loadBefore: 1,
    loadAfter: 2,
    totalMs,
    freezeMs: spread(freezes),
    pods,
    copies: [],
    copyMs: spread([]),
    uploadMs: mode === 'snapshot' ? spread([]) : undefined,
    postHookAfterCopyMs: spread([]),
    bytes: 0,
    cpuSeconds: { workers: 1, nodeAgents: 2, simulator: 3, redis: 0.1, driver: 0.2, total: 6.3 },
    cutMode: 'copy',
    dataFilesystem: 'ext2/ext3',
    problems: [],
  };
}

describe('pnpm bench --scenario freeze: the freeze window', () => {
  it("is each pod's first pre hook start → its last post hook end, from the exec log of the measured namespace", () => {
    const execs = [
      exec('app-0', FREEZE_COMMAND, 0, 100),
      exec('app-0', THAW_COMMAND, 900, 920),
      exec('app-1', FREEZE_COMMAND, 50, 150),
      // a retried post hook: the last one ends the freeze
      exec('app-1', THAW_COMMAND, 2_000, 2_020),
      exec('app-1', THAW_COMMAND, 3_000, 3_020),
      // another namespace (the warm-up) and another command do not count
      exec('app-0', FREEZE_COMMAND, 0, 100, 'warmup-0'),
      exec('app-0', ['/bin/true'], 0, 5_000),
    ];
    const { pods, missing } = freezeWindows(execs, { namespace: 'freeze-0', originMs: T0, pre: FREEZE_COMMAND, post: THAW_COMMAND });
    expect(missing).toEqual([]);
    expect(pods).toEqual([
      { pod: 'app-0', preStartMs: 0, preEndMs: 100, postStartMs: 900, postEndMs: 920, freezeMs: 920 },
      { pod: 'app-1', preStartMs: 50, preEndMs: 150, postStartMs: 3_000, postEndMs: 3_020, freezeMs: 2_970 },
    ]);
  });

  it('names a pod without a post hook, or with a hook that never ended, instead of leaving it out', () => {
    const execs = [
      exec('app-0', FREEZE_COMMAND, 0, 100),
      exec('app-1', FREEZE_COMMAND, 0, 100),
      exec('app-1', THAW_COMMAND, 500, null),
      exec('app-2', THAW_COMMAND, 500, 520),
    ];
    const { pods, missing } = freezeWindows(execs, { namespace: 'freeze-0', originMs: T0, pre: FREEZE_COMMAND, post: THAW_COMMAND });
    expect(pods).toEqual([]);
    expect(missing).toEqual(['freeze-0/app-0: no post hook', 'freeze-0/app-1: a hook that never ended', 'freeze-0/app-2: no pre hook']);
  });

  it('alternates the order of the modes from one round to the next', () => {
    expect(roundOrder(0, ['fs-backup', 'snapshot'])).toEqual(['fs-backup', 'snapshot']);
    expect(roundOrder(1, ['fs-backup', 'snapshot'])).toEqual(['snapshot', 'fs-backup']);
    expect(roundOrder(1, ['snapshot'])).toEqual(['snapshot']);
  });

  it('judges the targets on the freezes pooled over the runs and the median totals', () => {
    const runs = [
      run('fs-backup', 40_000, [30_000, 32_000, 34_000]),
      run('snapshot', 48_000, [2_000, 2_500, 3_000]),
      run('fs-backup', 44_000, [36_000, 38_000, 40_000]),
      run('snapshot', 60_000, [4_000, 4_500, 5_000]),
    ];
    const pooled = pooledOf(runs);
    expect(pooled['fs-backup']).toEqual({ freezeMs: { count: 6, p50: 34_000, p95: 40_000, max: 40_000 }, medianTotalMs: 42_000 });
    expect(pooled.snapshot?.freezeMs.p50).toBe(3_000);
    const targets = freezeTargets(pooled);
    expect(targets.freezeP50Ratio.value).toBeCloseTo(3_000 / 34_000);
    expect(targets.freezeP50Ratio.met).toBe(true);
    expect(targets.totalRatio.value).toBeCloseTo(54_000 / 42_000);
    expect(targets.totalRatio.met).toBe(true);
    expect(freezeTargets(pooledOf(runs.filter((r) => r.mode === 'snapshot'))).freezeP50Ratio).toEqual({
      value: null,
      target: 0.1,
      met: null,
    });
    const text = renderFreezeMarkdown({
      command: 'pnpm bench --scenario freeze',
      startedAt: iso(0),
      machine: machineInfo([1, 1, 1]),
      scenario: FREEZE_SCENARIO,
      runs,
      pooled,
      targets,
    });
    expect(text).toContain('pnpm bench --scenario freeze');
    expect(text).toContain("The simulator's cut: **copy (ext2/ext3)**");
    expect(text).toContain('| CSI snapshot + data mover (6 pods) | 3.00 / 5.00 / 5.00 | 54.00 |');
    expect(text).toMatch(/snapshot p50 freeze ÷ fs-backup's = 0\.088 \(≤ 0\.1\): met/);
  });
});

describe('the freeze scenario set-up', () => {
  it('parses its options, full size by default, every problem at once', () => {
    const ok = parseFreezeBenchArgs(['--scenario', 'freeze', '--pods', '2', '--bytes', '1MiB', '--modes', 'snapshot', '--rounds', '1']);
    expect(ok.ok === true && ok.options.scenario).toMatchObject({ pods: 2, bytesPerVolume: 1024 * 1024, modes: ['snapshot'], rounds: 1 });
    expect(FREEZE_SCENARIO).toMatchObject({ pods: 20, bytesPerVolume: 256 * 1024 * 1024, modes: ['fs-backup', 'snapshot'] });
    const bad = parseFreezeBenchArgs(['--scenario', 'freeze', '--pods', '0', '--modes', 'inline', '--bandwidth', 'fast', '--blocks']);
    expect(bad.ok === false && bad.problems).toEqual([
      '--pods needs an integer >= 1, got 0',
      '--modes takes fs-backup and/or snapshot, got inline',
      '--bandwidth needs a byte rate like 64MiB/s, got fast',
      'unknown option --blocks (for --scenario freeze)',
    ]);
    const files = parseFreezeBenchArgs(['--', '--json', 'f.json', '--markdown', 'f.md', '--keep-logs', '--scenario', 'freeze']);
    expect(files.ok === true && files.options).toMatchObject({ json: 'f.json', markdown: 'f.md', keepLogs: true });
    expect(parseFreezeBenchArgs(['--markdown', '--keep-logs'])).toEqual({ ok: false, problems: ['--markdown needs a file name'] });
    expect(parseFreezeBenchArgs(['--no-markdown'])).toEqual({
      ok: false,
      problems: ['unknown option --no-markdown (for --scenario freeze)'],
    });
    expect(parseFreezeBenchArgs(['--pods', 'x', '--help'])).toEqual({ ok: 'help' });
  });

  it('gives the cluster a default VolumeSnapshotClass and the snapshot and DataUpload CRDs; the snapshot mode moves the data', () => {
    const fixture = freezeFixture({ ...FREEZE_SCENARIO, pods: 2, nodes: 2, bytesPerVolume: 4096, readyDelayMs: 50 });
    const classes = fixture.objects.filter((o) => (o as { kind?: string }).kind === 'VolumeSnapshotClass');
    expect(classes).toEqual([
      expect.objectContaining({
        driver: 'sim.csi.stowage.dev',
        metadata: expect.objectContaining({ annotations: { 'snapshot.storage.kubernetes.io/is-default-class': 'true' } }),
        parameters: { 'sim.stowage.dev/ready-delay-ms': '50' },
      }),
    ]);
    expect(fixture.include?.some((p) => p.endsWith('snapshot.storage.k8s.io.yaml'))).toBe(true);
    expect(fixture.include?.some((p) => p.endsWith('crd-datauploads.yaml'))).toBe(true);
    const pods = fixture.objects.filter((o) => (o as { kind?: string }).kind === 'Pod') as { metadata: { namespace: string } }[];
    expect(pods.map((p) => p.metadata.namespace).sort()).toEqual(['freeze-0', 'freeze-0', 'warmup-0', 'warmup-0']);
    expect(freezeSpec('snapshot')).toMatchObject({ defaultVolumesToFsBackup: false, snapshotVolumes: true, snapshotMoveData: true });
    expect(freezeSpec('fs-backup')).toEqual({ defaultVolumesToFsBackup: true });
  });
});
