import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, resolve } from 'node:path';
import type { BenchOptions } from './bench-options.js';
import type { FsModeResult } from './fs-backup-run.js';
import type { OrchestrationResult } from './orchestration-run.js';
import { earliestPerNode } from './stats.js';

export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  loadAverageStart: number[];
  loadAverageEnd: number[];
}

/** The machine a run was measured on; `loadAverageStart` is taken by the caller before the run. */
export function machineInfo(loadAverageStart: number[]): MachineInfo {
  const cpuList = cpus();
  return {
    cpus: cpuList.length,
    cpuModel: cpuList[0]?.model ?? 'unknown',
    memoryGiB: totalmem() / 1024 ** 3,
    node: process.versions.node,
    loadAverageStart,
    loadAverageEnd: loadavg(),
  };
}

/**
 * Writes a report (`--json FILE`, `--markdown FILE`), replacing what the file held. BENCHMARKS.md is
 * edited by hand from such a report: one current table per scenario, the history in git.
 */
export async function writeReport(path: string, text: string): Promise<string> {
  const file = resolve(path);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, text);
  return file;
}

export interface TargetCheck {
  target: string;
  measured: string;
  met: boolean | null;
}

export interface BenchReport {
  command: string;
  startedAt: string;
  machine: MachineInfo;
  scenario: BenchOptions['scenario'];
  fs: BenchOptions['fs'];
  lowerBoundMs: number | null;
  decoupled?: Omit<FsModeResult, 'timeline'>;
  inline?: Omit<FsModeResult, 'timeline'>;
  inlineOverDecoupled: number | null;
  orchestration?: { blocksPerSecond: number; workers: number; runs: OrchestrationResult[] };
  targets: TargetCheck[];
}

const f1 = (n: number | null | undefined) => (n === null || n === undefined ? '–' : n.toFixed(1));
const f2 = (n: number | null | undefined) => (n === null || n === undefined ? '–' : n.toFixed(2));
/** Three decimals where a ratio is checked against a target (1.1012 is not 1.10). */
const f3 = (n: number | null | undefined) => (n === null || n === undefined ? '–' : n.toFixed(3));
const mib = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MiB`;
const v = (n: number | null | undefined) => (n === null || n === undefined ? '–' : String(n));

/** The targets of issue 8, checked against a report (null when that part was not run). */
export function checkTargets(r: Omit<BenchReport, 'targets'>): TargetCheck[] {
  const d = r.decoupled;
  const slots = r.fs.nodes * r.fs.loadConcurrency;
  const cw = r.fs.workers * r.fs.blockConcurrency;
  const o = r.orchestration?.runs.find((x) => x.workers === 2);
  return [
    {
      target: `decoupled makespan ≤ 1.10 × node-agent bound (C·W = ${cw}, N·K = ${slots}; asked for 4 and 40)`,
      measured: d ? `${d.makespanMs} ms = ${f3(d.makespanOverBound)} × ${Math.round(d.bound.boundMs)} ms` : 'not run',
      met: d ? d.makespanOverBound <= 1.1 : null,
    },
    {
      target: 'inline ≥ 5× slower than decoupled, same run',
      measured: r.inlineOverDecoupled !== null ? `${f2(r.inlineOverDecoupled)}×` : 'not run',
      met: r.inlineOverDecoupled !== null ? r.inlineOverDecoupled >= 5 : null,
    },
    {
      target: 'post-hook lag p99 ≤ 250 ms (decoupled)',
      measured: d?.postHookLagMs.p99 != null ? `${d.postHookLagMs.p99} ms` : 'not run',
      met: d?.postHookLagMs.p99 != null ? d.postHookLagMs.p99 <= 250 : null,
    },
    {
      target: "≤ 3 API requests per PVB outside watches (decoupled; the pipeline's, without hook execs and node agents)",
      measured: d
        ? `pipeline ${f2(d.apiRequestsPerPvbBy.pipeline)} (+ hook execs ${f2(d.apiRequestsPerPvbBy.hookExecs)}, node agents ${f2(d.apiRequestsPerPvbBy.nodeAgents)}; all ${f2(d.apiRequestsPerPvb)})`
        : 'not run',
      met: d ? d.apiRequestsPerPvbBy.pipeline <= 3 : null,
    },
    {
      target: '≥ 1,000 volume-less blocks/s end to end with 2 workers',
      measured: o ? `${Math.round(o.blocksPerSecond)} blocks/s` : 'not run',
      met: o ? o.blocksPerSecond >= 1000 : null,
    },
  ];
}

export function renderMarkdown(r: BenchReport): string {
  const m = r.machine;
  const lines: string[] = [];
  lines.push(
    `## Bench: decoupled vs inline waiting, ${r.startedAt.slice(0, 10)} (${r.scenario})`,
    '',
    `Command: \`${r.command}\``,
    `Machine: ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB.toFixed(0)} GiB, Node ${m.node}; ${r.startedAt}; load average ${m.loadAverageStart.map(f2).join(' ')} at start, ${m.loadAverageEnd.map(f2).join(' ')} at end.`,
    `Scenario: ${r.fs.blocks} blocks (a pod each) × ${r.fs.volumesPerPod} fs-backup volume(s) of ${r.fs.bytesPerVolume} B in ${r.fs.filesPerVolume} file(s), a ${r.fs.postHookMs} ms post hook each; N = ${r.fs.nodes} node agents × K = ${r.fs.loadConcurrency} (bandwidth ${r.fs.bandwidthBytesPerSec} B/s per agent, ${r.fs.agentsPerProcess} agents per process); W = ${r.fs.workers} worker processes × C = ${r.fs.blockConcurrency} (hook concurrency ${r.fs.hookConcurrency}). Fresh redis-server and simulator per mode.`,
    '',
    '| | decoupled | inline |',
    '|---|---:|---:|',
  );
  const row = (label: string, get: (x: Omit<FsModeResult, 'timeline'>) => string) =>
    lines.push(`| ${label} | ${r.decoupled ? get(r.decoupled) : '–'} | ${r.inline ? get(r.inline) : '–'} |`);
  row('phase', (x) => x.phase);
  row('makespan', (x) => `${(x.makespanMs / 1000).toFixed(2)} s`);
  row("… plan done / last node's first PVB / last PVB done / finalize from", (x) => {
    const firstPerNode = [...earliestPerNode(x.pvbTimes, (p) => p.startMs).values()].map((p) => p.startMs);
    const s = (ms: number | undefined) => (ms === undefined || !Number.isFinite(ms) ? '–' : `${(ms / 1000).toFixed(2)}`);
    const lastEnd = x.pvbTimes.length > 0 ? Math.max(...x.pvbTimes.map((p) => p.endMs)) : undefined;
    const lastFirst = firstPerNode.length > 0 ? Math.max(...firstPerNode) : undefined;
    return `${s(x.planMs)} / ${s(lastFirst)} / ${s(lastEnd)} / ${s(x.finalizeStartMs)} s`;
  });
  row('PVBs / blocks planned', (x) => `${x.pvbs} / ${x.blocks}`);
  row('per-PVB copy time p50 / max', (x) => `${v(x.pvbCopyMs.p50)} / ${v(x.pvbCopyMs.max)} ms`);
  row(
    "… a node's first PVB: created → claimed by its agent, p50 / p99 / max",
    (x) => `${v(x.pvbCreatedToStartMs?.p50)} / ${v(x.pvbCreatedToStartMs?.p99)} / ${v(x.pvbCreatedToStartMs?.max)} ms`,
  );
  row('node-agent bound (Σ copy ÷ N·K)', (x) => `${(x.bound.boundMs / 1000).toFixed(2)} s`);
  row('makespan ÷ bound', (x) => f3(x.makespanOverBound));
  row('post-hook lag p50 / p99 / max', (x) => `${v(x.postHookLagMs.p50)} / ${v(x.postHookLagMs.p99)} / ${v(x.postHookLagMs.max)} ms`);
  row(
    '… PVB done → post-hooks job start, p50 / p99',
    (x) => `${v(x.postHookLagPartsMs.toJobStart.p50)} / ${v(x.postHookLagPartsMs.toJobStart.p99)} ms`,
  );
  row(
    '… job start → exec start, p50 / p99',
    (x) => `${v(x.postHookLagPartsMs.jobStartToExec.p50)} / ${v(x.postHookLagPartsMs.jobStartToExec.p99)} ms`,
  );
  row('item-block job duration p50 / p99', (x) => `${v(x.itemBlockJobMs.p50)} / ${v(x.itemBlockJobMs.p99)} ms`);
  row('API requests per PVB (non-watch, all)', (x) => f2(x.apiRequestsPerPvb));
  row(
    '… pipeline / hook execs / node agents',
    (x) => `${f2(x.apiRequestsPerPvbBy.pipeline)} / ${f2(x.apiRequestsPerPvbBy.hookExecs)} / ${f2(x.apiRequestsPerPvbBy.nodeAgents)}`,
  );
  row('watch streams opened', (x) => String(x.apiRequests.watchesOpened));
  row('Redis commands per block', (x) => f1(x.redisCommandsPerBlock));
  row('worker peak RSS (VmHWM)', (x) => x.workerPeakRssBytes.map(mib).join(', '));
  row(
    'CPU s: workers / redis-server / driver / simulator',
    (x) => `${x.workerCpuSeconds.map(f1).join(' + ')} / ${f1(x.redisCpuSeconds)} / ${f1(x.driverCpuSeconds)} / ${f1(x.simCpuSeconds)}`,
  );
  lines.push('');
  for (const x of [r.decoupled, r.inline]) {
    if (!x) continue;
    const byCommand = Object.entries(x.redisCommandsPerBlockByCommand ?? {}).filter(([, n]) => n >= 0.5);
    lines.push(`Redis commands per block (${x.mode}), by command: ${byCommand.map(([k, n]) => `${k} ${f1(n)}`).join(', ')}.`, '');
    if (x.redisCommandsPerBlockByOrigin) {
      const byOrigin = Object.entries(x.redisCommandsPerBlockByOrigin).filter(([, c]) => c.commands >= 0.5);
      lines.push(
        `… by origin (MONITOR; commands per block, a script's own included, and its calls per block): ${byOrigin.map(([k, c]) => `${k} ${f1(c.commands)} (${f1(c.calls)}×)`).join(', ')}.`,
        '',
      );
    }
  }
  if (r.inlineOverDecoupled !== null) lines.push(`Inline ÷ decoupled makespan: **${f2(r.inlineOverDecoupled)}×**.`, '');
  if (r.orchestration) {
    lines.push(
      'Orchestration (volume-less, hook-less pods; plan and finalize included; end to end = submit → Completed; measured on the second backup, after a first one of a copy of the cluster on the fresh workers, shown as "cold"):',
      '',
      '| workers × concurrency | pods | blocks | makespan | plan done at | finalize from | blocks/s | cold: makespan, blocks/s | Redis cmds/block | worker peak RSS | CPU s: workers / redis / driver / simulator |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    );
    for (const o of r.orchestration.runs) {
      lines.push(
        `| ${o.workers} × ${o.concurrency} | ${o.pods} | ${o.blocks} | ${(o.makespanMs / 1000).toFixed(2)} s | ${o.planMs !== undefined ? `${(o.planMs / 1000).toFixed(2)} s` : '–'} | ${o.finalizeStartMs !== undefined ? `${(o.finalizeStartMs / 1000).toFixed(2)} s` : '–'} | ${Math.round(o.blocksPerSecond)} | ${o.cold ? `${(o.cold.makespanMs / 1000).toFixed(2)} s, ${Math.round(o.cold.blocksPerSecond)}` : '–'} | ${f1(o.redisCommandsPerBlock)} | ${o.workerPeakRssBytes.map(mib).join(', ')} | ${o.workerCpuSeconds.map(f1).join(' + ')} / ${f1(o.redisCpuSeconds)} / ${f1(o.driverCpuSeconds)} / ${f1(o.simCpuSeconds)} |`,
      );
    }
    lines.push('');
  }
  lines.push('| target | measured | met |', '|---|---|---|');
  for (const t of r.targets) lines.push(`| ${t.target} | ${t.measured} | ${t.met === null ? '–' : t.met ? 'yes' : '**no**'} |`);
  lines.push('');
  return `${lines.join('\n')}\n`;
}
