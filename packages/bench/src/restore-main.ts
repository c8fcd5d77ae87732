/**
 * pnpm bench --scenario restore (issue 18): restore throughput in the parallel mode against one
 * item at a time (STOWAGE_RESTORE_MAX_INFLIGHT=1, Velero's way), post-restore hook lag, and the
 * most requests the simulator ever had in flight. See restore-run.ts and the README.
 */
import { execFileSync } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './bench-env.js';
import { writeReport } from './report.js';
import { parseRestoreBenchArgs, RESTORE_USAGE } from './restore-options.js';
import { type RestoreBenchResult, type RestoreModeResult, type RestorePhaseResult, runRestoreBench } from './restore-run.js';
import { mainThreadShare } from './run-queue.js';

/** The issue's targets; the two throughput ones only when the run restored plain objects in both modes. */
export interface RestoreTargets {
  objectsPerSecond?: { value: number; target: number; met: boolean };
  overOneAtATime?: { value: number; target: number; met: boolean };
  hookLagP99Ms: { value: number | null; target: number; met: boolean };
  maxInFlight: { value: number; cap: number; met: boolean };
}

/** A mode's pods restores, labelled `what` — with `(k of n)` after it under --pods-repeat. */
export function podsRestores(m: RestoreModeResult, what = 'pods + volumes + hooks'): Array<[label: string, result: RestorePhaseResult]> {
  const all = [m.pods, ...(m.podsAgain ?? [])];
  return all.map((p, i) => [all.length > 1 ? `${what} (${i + 1} of ${all.length})` : what, p]);
}

export function restoreTargets(r: RestoreBenchResult): RestoreTargets | undefined {
  const par = r.modes.find((m) => m.mode === 'parallel');
  const one = r.modes.find((m) => m.mode === 'one-at-a-time');
  if (!par) return undefined;
  // Pooled over the pods restores when there are several (one restore's p99 is its second-slowest hook).
  const lag = (par.podsHookLagPooledMs ?? par.pods.hookLagMs)?.p99 ?? null;
  const peak = Math.max(par.plain?.maxInFlightAtApiServer ?? 0, ...podsRestores(par).map(([, p]) => p.maxInFlightAtApiServer));
  const targets: RestoreTargets = {
    hookLagP99Ms: { value: lag, target: 250, met: lag !== null && lag <= 250 },
    maxInFlight: { value: peak, cap: par.maxInFlight, met: peak <= par.maxInFlight },
  };
  if (par.plain) targets.objectsPerSecond = { value: par.plain.objectsPerSecond, target: 1_000, met: par.plain.objectsPerSecond >= 1_000 };
  if (par.plain && one?.plain) {
    const ratio = par.plain.objectsPerSecond / Math.max(1e-9, one.plain.objectsPerSecond);
    targets.overOneAtATime = { value: ratio, target: 10, met: ratio >= 10 };
  }
  return targets;
}

const fmt = (n: number | null | undefined, digits = 0) => (n === null || n === undefined ? '—' : n.toFixed(digits));

export function renderRestoreMarkdown(r: RestoreBenchResult, meta: { command: string; startedAt: string; machine: string }): string {
  const s = r.scenario;
  const row = (mode: string, cap: string, what: string, p: RestorePhaseResult) =>
    `| ${what} | ${mode} | ${cap} | ${p.phase} | ${p.itemsRestored}${p.itemsFailed ? ` (+${p.itemsFailed} failed)` : ''} | ${p.makespanMs} | **${fmt(p.objectsPerSecond)}** | ${p.maxInFlightAtApiServer} | ${p.pvrs ? `${p.pvrs.completed}/${p.pvrs.total}` : '—'} | ${p.hookExecs ?? '—'} | ${p.hookLagMs ? `${fmt(p.hookLagMs.p50)} / ${fmt(p.hookLagMs.p99)} / ${fmt(p.hookLagMs.max)}` : '—'} |`;
  const lines = [
    `## Restore: parallel vs one item at a time, ${meta.startedAt.slice(0, 16).replace('T', ' ')}Z (issue #18)`,
    '',
    '```',
    meta.command,
    '```',
    '',
    `${meta.machine} **Measured on a 2-core machine that runs every process of the bench** (and, at times, services of its own): absolute rates and a single restore's hook-lag p99 are noisy; the ratio compares the two modes of one run.`,
    '',
    `One simulator (adding **${s.latencyMs} ms to every API request** during the restores), redis-server, ${s.nodes} node agents and ${s.workers} worker processes (STOWAGE_RESTORE_ITEMS_CONCURRENCY=${s.itemsConcurrency}), fresh workers per mode. The source backup (${r.backup.phase}, ${r.backup.makespanMs} ms) is made by the product's backup pipeline: ${s.plainNamespaces} namespaces × (${s.secretsPerNamespace} Secrets + ${s.configMapsPerNamespace} ConfigMaps), and ${s.pods} pods with one PVC volume each (${s.filesPerVolume} files, ${s.bytesPerVolume} bytes). Each restore maps the namespaces to new ones. The one-at-a-time mode is the same code with STOWAGE_RESTORE_MAX_INFLIGHT=1 (one restore-items job at a time in the deployment, one request in flight in it) and restores ${s.serialPlainNamespaces} of the plain namespaces (a rate; ${s.serialPlainNamespaces * (s.secretsPerNamespace + s.configMapsPerNamespace)} serial creates suffice). The parallel mode gets one unmeasured warm-up restore (1 namespace) on its fresh workers first.`,
    '',
    "Objects/s = items restored ÷ (submit → the restore's completedAt: plan, every tier, finalize). \"Max in flight\" is the simulator's own count of non-watch requests being served at once during that restore (all clients: workers, the restore host, node agents). Hook lag = the post-restore hook's exec start (simulator exec log) − the last `completionTimestamp` of its pod's PVRs; p50 / p99 / max.",
    '',
    '| restore | mode | cap (jobs × per job) | phase | objects | makespan ms | objects/s | max in flight (sim) | PVRs done | hooks | hook lag ms p50 / p99 / max |',
    '|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const m of r.modes) {
    const cap = `${m.maxInFlight} (${m.shares.jobsAtOnce} × ${m.shares.perJob})`;
    if (m.plain) lines.push(row(m.mode, cap, 'plain objects', m.plain));
    for (const [what, p] of podsRestores(m)) lines.push(row(m.mode, cap, what, p));
  }
  for (const m of r.modes) {
    const pooled = m.podsHookLagPooledMs;
    if (pooled)
      lines.push(
        '',
        `Hook lag pooled over the ${podsRestores(m).length} pods restores (${m.mode}, ${pooled.count} hooks), ms p50 / p99 / max: ${fmt(pooled.p50)} / ${fmt(pooled.p99)} / ${fmt(pooled.max)}.`,
      );
  }
  lines.push(
    '',
    'CPU seconds used during each restore (load-independent: what the restore costs), and the rate that CPU would allow on 2 idle cores (2 ÷ CPU seconds per object):',
    '',
    '| restore | mode | workers | simulator | redis | driver (restore host) | node agents | total | CPU ms / object | rate on 2 idle cores |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  );
  for (const m of r.modes)
    for (const [what, p] of [['plain objects', m.plain] as const, ...podsRestores(m)]) {
      if (!p) continue;
      const c = p.cpuSeconds;
      const perObject = c.total / Math.max(1, p.itemsRestored);
      lines.push(
        `| ${what} | ${m.mode} | ${fmt(c.workers, 1)} | ${fmt(c.simulator, 1)} | ${fmt(c.redis, 1)} | ${fmt(c.driver, 1)} | ${fmt(c.nodeAgents, 1)} | ${fmt(c.total, 1)} | ${fmt(perObject * 1000, 2)} | ${fmt(2 / perObject)} /s |`,
      );
    }
  const waited = r.modes.flatMap((m) =>
    [['plain objects', m.plain] as const, ...podsRestores(m)].flatMap(([what, p]) =>
      p?.runQueueWaitSeconds ? [[what, m.mode, p] as const] : [],
    ),
  );
  if (waited.length > 0) {
    lines.push(
      '',
      "Time ready to run but waiting for a core (the run queue; Linux schedstat) during each restore: each process's main thread (its event loop), as a share of the restore's makespan (the mean over the part's processes), and in brackets the seconds of all the part's threads:",
      '',
      '| restore | mode | makespan ms | workers | simulator | redis | driver (restore host) | node-agent hosts |',
      '|---|---|--:|--:|--:|--:|--:|--:|',
    );
    for (const [what, mode, p] of waited) {
      const w = p.runQueueWaitSeconds ?? {};
      const cell = (part: string) => {
        const x = w[part];
        const share = mainThreadShare(x, p.makespanMs);
        return x && share !== undefined ? `${fmt(share * 100)} % (${fmt(x.allThreadsSeconds, 2)} s)` : '–';
      };
      lines.push(
        `| ${what} | ${mode} | ${p.makespanMs} | ${cell('workers')} | ${cell('simulator')} | ${cell('redis')} | ${cell('driver')} | ${cell('nodeAgents')} |`,
      );
    }
  }
  lines.push(
    '',
    "Where the hook lag goes (ms, p50 / p99; from the restore-hooks jobs): last PVR done → the start of the hooks job's run that found the PVRs settled (restores of older versions: = last PVR done → its pvr-watch job finished [of which that job's last run] + that → the run) | that run → exec start (container wait) | re-parks waiting for the container (p50 / p99):",
    '',
  );
  // A pods restore's label in the lists below: the mode, and which restore with --pods-repeat.
  const labelled = r.modes.flatMap((m) => podsRestores(m, m.mode));
  for (const [label, p] of labelled) {
    const parts = p.hookLagParts;
    if (!parts) continue;
    const d = (x: { p50: number | null; p99: number | null }) => `${fmt(x.p50)} / ${fmt(x.p99)}`;
    // The pvr-watch split only where such jobs ran (restores started by an older version).
    const split =
      parts.toWatchDoneMs.count === 0 ? '' : ` (= ${d(parts.toWatchDoneMs)} [${d(parts.watchRunMs)}] + ${d(parts.watchDoneToFirstRunMs)})`;
    lines.push(`- ${label}: ${d(parts.toFirstRunMs)}${split} | ${d(parts.firstRunToExecMs)} | ${d(parts.containerPolls)}`);
  }
  const bySecond = labelled.filter(([, p]) => (p.hookLagByEndSecond ?? []).length > 0);
  if (bySecond.length > 0) {
    lines.push(
      '',
      "The hook lag by the second (from the restore's first PVR end) in which the pod's last PVR ended — hooks, lag p50 / max (ms):",
      '',
    );
    for (const [label, p] of bySecond) {
      const cells = (p.hookLagByEndSecond ?? []).map((b) => `${b.second} s: ${b.lagMs.count}, ${fmt(b.lagMs.p50)} / ${fmt(b.lagMs.max)}`);
      lines.push(`- ${label}: ${cells.join(' | ')}`);
    }
  }
  const t = restoreTargets(r);
  if (t) {
    const mark = (met: boolean) => (met ? 'met' : '**missed**');
    const par = r.modes.find((m) => m.mode === 'parallel');
    const one = r.modes.find((m) => m.mode === 'one-at-a-time');
    const podsRatio = par && one ? par.pods.objectsPerSecond / Math.max(1e-9, one.pods.objectsPerSecond) : null;
    lines.push(
      '',
      'Targets (issue #18):',
      '',
      t.objectsPerSecond
        ? `- ≥ 1,000 objects/s (plain objects, parallel): ${fmt(t.objectsPerSecond.value)} — ${mark(t.objectsPerSecond.met)}`
        : '- ≥ 1,000 objects/s: not measured (--restore-part pods)',
      t.overOneAtATime
        ? `- ≥ 10× one at a time (plain objects, same run): ${fmt(t.overOneAtATime.value, 1)}× — ${mark(t.overOneAtATime.met)}${podsRatio !== null ? ` (pods restore: ${fmt(podsRatio, 1)}×)` : ''}`
        : '- ≥ 10× one at a time: not measured (--restore-part pods)',
      `- post-restore hook lag p99 ≤ 250 ms (parallel${
        par?.podsHookLagPooledMs
          ? `, pooled over ${podsRestores(par).length} restores; each alone: ${podsRestores(par)
              .map(([, p]) => fmt(p.hookLagMs?.p99))
              .join(' / ')} ms`
          : ''
      }): ${fmt(t.hookLagP99Ms.value)} ms — ${mark(t.hookLagP99Ms.met)}`,
      `- requests in flight at the API server never above the cap (${t.maxInFlight.cap}), parallel, counted by the simulator: max ${t.maxInFlight.value} — ${mark(t.maxInFlight.met)}`,
    );
  }
  const problems = [
    ...r.problems,
    ...r.modes.flatMap((m) => [...(m.plain?.problems ?? []), ...podsRestores(m).flatMap(([, p]) => p.problems)]),
  ];
  if (problems.length > 0)
    lines.push('', `Problems seen (${problems.length}, first 5):`, '', ...problems.slice(0, 5).map((p) => `- ${p.slice(0, 300)}`));
  return `${lines.join('\n')}\n`;
}

export async function runRestoreMain(argv: string[]): Promise<number> {
  const say = (line: string) => process.stderr.write(`${line}\n`);
  const parsed = parseRestoreBenchArgs(argv);
  if (parsed.ok === 'help') {
    process.stdout.write(`${RESTORE_USAGE}\n`);
    return 0;
  }
  if (parsed.ok === false) {
    say(
      `bench: ${parsed.problems.length} problem(s) with the options:\n${parsed.problems.map((p) => `  - ${p}`).join('\n')}\n\n${RESTORE_USAGE}`,
    );
    return 2;
  }
  const opts = parsed.options;
  const startedAt = new Date();
  const logDir = join(tmpdir(), `stowage-bench-logs-${startedAt.getTime()}`);
  const loadStart = loadavg();
  say(`Stowage bench (restore); load average ${loadStart.map((l) => l.toFixed(2)).join(' ')}`);
  const result = await runRestoreBench(opts.scenario, opts.part, logDir, opts.keepLogs, say);
  const commit = (() => {
    try {
      return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
    } catch {
      return 'unknown';
    }
  })();
  const cpuList = cpus();
  const machine = `tree ${commit}, Node ${process.version}, ${cpuList.length} cores (${cpuList[0]?.model ?? 'unknown'}), load average ${loadStart.map((l) => l.toFixed(2)).join(' ')} at the start, ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')} at the end.`;
  const markdown = renderRestoreMarkdown(result, {
    command: `pnpm bench${argv.length > 0 ? ` ${argv.filter((a) => a !== '--').join(' ')}` : ''}`,
    startedAt: startedAt.toISOString(),
    machine,
  });
  process.stdout.write(markdown);
  if (opts.json)
    say(`wrote ${await writeReport(opts.json, `${JSON.stringify({ ...result, targets: restoreTargets(result) }, null, 2)}\n`)}`);
  if (opts.markdown) say(`wrote ${await writeReport(opts.markdown, markdown)}`);
  if (opts.keepLogs) say(`logs kept in ${logDir}`);
  else await rm(logDir, { recursive: true, force: true });
  const failed = result.modes.some(
    (m) => (m.plain && m.plain.phase !== 'Completed') || podsRestores(m).some(([, p]) => p.phase !== 'Completed'),
  );
  return failed ? 1 : 0;
}
