import { join } from 'node:path';
import { generateCluster } from '@stowage/kube-sim';
import { BenchEnv, objectsToMerge } from './bench-env.js';
import { startDriverProfile } from './driver-profile.js';
import { fsNamespaces, splitRequests } from './fs-backup-run.js';
import { sum } from './stats.js';

export interface OrchestrationResult {
  workers: number;
  concurrency: number;
  pods: number;
  /** Blocks the plan made (one per pod, plus the namespaces' and other items' blocks). */
  blocks: number;
  phase: string;
  makespanMs: number;
  /** Submit → plan stored and every block added. */
  planMs: number | undefined;
  /** Submit → finalize started (the backup moved to Finalizing: every block done). */
  finalizeStartMs: number | undefined;
  blocksPerSecond: number;
  /**
   * The same backup of a copy of the cluster run first, on workers just started (cold: code not
   * yet optimised by V8's JIT): submit → Completed. The measured backup above runs after it, as
   * the fs-backup scenario measures after its warm-up backup.
   */
  cold: { blocks: number; makespanMs: number; blocksPerSecond: number; phase: string };
  redisCommandsPerBlock: number;
  /** The most frequent Redis commands of the run (evalsha = BullMQ's and our Lua scripts), per block. */
  redisTopCommandsPerBlock: Record<string, number>;
  apiRequests: number;
  workerPeakRssBytes: number[];
  workerCpuSeconds: number[];
  redisCpuSeconds: number;
  driverCpuSeconds: number;
  /** The simulator's process (the cluster's API server stand-in). */
  simCpuSeconds: number;
  problems: string[];
}

/** Volume-less, hook-less blocks end to end: what the queue graph costs with nothing to wait for. */
export async function runOrchestration(
  opts: { pods: number; workers: number; concurrency: number },
  logDir: string,
  keepLogs: boolean,
  say: (line: string) => void,
): Promise<OrchestrationResult> {
  const { namespaces, podsPerNamespace } = fsNamespaces(opts.pods);
  const fixture = generateCluster({ namespaces, podsPerNamespace, volumesPerPod: 0, bytesPerVolume: 0, nodes: 4 });
  // The same cluster once more under warmup-*: backed up first, on the fresh workers.
  const warmup = generateCluster({
    namespaces,
    podsPerNamespace,
    volumesPerPod: 0,
    bytesPerVolume: 0,
    nodes: 4,
    namespacePrefix: 'warmup',
    includeStowage: false,
  });
  fixture.objects.push(...objectsToMerge(warmup.objects));
  const env = await BenchEnv.start(fixture, 'none', join(logDir, `orchestration-w${opts.workers}`));
  const onExit = () => env.killChildren();
  process.once('exit', onExit);
  try {
    const workers = await env.startWorkers({
      count: opts.workers,
      blockConcurrency: opts.concurrency,
      hookConcurrency: opts.concurrency,
      waitMode: 'decoupled',
    });
    env.hostBackupsQueue();
    say(`  orchestration, ${opts.workers} worker(s): first backup of ${opts.pods} volume-less pods on the fresh workers`);
    const coldName = `warmup-orch-w${opts.workers}`;
    const coldWait = await env.runBackup(
      coldName,
      Array.from({ length: namespaces }, (_, i) => `warmup-${i}`),
      30 * 60_000,
    );
    const coldCounters = await env.state.counters(coldName);
    const coldBlocks = coldCounters.blocksPlanned ?? coldCounters.blocksDone ?? 0;
    const coldMs = coldWait.completedAt - coldWait.submittedAt;
    const cold = { blocks: coldBlocks, makespanMs: coldMs, blocksPerSecond: coldBlocks / (coldMs / 1000), phase: coldWait.phase };
    if (cold.phase !== 'Completed') env.problems.push(`first (cold) backup ended ${cold.phase}`);
    const name = `bench-orch-w${opts.workers}`;
    await env.sim.resetRequests();
    const redisBefore = await env.commandStats();
    const redisCpuBefore = await env.redisCpuSeconds();
    const driverCpuBefore = process.cpuUsage();
    const simCpuBefore = (await env.sim.cpuSeconds()) ?? 0;
    const cpuBefore = await Promise.all(workers.map((w) => w.cpuSeconds()));
    say(`  orchestration, ${opts.workers} worker(s): measuring a second backup of ${opts.pods} volume-less pods`);
    const profiler = await startDriverProfile();
    const wait = await env.runBackup(
      name,
      Array.from({ length: namespaces }, (_, i) => `bench-${i}`),
      30 * 60_000,
    );
    await profiler?.stop(`orchestration-w${opts.workers}`);
    const requests = await env.sim.requests();
    const redisDelta = await env.commandStatsSince(redisBefore);
    const redisCpu = (await env.redisCpuSeconds()) - redisCpuBefore;
    const driverCpu = process.cpuUsage(driverCpuBefore);
    const simCpu = ((await env.sim.cpuSeconds()) ?? simCpuBefore) - simCpuBefore;
    redisDelta.hgetall = Math.max(0, (redisDelta.hgetall ?? 0) - wait.pollCommands);
    redisDelta.info = Math.max(0, (redisDelta.info ?? 0) - 2);
    const cpuAfter = await Promise.all(workers.map((w) => w.cpuSeconds()));
    const rss = await Promise.all(workers.map((w) => w.peakRssBytes()));
    const counters = await env.state.counters(name);
    const record = await env.state.getBackup(name);
    const blocks = counters.blocksPlanned ?? counters.blocksDone ?? 0;
    const finalizingAt = (await env.finishedBackup(name)).events.find((e) => e.type === 'backup.phase' && e.data.to === 'Finalizing')?.at;
    const makespanMs = wait.completedAt - wait.submittedAt;
    return {
      workers: opts.workers,
      concurrency: opts.concurrency,
      pods: opts.pods,
      blocks,
      phase: wait.phase,
      makespanMs,
      planMs: record?.planCompletedAt !== undefined ? record.planCompletedAt - wait.submittedAt : undefined,
      finalizeStartMs: finalizingAt !== undefined ? finalizingAt - wait.submittedAt : undefined,
      blocksPerSecond: blocks / (makespanMs / 1000),
      cold,
      redisCommandsPerBlock: sum(Object.values(redisDelta)) / Math.max(1, blocks),
      redisTopCommandsPerBlock: Object.fromEntries(
        Object.entries(redisDelta)
          .sort((a, b) => b[1] - a[1])
          .slice(0, 12)
          .map(([k, v]) => [k, Math.round((v / Math.max(1, blocks)) * 100) / 100]),
      ),
      apiRequests: splitRequests(requests).total,
      workerPeakRssBytes: rss.map((r) => r ?? 0),
      workerCpuSeconds: cpuAfter.map((a, i) => Math.max(0, (a ?? 0) - (cpuBefore[i] ?? 0))),
      redisCpuSeconds: redisCpu,
      driverCpuSeconds: (driverCpu.user + driverCpu.system) / 1e6,
      simCpuSeconds: simCpu,
      problems: env.problems,
    };
  } finally {
    process.removeListener('exit', onExit);
    await env.close(keepLogs);
  }
}
