import type { HugeBackupRun, HugeResult, SmallRun } from './huge-run.js';
import type { MachineInfo } from './report.js';
import { mainThreadShare } from './run-queue.js';

const n0 = (n: number | undefined) => (n === undefined ? '–' : Math.round(n).toLocaleString('en-US'));
const s1 = (ms: number | undefined) => (ms === undefined ? '–' : `${(ms / 1000).toFixed(1)} s`);
const kib = (b: number | undefined) => (b === undefined ? '–' : `${(b / 1024).toFixed(2)} KiB`);
/** Where a small backup's time went: its plan stored, its last block done, its end (seconds after its submit). */
const smallParts = (x: SmallRun) => `${s1(x.planMs)} / ${s1(x.blocksDoneMs)} / ${s1(x.makespanMs)}`;
const yes = (ok: boolean) => (ok ? 'met' : '**not met**');

/** The huge scenario's Markdown report (printed; `--markdown FILE` writes it). */
export function renderHugeMarkdown(input: { command: string; startedAt: string; machine: MachineInfo; result: HugeResult }): string {
  const { result: r, machine } = input;
  const s = r.scenario;
  const on = r.windowed;
  const off = r.unwindowed;
  const row = (label: string, f: (x: HugeBackupRun) => string) => `| ${label} | ${f(on)} | ${f(off)} |`;
  const lines = [
    `## Huge scenario (${input.startedAt})`,
    '',
    `Command: \`${input.command}\``,
    '',
    `Machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB.toFixed(0)} GiB, Node ${machine.node}; load average ${machine.loadAverageStart
      .map((l) => l.toFixed(1))
      .join(
        ' ',
      )} at the start, ${machine.loadAverageEnd.map((l) => l.toFixed(1)).join(' ')} at the end. The load average counts this bench's own processes with whatever else the machine runs: absolute times are noisy; compare the two columns (same run, same machine state).`,
    '',
    `Cluster: ${n0(s.pods)} pods with a PVC and PV each in ${n0(s.namespaces)} namespaces on ${s.nodes} nodes (backed up as items, no PVB), plus ${n0(s.tinyVolumePods)} pods whose ${s.tinyVolumeBytes} B volume is copied by a PVB (node agents on 4 nodes); ${s.workers} workers × ${s.concurrency} slots, one redis-server. The ${s.smallPods}-pod backup alone: ${s1(r.smallAloneMs)}; then submitted ${s.smallAfterMs / 1000} s after the big one.`,
    '',
    `| | dispatch window ${s.blocksInFlightPerBackup} | no window |`,
    '|---|---|---|',
    row('phase', (x) => x.phase),
    row('blocks / items', (x) => `${n0(x.blocks)} / ${n0(x.items)}`),
    row('plan (submit → every block planned)', (x) => s1(x.planMs)),
    row('time to the first block done', (x) => s1(x.firstBlockMs)),
    row('blocks dispatched per second while planning', (x) => n0(x.dispatchBlocksPerSecond)),
    row('end to end (submit → Completed)', (x) => s1(x.makespanMs)),
    row('blocks/s end to end', (x) => n0(x.blocksPerSecond)),
    row('LIST requests / resource types listed', (x) => `${x.listCalls} / ${x.listedResourceTypes}`),
    row('submit → every block done (finalize excluded)', (x) => s1(x.blocksDoneMs)),
    row('Redis commands per block', (x) => x.redisCommandsPerBlock.toFixed(1)),
    row('worker CPU s (each)', (x) => x.workerCpuSeconds.map((c) => c.toFixed(0)).join(', ')),
    row(
      'Redis CPU s / driver (plan, finalize) CPU s / simulator CPU s',
      (x) => `${x.redisCpuSeconds.toFixed(0)} / ${x.driverCpuSeconds.toFixed(0)} / ${x.simCpuSeconds.toFixed(0)}`,
    ),
    row("a core's wait (run queue), each main thread's share of the run: workers / Redis / driver / simulator", (x) => {
      const share = (part: string) => {
        const s = mainThreadShare(x.runQueueWaitSeconds?.[part], x.makespanMs);
        return s === undefined ? '–' : `${(100 * s).toFixed(0)} %`;
      };
      return `${share('workers')} / ${share('redis')} / ${share('driver')} / ${share('simulator')}`;
    }),
    row(
      `the ${s.smallPods}-pod backup during the big one`,
      (x) => `${s1(x.small.makespanMs)} = **×${x.small.overAlone.toFixed(1)}** its time alone`,
    ),
    row(`… its plan stored / its last block done / its end (alone: ${smallParts(r.smallAlone)})`, (x) => smallParts(x.small)),
    row('the driver’s event-loop delay while the big backup was Finalizing: p99 / max (over)', (x) =>
      x.finalizeLoopDelay
        ? `${n0(x.finalizeLoopDelay.p99Ms)} / ${n0(x.finalizeLoopDelay.maxMs)} ms (${s1(x.finalizeLoopDelay.spanMs)})`
        : 'not seen Finalizing',
    ),
    '',
    `Plan and dispatch with the item-blocks queue paused until plan was done, then resumed, the ${s.smallPods}-pod backup submitted ${s.smallAfterMs / 1000} s after the resume (behind the backlog):`,
    '',
    `| | no window | dispatch window ${s.blocksInFlightPerBackup} |`,
    '|---|---|---|',
    `| blocks planned (no window: and queued) in | ${s1(r.dispatchOnly.planAndDispatchMs)} (${n0(r.dispatchOnly.dispatchBlocksPerSecond)} blocks/s) | ${s1(r.backlogWindowed.planAndDispatchMs)} |`,
    `| Redis used_memory growth per block | ${kib(r.dispatchOnly.redisBytesPerQueuedBlock)} | ${kib(r.backlogWindowed.redisBytesPerQueuedBlock)} |`,
    `| … of which the plan state (block plans, item manifests) | ${kib(r.dispatchOnly.planStateBytesPerBlock)} | ${kib(r.backlogWindowed.planStateBytesPerBlock)} |`,
    `| drain after the resume | ${n0(r.dispatchOnly.drainBlocksPerSecond)} blocks/s | ${n0(r.backlogWindowed.drainBlocksPerSecond)} blocks/s |`,
    `| the small backup behind the backlog | ${s1(r.dispatchOnly.small.makespanMs)} = **×${r.dispatchOnly.small.overAlone.toFixed(1)}** its time alone | ${s1(r.backlogWindowed.small.makespanMs)} = **×${r.backlogWindowed.small.overAlone.toFixed(1)}** its time alone |`,
    `| … its plan stored / its last block done / its end | ${smallParts(r.dispatchOnly.small)} | ${smallParts(r.backlogWindowed.small)} |`,
    '',
    `LIST requests by resource (window on; the big and the small backup, pages of 500; podvolumebackups/podvolumerestores are the workers' and node agents' informers): ${Object.entries(
      on.listCallsByResource,
    )
      .map(([k, v]) => `${k} ${v}`)
      .join(
        ', ',
      )}. One paginated list per type and backup (the big one's across the cluster, the small one's in its namespace, with the first page of PVs) would take ${r.expectedListRequests} requests (the informers' lists aside).`,
    '',
    `Top Redis commands per block (window on): ${Object.entries(on.redisTopCommandsPerBlock)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}; (no window): ${Object.entries(off.redisTopCommandsPerBlock)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}.`,
    '',
    'Targets:',
    '',
    `- plan + dispatch of the pods < 60 s (alone, no window): ${s1(r.dispatchOnly.planAndDispatchMs)} — ${yes(r.dispatchOnly.planAndDispatchMs < 60_000)}`,
    `- ≥ 3,000 volume-less blocks/s end to end with ${s.workers} workers: ${n0(on.blocksPerSecond)} (window) / ${n0(off.blocksPerSecond)} (none) — ${yes(Math.max(on.blocksPerSecond, off.blocksPerSecond) >= 3000)}`,
    `- one paginated LIST per resource type (the big backup's not per namespace): ${on.planListCalls} requests for 2 backups (${on.listCalls} with the informers' lists: PVBs, PVRs, and the pods lists with a selector), ${r.expectedListRequests} pages expected — ${yes(on.planListCalls <= r.expectedListRequests)}`,
    `- ≤ 2 KiB Redis per queued block: ${kib(r.dispatchOnly.redisBytesPerQueuedBlock)} in all, ${kib(r.dispatchOnly.redisBytesPerQueuedBlock - r.dispatchOnly.planStateBytesPerBlock)} without the plan state — ${yes(r.dispatchOnly.redisBytesPerQueuedBlock <= 2048)}`,
    `- the small backup within 10× its time alone: submitted 5 s after the big one ×${on.small.overAlone.toFixed(1)} with the window (×${off.small.overAlone.toFixed(1)} without); behind a backlog ×${r.backlogWindowed.small.overAlone.toFixed(1)} with the window (×${r.dispatchOnly.small.overAlone.toFixed(1)} without) — ${yes(on.small.overAlone <= 10 && r.backlogWindowed.small.overAlone <= 10)}`,
    '',
    ...(r.problems.length > 0 ? ['Problems seen:', '', ...r.problems.slice(0, 10).map((p) => `- ${p.slice(0, 300)}`), ''] : []),
  ];
  return `${lines.join('\n')}\n`;
}
