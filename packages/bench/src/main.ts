/**
 * pnpm bench — decoupled vs inline waiting against the node-agent bound, plus pure orchestration
 * throughput. Real node agents (bandwidth-shaped), real worker processes, a real redis-server and
 * the simulator's generated cluster; a fresh redis-server and simulator per mode. `--help` lists
 * the flags.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './bench-env.js';
import { parseBenchArgs, USAGE } from './bench-options.js';
import { type FsModeResult, runFsMode } from './fs-backup-run.js';
import { renderHugeMarkdown } from './huge-report.js';
import { runHuge } from './huge-run.js';
import { type OrchestrationResult, runOrchestration } from './orchestration-run.js';
import { type BenchReport, checkTargets, machineInfo, renderMarkdown, writeReport } from './report.js';
import { renderTimelineSvg } from './timeline-svg.js';

const say = (line: string) => process.stderr.write(`${line}\n`);
const argv = process.argv.slice(2);
// The restore scenario (issue 18) has options and a report of its own: restore-main.ts.
if (argv[argv.indexOf('--scenario') + 1] === 'restore' && argv.includes('--scenario')) {
  const { runRestoreMain } = await import('./restore-main.js');
  process.exit(await runRestoreMain(argv));
}
// The freeze scenario (issue 47): fs-backup against CSI snapshots with data movement, freeze-main.ts.
if (argv[argv.indexOf('--scenario') + 1] === 'freeze' && argv.includes('--scenario')) {
  const { runFreezeMain } = await import('./freeze-main.js');
  process.exit(await runFreezeMain(argv));
}
// The restore-memory scenario (issue #45): restore-memory-main.ts.
if (argv[argv.indexOf('--scenario') + 1] === 'restore-memory' && argv.includes('--scenario')) {
  const { runRestoreMemoryMain } = await import('./restore-memory-main.js');
  process.exit(await runRestoreMemoryMain(argv));
}
const parsed = parseBenchArgs(argv, { svgDir: join(REPO_ROOT, 'docs/bench') });
if (parsed.ok === 'help') {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
if (parsed.ok === false) {
  say(`bench: ${parsed.problems.length} problem(s) with the options:\n${parsed.problems.map((p) => `  - ${p}`).join('\n')}\n\n${USAGE}`);
  process.exit(2);
}
const opts = parsed.options;
const startedAt = new Date();
const logDir = join(tmpdir(), `stowage-bench-logs-${startedAt.getTime()}`);

if (opts.waitForLoadMs > 0) {
  const until = Date.now() + opts.waitForLoadMs;
  while ((loadavg()[0] ?? 0) > opts.maxLoad && Date.now() < until) {
    say(`waiting for a quieter machine: 1-minute load ${(loadavg()[0] ?? 0).toFixed(2)} > ${opts.maxLoad}`);
    await new Promise((r) => setTimeout(r, 15_000));
  }
}
const loadStart = loadavg();
say(`Stowage bench (${opts.scenario}); load average ${loadStart.map((l) => l.toFixed(2)).join(' ')}`);

if (opts.scenario === 'huge') {
  say('• huge scenario');
  const result = await runHuge(opts.huge, logDir, opts.keepLogs, say);
  const markdown = renderHugeMarkdown({
    command: `pnpm bench${argv.length > 0 ? ` ${argv.join(' ')}` : ''}`,
    startedAt: startedAt.toISOString(),
    machine: machineInfo(loadStart),
    result,
  });
  process.stdout.write(markdown);
  if (opts.json) say(`wrote ${await writeReport(opts.json, `${JSON.stringify(result, null, 2)}\n`)}`);
  if (opts.markdown) say(`wrote ${await writeReport(opts.markdown, markdown)}`);
  if (opts.keepLogs) say(`logs kept in ${logDir}`);
  else await rm(logDir, { recursive: true, force: true });
  process.exit(result.windowed.phase === 'Completed' && result.unwindowed.phase === 'Completed' ? 0 : 1);
}

const results: Partial<Record<'decoupled' | 'inline', FsModeResult>> = {};
for (const mode of opts.modes) {
  say(`• fs-backup scenario, ${mode} mode`);
  const r = await runFsMode(opts.fs, mode, logDir, opts.keepLogs, say, { redisMonitor: opts.redisMonitor });
  results[mode] = r;
  say(
    `  ${mode}: ${r.phase}, makespan ${r.makespanMs} ms, bound ${Math.round(r.bound.boundMs)} ms (×${r.makespanOverBound.toFixed(3)}), post-hook lag p99 ${r.postHookLagMs.p99} ms, API req/PVB ${r.apiRequestsPerPvb.toFixed(2)}, Redis cmds/block ${r.redisCommandsPerBlock.toFixed(1)}`,
  );
  for (const p of r.problems.slice(0, 5)) say(`    ! ${p.slice(0, 300)}`);
}

const orchestrationRuns: OrchestrationResult[] = [];
if (opts.runOrchestration) {
  say('• orchestration scenario');
  for (const workers of opts.orchestration.workers) {
    const r = await runOrchestration(
      { pods: opts.orchestration.blocks, workers, concurrency: opts.orchestration.concurrency },
      logDir,
      opts.keepLogs,
      say,
    );
    orchestrationRuns.push(r);
    say(
      `  ${workers} worker(s): ${r.phase}, ${r.blocks} blocks in ${r.makespanMs} ms = ${Math.round(r.blocksPerSecond)} blocks/s (first backup, cold: ${Math.round(r.cold.blocksPerSecond)} blocks/s)`,
    );
    for (const p of r.problems.slice(0, 5)) say(`    ! ${p.slice(0, 300)}`);
  }
}

const strip = (r: FsModeResult | undefined) => {
  if (!r) return undefined;
  const { timeline: _timeline, ...rest } = r;
  return rest;
};
const orchestrationMain = orchestrationRuns.find((o) => o.workers === 2) ?? orchestrationRuns.at(-1);
const base: Omit<BenchReport, 'targets'> = {
  command: `pnpm bench${argv.length > 0 ? ` ${argv.join(' ')}` : ''}`,
  startedAt: startedAt.toISOString(),
  machine: machineInfo(loadStart),
  scenario: opts.scenario,
  fs: opts.fs,
  lowerBoundMs: results.decoupled ? Math.round(results.decoupled.bound.boundMs) : null,
  ...(results.decoupled ? { decoupled: strip(results.decoupled) } : {}),
  ...(results.inline ? { inline: strip(results.inline) } : {}),
  inlineOverDecoupled: results.decoupled && results.inline ? results.inline.makespanMs / results.decoupled.makespanMs : null,
  ...(orchestrationMain
    ? { orchestration: { blocksPerSecond: orchestrationMain.blocksPerSecond, workers: orchestrationMain.workers, runs: orchestrationRuns } }
    : {}),
};
const report: BenchReport = { ...base, targets: checkTargets(base) };
const markdown = renderMarkdown(report);
process.stdout.write(markdown);

if (opts.json) say(`wrote ${await writeReport(opts.json, `${JSON.stringify(report, null, 2)}\n`)}`);
if (opts.svgDir) {
  await mkdir(opts.svgDir, { recursive: true });
  const svgs: string[] = [];
  for (const r of [results.decoupled, results.inline]) {
    if (!r) continue;
    const file = join(opts.svgDir, `timeline-${opts.scenario}-${r.mode}.svg`);
    await writeFile(file, renderTimelineSvg(r.timeline));
    svgs.push(file);
  }
  if (svgs.length > 0) say(`wrote ${svgs.join(', ')}`);
}
if (opts.markdown) say(`wrote ${await writeReport(opts.markdown, markdown)}`);
if (opts.keepLogs) say(`logs kept in ${logDir}`);
else await rm(logDir, { recursive: true, force: true });
const failed =
  [results.decoupled, results.inline].some((r) => r && r.phase !== 'Completed') || orchestrationRuns.some((o) => o.phase !== 'Completed');
process.exit(failed ? 1 : 0);
