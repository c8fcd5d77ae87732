/**
 * pnpm bench --scenario freeze (issue 47): the freeze window of fs-backup against CSI snapshots with
 * data movement, side by side (freeze-run.ts; options in freeze-options.ts).
 */
import { rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { FREEZE_USAGE, parseFreezeBenchArgs } from './freeze-options.js';
import {
  type FreezeMode,
  type FreezeRunResult,
  type FreezeScenario,
  roundOrder,
  runFreezeMode,
  type Spread,
  spread,
} from './freeze-run.js';
import { machineInfo, writeReport } from './report.js';

export interface FreezeTargets {
  /** The snapshot mode's p50 freeze ÷ fs-backup's (pooled over every run of each mode): ≤ 0.1. */
  freezeP50Ratio: { value: number | null; target: number; met: boolean | null };
  /** The snapshot mode's median total backup time ÷ fs-backup's: ≤ 1.3. */
  totalRatio: { value: number | null; target: number; met: boolean | null };
}

export interface FreezeBenchResult {
  command: string;
  startedAt: string;
  machine: ReturnType<typeof machineInfo>;
  scenario: FreezeScenario;
  runs: FreezeRunResult[];
  /** Each mode's freezes pooled over its runs, and its runs' median total. */
  pooled: Partial<Record<FreezeMode, { freezeMs: Spread; medianTotalMs: number | null }>>;
  targets: FreezeTargets;
}

const median = (values: readonly number[]): number | null => {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? null) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
};

export function pooledOf(runs: readonly FreezeRunResult[]): FreezeBenchResult['pooled'] {
  const out: FreezeBenchResult['pooled'] = {};
  for (const mode of ['fs-backup', 'snapshot'] as const) {
    const of = runs.filter((r) => r.mode === mode);
    if (of.length === 0) continue;
    out[mode] = {
      freezeMs: spread(of.flatMap((r) => r.pods.map((p) => p.freezeMs))),
      medianTotalMs: median(of.map((r) => r.totalMs)),
    };
  }
  return out;
}

export function freezeTargets(pooled: FreezeBenchResult['pooled']): FreezeTargets {
  const fs = pooled['fs-backup'];
  const snap = pooled.snapshot;
  const ratio = (a: number | null | undefined, b: number | null | undefined) => (a != null && b != null && b > 0 ? a / b : null);
  const freeze = ratio(snap?.freezeMs.p50, fs?.freezeMs.p50);
  const total = ratio(snap?.medianTotalMs, fs?.medianTotalMs);
  return {
    freezeP50Ratio: { value: freeze, target: 0.1, met: freeze === null ? null : freeze <= 0.1 },
    totalRatio: { value: total, target: 1.3, met: total === null ? null : total <= 1.3 },
  };
}

const s1 = (msValue: number | null | undefined) => (msValue == null ? '—' : (msValue / 1000).toFixed(2));
const spreadCell = (x: Spread | undefined) => (x && x.count > 0 ? `${s1(x.p50)} / ${s1(x.p95)} / ${s1(x.max)}` : '—');
const LABEL: Record<FreezeMode, string> = { 'fs-backup': 'fs-backup', snapshot: 'CSI snapshot + data mover' };

export function renderFreezeMarkdown(r: FreezeBenchResult): string {
  const s = r.scenario;
  const m = r.machine;
  const cut = [...new Set(r.runs.map((x) => `${x.cutMode} (${x.dataFilesystem})`))].join(', ') || '—';
  const lines = [
    `## Application-consistent backup: freeze window, ${r.startedAt.slice(0, 16).replace('T', ' ')}Z`,
    '',
    '```',
    r.command,
    '```',
    '',
    `${m.cpus} × ${m.cpuModel}, ${m.memoryGiB.toFixed(0)} GiB, Node ${m.node}; 1-minute load ${m.loadAverageStart.map((l) => l.toFixed(2)).join(' ')} at the start, ${m.loadAverageEnd.map((l) => l.toFixed(2)).join(' ')} at the end. The simulator's cut: **${cut}**.`,
    '',
    `${s.pods} pods × 1 volume of ${(s.bytesPerVolume / 2 ** 20).toFixed(s.bytesPerVolume >= 2 ** 20 ? 0 : 3)} MiB in ${s.filesPerVolume} files, a pre hook (${s.preHookMs} ms) and a post hook (${s.postHookMs} ms) each; ${s.nodes} nodes × loadConcurrency ${s.loadConcurrency}, bandwidth ${s.bandwidthBytesPerSec === undefined ? 'unlimited' : `${s.bandwidthBytesPerSec} B/s`}; ${s.workers} workers × ${s.blockConcurrency} block slots; snapshot ready ${s.readyDelayMs} ms after its cut. Every run a fresh environment with a warm-up backup in its mode first. Freeze = the pod's pre hook start → its post hook end (simulator exec log). Seconds, p50 / p95 / max.`,
    '',
    '| run | mode | phase | load before | total backup | freeze | copy (fs) / cut (snapshot) | post hook after copy / cut | upload (DataUpload) | GiB | CPU s: workers / agents / sim / redis / driver |',
    '|---|---|---|--:|--:|--:|--:|--:|--:|--:|---|',
  ];
  for (const x of r.runs) {
    const c = x.cpuSeconds;
    lines.push(
      `| ${x.round + 1}.${x.orderInRound} | ${LABEL[x.mode]} | ${x.phase} | ${x.loadBefore.toFixed(1)} | ${s1(x.totalMs)} | ${spreadCell(x.freezeMs)} | ${spreadCell(x.copyMs)} | ${spreadCell(x.postHookAfterCopyMs)} | ${spreadCell(x.uploadMs)} | ${(x.bytes / 2 ** 30).toFixed(2)} | ${[c.workers, c.nodeAgents, c.simulator, c.redis, c.driver].map((v) => v.toFixed(1)).join(' / ')} |`,
    );
  }
  lines.push('', '| pooled | freeze p50 / p95 / max | median total backup |', '|---|--:|--:|');
  for (const mode of ['fs-backup', 'snapshot'] as const) {
    const p = r.pooled[mode];
    if (p) lines.push(`| ${LABEL[mode]} (${p.freezeMs.count} pods) | ${spreadCell(p.freezeMs)} | ${s1(p.medianTotalMs)} |`);
  }
  const t = r.targets;
  const verdict = (met: boolean | null) => (met === null ? 'not measured' : met ? 'met' : '**missed**');
  lines.push(
    '',
    `Targets: snapshot p50 freeze ÷ fs-backup's = ${t.freezeP50Ratio.value === null ? '—' : t.freezeP50Ratio.value.toFixed(3)} (≤ ${t.freezeP50Ratio.target}): ${verdict(t.freezeP50Ratio.met)}; snapshot total ÷ fs-backup's = ${t.totalRatio.value === null ? '—' : t.totalRatio.value.toFixed(2)} (≤ ${t.totalRatio.target}): ${verdict(t.totalRatio.met)}.`,
  );
  const problems = r.runs.flatMap((x) => x.problems.map((p) => `- ${LABEL[x.mode]} ${x.round + 1}.${x.orderInRound}: ${p.slice(0, 300)}`));
  if (problems.length > 0) lines.push('', 'Problems:', ...problems.slice(0, 20));
  return `${lines.join('\n')}\n`;
}

export async function runFreezeMain(argv: readonly string[]): Promise<number> {
  const say = (line: string) => process.stderr.write(`${line}\n`);
  const parsed = parseFreezeBenchArgs(argv);
  if (parsed.ok === 'help') {
    process.stdout.write(`${FREEZE_USAGE}\n`);
    return 0;
  }
  if (parsed.ok === false) {
    say(
      `bench: ${parsed.problems.length} problem(s) with the options:\n${parsed.problems.map((p) => `  - ${p}`).join('\n')}\n\n${FREEZE_USAGE}`,
    );
    return 2;
  }
  const { scenario: s, json, markdown, keepLogs } = parsed.options;
  const startedAt = new Date();
  const loadStart = loadavg();
  const logDir = join(tmpdir(), `stowage-bench-logs-${startedAt.getTime()}`);
  say(`Stowage bench (freeze); load average ${loadStart.map((l) => l.toFixed(2)).join(' ')}`);
  const runs: FreezeRunResult[] = [];
  for (let round = 0; round < s.rounds; round++) {
    const order = roundOrder(round, s.modes);
    for (const [i, mode] of order.entries()) {
      say(`• round ${round + 1} of ${s.rounds}: ${mode}`);
      const r = await runFreezeMode(s, mode, { round, orderInRound: i + 1 }, logDir, keepLogs, say);
      runs.push(r);
      say(
        `  ${mode}: ${r.phase}, total ${r.totalMs} ms, freeze p50 ${r.freezeMs.p50} / p95 ${r.freezeMs.p95} ms, copy or cut p50 ${r.copyMs.p50} ms`,
      );
      for (const p of r.problems.slice(0, 5)) say(`    ! ${p.slice(0, 300)}`);
    }
  }
  const pooled = pooledOf(runs);
  const result: FreezeBenchResult = {
    command: `pnpm bench${argv.length > 0 ? ` ${argv.join(' ')}` : ''}`,
    startedAt: startedAt.toISOString(),
    machine: machineInfo(loadStart),
    scenario: s,
    runs,
    pooled,
    targets: freezeTargets(pooled),
  };
  const text = renderFreezeMarkdown(result);
  process.stdout.write(text);
  if (json) say(`wrote ${await writeReport(json, `${JSON.stringify(result, null, 2)}\n`)}`);
  if (markdown) say(`wrote ${await writeReport(markdown, text)}`);
  if (keepLogs) say(`logs kept in ${logDir}`);
  else await rm(logDir, { recursive: true, force: true });
  return runs.every((r) => r.phase === 'Completed') ? 0 : 1;
}
