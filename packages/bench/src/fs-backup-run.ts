import { join } from 'node:path';
import type { PodVolumeBackup } from '@stowage/kube';
import { type ExecRecord, generateCluster, type RequestCounts } from '@stowage/kube-sim';
import { createQueue, QueueName } from '@stowage/queue';
import { BenchEnv, objectsToMerge } from './bench-env.js';
import type { FsScenario, Mode } from './bench-options.js';
import { startDriverProfile } from './driver-profile.js';
import { commandsByOrigin, type Distribution, distribution, earliestPerNode, type NodeAgentBound, nodeAgentBound, sum } from './stats.js';
import type { TimelineBar, TimelineInput } from './timeline-svg.js';

export interface FsModeResult {
  mode: Mode;
  phase: string;
  /** When the measured backup was submitted (epoch ms): every *Ms time below counts from here. */
  submittedAt: number;
  makespanMs: number;
  /** Submit → plan stored and every block added, and submit → finalize started (every block done). */
  planMs: number | undefined;
  finalizeStartMs: number | undefined;
  pvbs: number;
  blocks: number;
  /** Per-PVB copy time (startTimestamp → completionTimestamp), ms. */
  pvbCopyMs: Distribution;
  bound: NodeAgentBound;
  makespanOverBound: number;
  postHookLagMs: Distribution;
  /** The lag in two parts: last PVB completion → post-hooks job start, and job start → exec start. */
  postHookLagPartsMs: { toJobStart: Distribution; jobStartToExec: Distribution };
  /**
   * Each node's first PVB: created (its `pvb.created` event, written when the create returned) →
   * claimed by the node agent (startTimestamp). Later PVBs of a node wait for its copy slot.
   */
  pvbCreatedToStartMs: Distribution;
  /** BullMQ processedOn → finishedOn of the item-block and post-hooks jobs. */
  itemBlockJobMs: Distribution;
  postHooksJobMs: Distribution;
  postHooks: number;
  /** Non-watch Kubernetes API requests of the whole run ÷ PVBs. */
  apiRequestsPerPvb: number;
  /** The same split by who makes them (see README: attribution by resource and verb). */
  apiRequestsPerPvbBy: { pipeline: number; hookExecs: number; nodeAgents: number };
  apiRequests: { total: number; watchesOpened: number; byResource: Record<string, Record<string, number>> };
  redisCommandsPerBlock: number;
  redisCommands: number;
  redisTopCommands: Record<string, number>;
  /** Every command's calls per block (INFO commandstats delta ÷ blocks), most first. */
  redisCommandsPerBlockByCommand: Record<string, number>;
  /**
   * With --redis-monitor: commands per block by origin (a script by name, its own commands
   * included, or a plain command), from MONITOR over the measured backup; most first.
   */
  redisCommandsPerBlockByOrigin?: Record<string, { calls: number; commands: number }>;
  workerPeakRssBytes: number[];
  workerCpuSeconds: number[];
  redisCpuSeconds: number;
  /** The driver process (plan, finalize, this script's polling). */
  driverCpuSeconds: number;
  /** The simulator's process (the cluster's API server stand-in). */
  simCpuSeconds: number;
  /** Per item-block job, ms after the submit: BullMQ processedOn and finishedOn. */
  itemBlockJobTimes: Array<{ startMs: number; endMs: number }>;
  /** Per PVB, ms after the submit: created (the create returned), copy start and end (for a skeptic's own analysis). */
  pvbTimes: Array<{ node: string; createdMs?: number; startMs: number; endMs: number }>;
  timeline: TimelineInput;
  problems: string[];
}

/** Requests only a node agent makes (it reads the pod and PVC of a PVB and writes PVB status). */
function isNodeAgentRequest(resource: string, verb: string): boolean {
  if (resource === 'podvolumebackups.stowage.dev/status') return true;
  if ((resource === 'pods' || resource === 'persistentvolumeclaims' || resource === 'nodes') && verb === 'get') return true;
  return false;
}

/**
 * Non-watch requests by who makes them: node agents (see above), hook execs (`pods/exec`, one
 * per hook run, by the workers), and the rest of the pipeline (plan's discovery and lists, PVB
 * create/get/list/patch, finalize's list).
 */
export function splitRequests(counts: RequestCounts): { total: number; pipeline: number; hookExecs: number; nodeAgents: number } {
  let total = 0;
  let nodeAgents = 0;
  let hookExecs = 0;
  for (const [resource, verbs] of Object.entries(counts.byResource)) {
    for (const [verb, n] of Object.entries(verbs)) {
      total += n;
      if (isNodeAgentRequest(resource, verb)) nodeAgents += n;
      else if (resource === 'pods/exec') hookExecs += n;
    }
  }
  return { total, pipeline: total - nodeAgents - hookExecs, hookExecs, nodeAgents };
}

const ms = (iso: string | undefined | null): number | undefined => (iso ? Date.parse(iso) : undefined);

export function fsNamespaces(blocks: number): { namespaces: number; podsPerNamespace: number } {
  // Up to 500 pods per namespace, evenly: the smallest namespace count that divides the blocks.
  for (let n = Math.ceil(blocks / 500); n <= blocks; n++) if (blocks % n === 0) return { namespaces: n, podsPerNamespace: blocks / n };
  return { namespaces: blocks, podsPerNamespace: 1 };
}

/** One mode of the fs-backup scenario in a fresh environment. */
export async function runFsMode(
  scenario: FsScenario,
  mode: Mode,
  logDir: string,
  keepLogs: boolean,
  say: (line: string) => void,
  opts: { redisMonitor?: boolean } = {},
): Promise<FsModeResult> {
  const { namespaces, podsPerNamespace } = fsNamespaces(scenario.blocks);
  const fixture = generateCluster({
    namespaces,
    podsPerNamespace,
    volumesPerPod: scenario.volumesPerPod,
    bytesPerVolume: scenario.bytesPerVolume,
    filesPerVolume: scenario.filesPerVolume,
    nodes: scenario.nodes,
    postHook: { durationMs: scenario.postHookMs },
  });
  // A warm-up backup (one small pod per node, namespace warmup-0) runs first in the same
  // environment, so module loading, JIT and the repository's creation are not measured.
  const warmup = generateCluster({
    namespaces: 1,
    podsPerNamespace: scenario.nodes,
    volumesPerPod: 1,
    bytesPerVolume: 4096,
    nodes: scenario.nodes,
    postHook: { durationMs: scenario.postHookMs },
    namespacePrefix: 'warmup',
    includeStowage: false,
  });
  fixture.objects.push(...objectsToMerge(warmup.objects));
  const env = await BenchEnv.start(fixture, 'all', join(logDir, mode));
  const onExit = () => env.killChildren();
  process.once('exit', onExit);
  try {
    const nodes = Array.from({ length: scenario.nodes }, (_, i) => `node-${i}`);
    const t0 = Date.now();
    await env.startNodeAgents({
      nodes,
      perProcess: scenario.agentsPerProcess,
      loadConcurrency: scenario.loadConcurrency,
      bandwidthBytesPerSec: scenario.bandwidthBytesPerSec,
    });
    const workers = await env.startWorkers({
      count: scenario.workers,
      blockConcurrency: scenario.blockConcurrency,
      hookConcurrency: scenario.hookConcurrency,
      waitMode: mode,
    });
    env.hostBackupsQueue();
    say(
      `  ${mode}: ${scenario.nodes} node agents and ${scenario.workers} workers ready in ${((Date.now() - t0) / 1000).toFixed(1)} s; backing up`,
    );

    const warm = await env.runBackup(`warmup-${mode}`, ['warmup-0'], 10 * 60_000);
    if (warm.phase !== 'Completed') env.problems.push(`warm-up backup ended ${warm.phase}`);
    const warmExecs = (await env.sim.execLog()).length;
    say(`  ${mode}: warm-up backup ${warm.phase} in ${warm.completedAt - warm.submittedAt} ms; measuring`);

    const name = `bench-${mode}`;
    const nsNames = Array.from({ length: namespaces }, (_, i) => `bench-${i}`);
    await env.sim.resetRequests();
    const redisBefore = await env.commandStats();
    const redisCpuBefore = await env.redisCpuSeconds();
    const driverCpuBefore = process.cpuUsage();
    const simCpuBefore = (await env.sim.cpuSeconds()) ?? 0;
    const cpuBefore = await Promise.all(workers.map((w) => w.cpuSeconds()));
    const monitor = opts.redisMonitor ? await env.startMonitor() : undefined;
    const profiler = await startDriverProfile();
    const wait = await env.runBackup(name, nsNames, 30 * 60_000);
    await profiler?.stop(`${scenario.blocks}-blocks-${mode}`);
    const monitored = await monitor?.stop();
    const requests = await env.sim.requests();
    const redisDelta = await env.commandStatsSince(redisBefore);
    const redisCpu = (await env.redisCpuSeconds()) - redisCpuBefore;
    const driverCpu = process.cpuUsage(driverCpuBefore);
    const simCpu = ((await env.sim.cpuSeconds()) ?? simCpuBefore) - simCpuBefore;
    const cpuAfter = await Promise.all(workers.map((w) => w.cpuSeconds()));
    const rss = await Promise.all(workers.map((w) => w.peakRssBytes()));
    // Our own waiting loop and the two INFO calls are not the pipeline's.
    redisDelta.hgetall = Math.max(0, (redisDelta.hgetall ?? 0) - wait.pollCommands);
    redisDelta.info = Math.max(0, (redisDelta.info ?? 0) - 2);

    const pvbObjects: PodVolumeBackup[] = await env.pvbs.listPvbs({ labelSelector: `stowage.dev/backup-name=${name}` });
    const execs: ExecRecord[] = (await env.sim.execLog()).slice(warmExecs);
    const counters = await env.state.counters(name);
    const blocks = counters.blocksPlanned ?? counters.blocksDone ?? 0;
    const queueBars = await jobBars(env, name);
    const record = await env.state.getBackup(name);
    const finished = await env.finishedBackup(name);
    const { events } = finished;
    const finalizingAt = events.find((e) => e.type === 'backup.phase' && e.data.to === 'Finalizing')?.at;
    const createdAt = new Map<string, number>();
    for (const e of events) if (e.type === 'pvb.created' && typeof e.data.pvb === 'string') createdAt.set(e.data.pvb, e.at);

    // Per-PVB copy time and the bound.
    const copies = pvbObjects
      .map((p) => ({
        name: p.metadata.name,
        node: p.spec.node,
        pod: `${p.spec.pod.namespace}/${p.spec.pod.name}`,
        start: ms(p.status?.startTimestamp),
        end: ms(p.status?.completionTimestamp),
        phase: p.status?.phase ?? 'New',
      }))
      .filter((c): c is typeof c & { start: number; end: number } => c.start !== undefined && c.end !== undefined);
    const bound = nodeAgentBound(
      copies.map((c) => ({ node: c.node, copyMs: c.end - c.start })),
      scenario.nodes,
      scenario.loadConcurrency,
    );
    const makespanMs = wait.completedAt - wait.submittedAt;

    // Post-hook lag: exec start − the last completion among its pod's PVBs (one pod per block here).
    const lastCompletionByPod = new Map<string, number>();
    for (const c of copies) lastCompletionByPod.set(c.pod, Math.max(lastCompletionByPod.get(c.pod) ?? 0, c.end));
    const lags: number[] = [];
    // Where the lag goes: last PVB done → its post-hooks job starts (its last start: the informer's
    // promotion of the parked job, a free hooks slot), then → the exec starts (reads, the PVB look, the exec call).
    const pvbRecords = finished.blocks.flatMap((b) => b.pvbs);
    const blockOfPod = new Map<string, string>();
    for (const r of pvbRecords) if (r) blockOfPod.set(`${r.podNamespace}/${r.podName}`, r.blockId);
    const hooksJobStart = new Map(queueBars.postHooks.map((b) => [b.blockId, b.startMs]));
    const toJobStart: number[] = [];
    const jobStartToExec: number[] = [];
    for (const e of execs) {
      const pod = `${e.namespace}/${e.pod}`;
      const last = lastCompletionByPod.get(pod);
      const start = ms(e.startedAt);
      if (last === undefined || start === undefined) continue;
      lags.push(start - last);
      const jobStart = hooksJobStart.get(blockOfPod.get(pod) ?? '');
      // Inline mode runs the post hooks inside the item-block job (its post-hooks job is a no-op).
      if (mode === 'decoupled' && jobStart !== undefined && jobStart > 0) {
        toJobStart.push(jobStart - last);
        jobStartToExec.push(start - jobStart);
      }
    }

    const split = splitRequests(requests);
    const pvbCount = Math.max(1, pvbObjects.length);
    const redisTotal = sum(Object.values(redisDelta));
    const top = Object.fromEntries(
      Object.entries(redisDelta)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 8),
    );
    const perBlock = (n: number) => Math.round((n / Math.max(1, blocks)) * 100) / 100;
    const byOrigin = monitored ? commandsByOrigin(monitored.lines, monitored.scriptNames) : undefined;

    const byNode = new Map<string, TimelineBar[]>(nodes.map((n) => [n, []]));
    for (const c of copies)
      byNode.get(c.node)?.push({ startMs: c.start, endMs: c.end, label: `${c.name} (${c.pod}) ${c.end - c.start} ms` });
    const hookBars: TimelineBar[] = execs
      .map((e) => ({
        startMs: ms(e.startedAt) ?? 0,
        endMs: ms(e.endedAt) ?? ms(e.startedAt) ?? 0,
        label: `post hook ${e.namespace}/${e.pod}`,
      }))
      .filter((b) => b.startMs > 0);
    const timeline: TimelineInput = {
      title: `Stowage bench — ${mode}: ${makespanMs} ms for ${pvbObjects.length} PVBs (bound ${Math.round(bound.boundMs)} ms, ×${(makespanMs / bound.boundMs).toFixed(2)})`,
      subtitle: `${scenario.blocks} blocks × ${scenario.volumesPerPod} vol × ${scenario.bytesPerVolume} B; N=${scenario.nodes} K=${scenario.loadConcurrency} (${scenario.bandwidthBytesPerSec} B/s per agent); W=${scenario.workers} C=${scenario.blockConcurrency}. Lanes: PVB copies per node, item-block jobs, post-hooks jobs, post hook execs.`,
      originMs: wait.submittedAt,
      endMs: wait.completedAt,
      groups: [
        ...[...byNode].map(([node, bars]) => ({ name: node, bars, color: '#4c78a8' })),
        { name: 'item-block jobs', bars: queueBars.itemBlocks, color: '#f58518' },
        { name: 'post-hooks jobs', bars: queueBars.postHooks, color: '#b279a2' },
        { name: 'post hook execs', bars: hookBars, color: '#54a24b' },
      ],
      markers: [{ atMs: wait.submittedAt + bound.boundMs, label: 'bound', color: '#e45756' }],
    };

    return {
      mode,
      phase: wait.phase,
      submittedAt: wait.submittedAt,
      makespanMs,
      planMs: record?.planCompletedAt !== undefined ? record.planCompletedAt - wait.submittedAt : undefined,
      finalizeStartMs: finalizingAt !== undefined ? finalizingAt - wait.submittedAt : undefined,
      pvbs: pvbObjects.length,
      blocks,
      pvbCopyMs: distribution(copies.map((c) => c.end - c.start)),
      pvbCreatedToStartMs: distribution(
        [...earliestPerNode(copies, (c) => c.start).values()].flatMap((c) => {
          const created = createdAt.get(c.name);
          return created === undefined ? [] : [c.start - created];
        }),
      ),
      bound,
      makespanOverBound: makespanMs / bound.boundMs,
      postHookLagMs: distribution(lags),
      postHookLagPartsMs: { toJobStart: distribution(toJobStart), jobStartToExec: distribution(jobStartToExec) },
      itemBlockJobMs: distribution(queueBars.itemBlocks.map((b) => b.endMs - b.startMs)),
      postHooksJobMs: distribution(queueBars.postHooks.map((b) => b.endMs - b.startMs)),
      postHooks: execs.length,
      apiRequestsPerPvb: split.total / pvbCount,
      apiRequestsPerPvbBy: {
        pipeline: split.pipeline / pvbCount,
        hookExecs: split.hookExecs / pvbCount,
        nodeAgents: split.nodeAgents / pvbCount,
      },
      apiRequests: { total: split.total, watchesOpened: requests.watches.opened, byResource: requests.byResource },
      redisCommandsPerBlock: redisTotal / Math.max(1, blocks),
      redisCommands: redisTotal,
      redisTopCommands: top,
      redisCommandsPerBlockByCommand: Object.fromEntries(
        Object.entries(redisDelta)
          .sort((a, b) => b[1] - a[1])
          .map(([cmd, n]) => [cmd, perBlock(n)]),
      ),
      ...(byOrigin
        ? {
            redisCommandsPerBlockByOrigin: Object.fromEntries(
              Object.entries(byOrigin)
                .sort((a, b) => b[1].commands - a[1].commands)
                .map(([origin, c]) => [origin, { calls: perBlock(c.calls), commands: perBlock(c.commands) }]),
            ),
          }
        : {}),
      workerPeakRssBytes: rss.map((r) => r ?? 0),
      workerCpuSeconds: cpuAfter.map((a, i) => Math.max(0, (a ?? 0) - (cpuBefore[i] ?? 0))),
      redisCpuSeconds: redisCpu,
      driverCpuSeconds: (driverCpu.user + driverCpu.system) / 1e6,
      simCpuSeconds: simCpu,
      itemBlockJobTimes: queueBars.itemBlocks
        .map((b) => ({ startMs: b.startMs - wait.submittedAt, endMs: b.endMs - wait.submittedAt }))
        .sort((a, b) => a.startMs - b.startMs),
      pvbTimes: copies
        .map((c) => {
          const created = createdAt.get(c.name);
          return {
            node: c.node,
            ...(created !== undefined ? { createdMs: created - wait.submittedAt } : {}),
            startMs: c.start - wait.submittedAt,
            endMs: c.end - wait.submittedAt,
          };
        })
        .sort((a, b) => a.startMs - b.startMs),
      timeline,
      problems: env.problems,
    };
  } finally {
    process.removeListener('exit', onExit);
    await env.close(keepLogs);
  }
}

/** Start/end of every finished item-block and post-hooks job (BullMQ keeps the last 10,000 of each). */
type JobBar = TimelineBar & { blockId: string };

async function jobBars(env: BenchEnv, backupName: string): Promise<{ itemBlocks: JobBar[]; postHooks: JobBar[] }> {
  const read = async (name: QueueName) => {
    const queue = createQueue(name, { connection: env.redis, prefix: env.queuePrefix });
    try {
      const jobs = await queue.getJobs(['completed', 'failed'], 0, -1);
      return jobs
        .filter((j) => (j.data as { backupName?: unknown }).backupName === backupName)
        .filter((j) => j.processedOn !== undefined && j.finishedOn !== undefined)
        .map((j) => ({
          startMs: j.processedOn ?? 0,
          endMs: j.finishedOn ?? 0,
          label: `${j.name} ${j.id}`,
          blockId: String((j.data as { blockId?: unknown }).blockId ?? ''),
        }));
    } finally {
      await queue.close();
    }
  };
  return { itemBlocks: await read(QueueName.itemBlocks), postHooks: await read(QueueName.hooks) };
}
