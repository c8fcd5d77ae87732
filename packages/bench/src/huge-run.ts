import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { generateCluster } from '@stowage/kube-sim';
import { QueueName } from '@stowage/queue';
import { Queue } from 'bullmq';
import { BenchEnv, objectsToMerge } from './bench-env.js';
import { startDriverProfile } from './driver-profile.js';
import { type PartRunQueueWait, readRunQueueWaits, runQueueWaitOfParts } from './run-queue.js';
import { sum } from './stats.js';

/** The `huge` scenario: a generated fleet-sized cluster, backed up whole by 4 workers on one Redis. */
export interface HugeScenario {
  /** Volume-less-backup pods (each with a PVC and a PV that are backed up as items, no PVB). */
  pods: number;
  namespaces: number;
  nodes: number;
  /** Pods (in their own namespaces, on 4 nodes with node agents) whose one tiny volume is copied by a PVB. */
  tinyVolumePods: number;
  tinyVolumeBytes: number;
  /** Pods of the small backup submitted while the big one runs (fairness). */
  smallPods: number;
  /** When the small backup is submitted after the big one. */
  smallAfterMs: number;
  workers: number;
  concurrency: number;
  /** The dispatch window measured against no window (0). */
  blocksInFlightPerBackup: number;
}

export const HUGE_DEFAULTS: HugeScenario = {
  pods: 100_000,
  namespaces: 1_000,
  nodes: 100,
  tinyVolumePods: 1_000,
  tinyVolumeBytes: 4 * 1024,
  smallPods: 100,
  smallAfterMs: 5_000,
  workers: 4,
  concurrency: 32,
  blocksInFlightPerBackup: 1_000,
};

const AGENT_NODES = ['node-0', 'node-1', 'node-2', 'node-3'];
const TINY_NAMESPACES = 10;
/** Listed by the workers' and node agents' informers (and relisted when a watch expires), not by plan. */
const INFORMER_RESOURCES = new Set(['podvolumebackups.stowage.dev', 'podvolumerestores.stowage.dev']);

/** One big backup (with the small one submitted during it), with or without the dispatch window. */
export interface HugeBackupRun {
  window: number;
  phase: string;
  blocks: number;
  items: number;
  /** Submit → every block planned and stored (and, without a window, added to the queues). */
  planMs: number | undefined;
  /** Submit → the first block done (polled every 200 ms). */
  firstBlockMs: number | undefined;
  /** Blocks added per second while planning (blocks ÷ planMs); with a window, planning only stores most of them. */
  dispatchBlocksPerSecond: number | undefined;
  makespanMs: number;
  blocksPerSecond: number;
  /** LIST requests the simulator counted during the backup, and the resource types listed. */
  listCalls: number;
  /** The same without the informers' lists (workers' and node agents': PVBs, PVRs, and every LIST with a selector), i.e. plan's. */
  planListCalls: number;
  listedResourceTypes: number;
  listCallsByResource: Record<string, number>;
  /** Submit → every block done (polled every 200 ms): the blocks' part of the makespan, finalize excluded. */
  blocksDoneMs: number | undefined;
  redisCommandsPerBlock: number;
  redisTopCommandsPerBlock: Record<string, number>;
  workerCpuSeconds: number[];
  redisCpuSeconds: number;
  driverCpuSeconds: number;
  simCpuSeconds: number;
  /** Time each part's threads were ready to run but waited for a core during the backup (schedstat). */
  runQueueWaitSeconds?: Record<string, PartRunQueueWait>;
  /** The small backup submitted `smallAfterMs` after the big one. */
  small: SmallRun;
  /**
   * The driver's event-loop delay while the big backup was Finalizing (the driver hosts finalize,
   * as the API service does): how long any other backup's plan or finalize step waited for a turn.
   */
  finalizeLoopDelay: LoopDelay | undefined;
}

/** Event-loop delay over a stretch (perf_hooks, 10 ms resolution). */
export interface LoopDelay {
  /** How long the stretch lasted (first poll that saw it → the backup's end). */
  spanMs: number;
  p99Ms: number;
  maxMs: number;
}

/**
 * Measures the driver's event-loop delay from the first poll that sees `name` Finalizing until
 * `done` settles; `polls` counts the record reads (HGETALL) it made, which are the bench's own.
 */
async function loopDelayWhileFinalizing(
  env: BenchEnv,
  name: string,
  done: Promise<unknown>,
): Promise<{ delay: LoopDelay | undefined; polls: number }> {
  let ended = false;
  let polls = 0;
  done.then(
    () => (ended = true),
    () => (ended = true),
  );
  while (!ended) {
    polls++;
    if ((await env.state.getBackup(name))?.phase === 'Finalizing') break;
    await new Promise((r) => setTimeout(r, 50));
  }
  if (ended) return { delay: undefined, polls };
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  const from = Date.now();
  histogram.enable();
  await done.catch(() => undefined);
  histogram.disable();
  return { delay: { spanMs: Date.now() - from, p99Ms: histogram.percentile(99) / 1e6, maxMs: histogram.max / 1e6 }, polls };
}

/**
 * Plan and dispatch alone: the item-blocks queue paused until plan is done, then resumed, with the
 * small backup submitted `smallAfterMs` after the resume (a backlog of blocks ahead of it).
 */
export interface DispatchOnlyRun {
  window: number;
  blocks: number;
  /** Submit → every block planned, stored and queued. */
  planAndDispatchMs: number;
  dispatchBlocksPerSecond: number;
  /** used_memory with every block queued − before submit, ÷ blocks. */
  redisBytesPerQueuedBlock: number;
  /** Of that, the backup's plan state (block plans, item manifests, plan order) per block. */
  planStateBytesPerBlock: number;
  /** Then resumed: blocks ÷ (resume → every block done), the workers draining a full queue. */
  drainBlocksPerSecond: number | undefined;
  phase: string;
  /** The small backup submitted after the resume, behind the backlog. */
  small: SmallRun;
}

export interface HugeResult {
  scenario: HugeScenario;
  /** No window (every block queued: plan + dispatch time, memory), then with the window. */
  dispatchOnly: DispatchOnlyRun;
  backlogWindowed: DispatchOnlyRun;
  /** One paginated list per resource type and backup: LIST requests the pages of such lists would take (the big and the small backup; informers' lists not counted). */
  expectedListRequests: number;
  /** The small backup on its own (idle workers), submit → Completed. */
  smallAloneMs: number;
  /** The same, with its parts. */
  smallAlone: SmallRun;
  windowed: HugeBackupRun;
  unwindowed: HugeBackupRun;
  problems: string[];
}

/** The small backup: submit → end, and where the time went (ms after its submit). */
export interface SmallRun {
  phase: string;
  makespanMs: number;
  overAlone: number;
  /** Submit → its plan stored (every block planned). */
  planMs?: number | undefined;
  /** Submit → its last block done (finalize after). */
  blocksDoneMs?: number | undefined;
}

function smallRun(w: Watch, submittedAt: number, aloneMs: number): SmallRun {
  return {
    phase: w.phase,
    makespanMs: w.completedAt - submittedAt,
    overAlone: (w.completedAt - submittedAt) / Math.max(1, aloneMs),
    planMs: w.planDoneAt !== undefined ? w.planDoneAt - submittedAt : undefined,
    blocksDoneMs: w.blocksDoneAt !== undefined ? w.blocksDoneAt - submittedAt : undefined,
  };
}

interface Watch {
  phase: string;
  completedAt: number;
  planDoneAt?: number;
  firstBlockAt?: number;
  blocksDoneAt?: number;
  polls: number;
}

/**
 * `pnpm bench --scenario huge`: one simulator holding the whole fleet (big namespaces, tiny-volume
 * namespaces, the small backup's namespace), one redis-server, W worker processes, node agents on
 * four nodes. Measured: the small backup alone; then the big backup with the dispatch window and
 * the small one submitted during it; then the same without the window.
 */
export async function runHuge(s: HugeScenario, logDir: string, keepLogs: boolean, say: (line: string) => void): Promise<HugeResult> {
  const podsPerNamespace = Math.max(1, Math.floor(s.pods / s.namespaces));
  const big = generateCluster({ namespaces: s.namespaces, podsPerNamespace, volumesPerPod: 1, bytesPerVolume: 0, nodes: s.nodes });
  const tinyPerNs = Math.max(1, Math.ceil(s.tinyVolumePods / TINY_NAMESPACES));
  const tiny = generateCluster({
    namespaces: s.tinyVolumePods > 0 ? TINY_NAMESPACES : 0,
    podsPerNamespace: tinyPerNs,
    volumesPerPod: 1,
    bytesPerVolume: s.tinyVolumeBytes,
    nodes: AGENT_NODES.length,
    namespacePrefix: 'tiny',
    includeStowage: false,
    storageClassName: 'tiny',
  });
  const small = generateCluster({
    namespaces: 1,
    podsPerNamespace: s.smallPods,
    volumesPerPod: 1,
    bytesPerVolume: 0,
    nodes: s.nodes,
    namespacePrefix: 'small',
    includeStowage: false,
  });
  big.objects.push(...objectsToMerge(tiny.objects), ...objectsToMerge(small.objects));
  big.objects.push({
    apiVersion: 'storage.k8s.io/v1',
    kind: 'StorageClass',
    metadata: { name: 'tiny' },
    provisioner: 'sim.csi.stowage.dev',
    reclaimPolicy: 'Delete',
    volumeBindingMode: 'Immediate',
  });
  say(`  huge: ${big.objects.length} objects in the simulator`);
  const env = await BenchEnv.start(big, 'with-files', join(logDir, 'huge'));
  const onExit = () => env.killChildren();
  process.once('exit', onExit);
  try {
    if (s.tinyVolumePods > 0) {
      await env.startNodeAgents({
        nodes: AGENT_NODES,
        perProcess: AGENT_NODES.length,
        loadConcurrency: 4,
        bandwidthBytesPerSec: 64 * 1024 * 1024,
      });
    }
    const workers = await env.startWorkers({
      count: s.workers,
      blockConcurrency: s.concurrency,
      hookConcurrency: s.concurrency,
      waitMode: 'decoupled',
    });
    const bigNamespaces = [
      ...Array.from({ length: s.namespaces }, (_, i) => `bench-${i}`),
      ...Array.from({ length: s.tinyVolumePods > 0 ? TINY_NAMESPACES : 0 }, (_, i) => `tiny-${i}`),
    ];
    // Tiny volumes (storage class `tiny`) are copied; every other volume is backed up as its PVC and PV only.
    const spec = {
      defaultVolumesToFsBackup: false,
      resourcePolicy: { kind: 'Inline', volumePolicies: [{ conditions: { storageClass: ['tiny'] }, action: { type: 'fs-backup' } }] },
    };
    const watch = async (name: string, submittedAt: number, timeoutMs: number): Promise<Watch> => {
      const out: Partial<Watch> & { polls: number } = { polls: 0 };
      const deadline = submittedAt + timeoutMs;
      for (;;) {
        out.polls++;
        const [rec, cnt] = await Promise.all([env.state.getBackup(name), env.state.counters(name)]);
        const now = Date.now();
        if (out.firstBlockAt === undefined && (cnt.blocksDone ?? 0) > 0) out.firstBlockAt = now;
        if (out.planDoneAt === undefined && rec?.planCompletedAt !== undefined) out.planDoneAt = rec.planCompletedAt;
        if (out.blocksDoneAt === undefined && cnt.blocksPlanned !== undefined && (cnt.blocksDone ?? 0) >= cnt.blocksPlanned)
          out.blocksDoneAt = now;
        if (
          rec &&
          ['Completed', 'PartiallyFailed', 'Failed', 'Canceled', 'FailedValidation'].includes(rec.phase) &&
          rec.archivedAt !== undefined
        ) {
          return { ...out, phase: rec.phase, completedAt: rec.completedAt ?? now } as Watch;
        }
        const dead = env.children.find((c) => c.hasExited);
        if (dead) throw new Error(`${dead.name} exited during the run; last lines:\n${dead.lastLines().join('\n')}`);
        if (now > deadline) throw new Error(`backup ${name} did not end within ${timeoutMs / 1000} s (phase ${rec?.phase})`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };

    // The small backup alone, twice (the first warms the workers up); the second is the reference.
    env.hostBackupsQueue({ blocksInFlightPerBackup: s.blocksInFlightPerBackup });
    let smallAloneMs = 0;
    let smallAlone: SmallRun | undefined;
    for (const name of ['small-warmup', 'small-alone']) {
      const at = await env.submit(name, ['small-0'], spec);
      const w = await watch(name, at, 10 * 60_000);
      if (w.phase !== 'Completed') env.problems.push(`${name} ended ${w.phase}`);
      smallAloneMs = w.completedAt - at;
      smallAlone = smallRun(w, at, smallAloneMs);
    }
    say(`  huge: the ${s.smallPods}-pod backup alone took ${smallAloneMs} ms`);

    // Plan and dispatch with item-blocks paused until plan is done (no window: every block queued,
    // Redis holds them all), then resumed; the small backup goes in behind the backlog.
    const backlogRun = async (window: number): Promise<DispatchOnlyRun> => {
      await env.stopBackupsQueue();
      env.hostBackupsQueue({ blocksInFlightPerBackup: window });
      say(
        `  huge: plan and dispatch with item-blocks paused, window ${window || 'off'}; the small backup ${s.smallAfterMs / 1000} s after the resume`,
      );
      const itemBlocks = new Queue(QueueName.itemBlocks, { connection: env.redis, prefix: env.queuePrefix });
      try {
        await itemBlocks.pause();
        await lazyFreeSettled(env);
        const memBefore = await usedMemory(env);
        const name = `huge-backlog-w${window}`;
        const at = await env.submit(name, bigNamespaces, spec);
        let planDoneAt: number | undefined;
        while (planDoneAt === undefined) {
          const rec = await env.state.getBackup(name);
          planDoneAt = rec?.planCompletedAt;
          if (Date.now() > at + 60 * 60_000) throw new Error(`${name}: plan did not end within an hour`);
          if (planDoneAt === undefined) await new Promise((r) => setTimeout(r, 200));
        }
        const memAll = await usedMemory(env);
        const stateBytes = await planStateBytes(env, name);
        const blocks = (await env.state.counters(name)).blocksPlanned ?? 0;
        await itemBlocks.resume();
        const resumedAt = Date.now();
        const bigDone = watch(name, at, 60 * 60_000);
        bigDone.catch(() => {});
        await new Promise((r) => setTimeout(r, s.smallAfterMs));
        const smallName = `small-backlog-w${window}`;
        const smallAt = await env.submit(smallName, ['small-0'], spec);
        const sw = await watch(smallName, smallAt, 60 * 60_000);
        const w = await bigDone;
        const run: DispatchOnlyRun = {
          window,
          blocks,
          planAndDispatchMs: planDoneAt - at,
          dispatchBlocksPerSecond: blocks / ((planDoneAt - at) / 1000),
          redisBytesPerQueuedBlock: (memAll - memBefore) / Math.max(1, blocks),
          planStateBytesPerBlock: stateBytes / Math.max(1, blocks),
          drainBlocksPerSecond: w.blocksDoneAt !== undefined ? blocks / ((w.blocksDoneAt - resumedAt) / 1000) : undefined,
          phase: w.phase,
          small: smallRun(sw, smallAt, smallAloneMs),
        };
        if (w.phase !== 'Completed') env.problems.push(`${name} ended ${w.phase}`);
        say(
          `  huge, backlog, window ${window || 'off'}: ${blocks} blocks planned in ${run.planAndDispatchMs} ms, ${(run.redisBytesPerQueuedBlock / 1024).toFixed(2)} KiB of Redis per block; drained at ${Math.round(run.drainBlocksPerSecond ?? 0)} blocks/s; small backup ×${run.small.overAlone.toFixed(1)} its time alone`,
        );
        return run;
      } finally {
        await itemBlocks.close();
      }
    };
    const dispatchOnly = await backlogRun(0);
    const backlogWindowed = await backlogRun(s.blocksInFlightPerBackup);

    const runs: HugeBackupRun[] = [];
    for (const window of [s.blocksInFlightPerBackup, 0]) {
      await env.stopBackupsQueue();
      env.hostBackupsQueue({ blocksInFlightPerBackup: window });
      const name = `huge-w${window}`;
      say(`  huge: backing up ${s.pods + s.tinyVolumePods} pods, dispatch window ${window || 'off'}`);
      await env.sim.resetRequests();
      const redisBefore = await env.commandStats();
      const redisCpuBefore = await env.redisCpuSeconds();
      const driverCpuBefore = process.cpuUsage();
      const simCpuBefore = (await env.sim.cpuSeconds()) ?? 0;
      const cpuBefore = await Promise.all(workers.map((w) => w.cpuSeconds()));
      const parts = await env.processParts();
      const waitsBefore = await readRunQueueWaits(parts);
      const profiler = await startDriverProfile();
      const submittedAt = await env.submit(name, bigNamespaces, spec);
      const bigDone = watch(name, submittedAt, 60 * 60_000);
      bigDone.catch(() => {});
      const finalizeLoopDelay = loopDelayWhileFinalizing(env, name, bigDone);
      await new Promise((r) => setTimeout(r, s.smallAfterMs));
      const smallName = `small-during-w${window}`;
      const smallAt = await env.submit(smallName, ['small-0'], spec);
      const smallWatch = await watch(smallName, smallAt, 60 * 60_000);
      const w = await bigDone;
      const loopDelay = await finalizeLoopDelay;
      const requests = await env.sim.requests();
      const redisDelta = await env.commandStatsSince(redisBefore);
      const redisCpu = (await env.redisCpuSeconds()) - redisCpuBefore;
      const driverCpu = process.cpuUsage(driverCpuBefore);
      const simCpu = ((await env.sim.cpuSeconds()) ?? simCpuBefore) - simCpuBefore;
      const cpuAfter = await Promise.all(workers.map((wk) => wk.cpuSeconds()));
      const runQueueWaitSeconds = runQueueWaitOfParts(parts, waitsBefore, await readRunQueueWaits(parts));
      // Written after the readings: serializing a profile costs the driver CPU of its own.
      await profiler?.stop(`huge-${name}`);
      // The two watches' polls (HGETALL record + counters each) are the driver's, not the pipeline's.
      redisDelta.hgetall = Math.max(0, (redisDelta.hgetall ?? 0) - 2 * (w.polls + smallWatch.polls) - loopDelay.polls);
      const counters = await env.state.counters(name);
      const smallCounters = await env.state.counters(smallName);
      const blocks = counters.blocksPlanned ?? counters.blocksDone ?? 0;
      const smallBlocks = smallCounters.blocksPlanned ?? 0;
      const makespanMs = w.completedAt - submittedAt;
      const planMs = w.planDoneAt !== undefined ? w.planDoneAt - submittedAt : undefined;
      const listCallsByResource: Record<string, number> = {};
      for (const [resource, verbs] of Object.entries(requests.byResource)) {
        const n = (verbs as Record<string, number>).list ?? 0;
        if (n > 0) listCallsByResource[resource] = n;
      }
      const run: HugeBackupRun = {
        window,
        phase: w.phase,
        blocks,
        items: counters.itemsBackedUp ?? 0,
        planMs,
        firstBlockMs: w.firstBlockAt !== undefined ? w.firstBlockAt - submittedAt : undefined,
        dispatchBlocksPerSecond: planMs ? blocks / (planMs / 1000) : undefined,
        makespanMs,
        blocksPerSecond: blocks / (makespanMs / 1000),
        listCalls: sum(Object.values(listCallsByResource)),
        // Plan lists whole types; a LIST with a selector is an informer's (the agents' and workers' pod informers).
        planListCalls: sum(
          Object.entries(listCallsByResource).flatMap(([resource, n]) =>
            INFORMER_RESOURCES.has(resource) ? [] : [n - (requests.selectorLists[resource] ?? 0)],
          ),
        ),
        listedResourceTypes: Object.keys(listCallsByResource).length,
        listCallsByResource,
        blocksDoneMs: w.blocksDoneAt !== undefined ? w.blocksDoneAt - submittedAt : undefined,
        redisCommandsPerBlock: sum(Object.values(redisDelta)) / Math.max(1, blocks + smallBlocks),
        redisTopCommandsPerBlock: Object.fromEntries(
          Object.entries(redisDelta)
            .sort((a, b) => b[1] - a[1])
            .slice(0, 10)
            .map(([k, v]) => [k, Math.round((v / Math.max(1, blocks + smallBlocks)) * 100) / 100]),
        ),
        workerCpuSeconds: cpuAfter.map((a, i) => Math.max(0, (a ?? 0) - (cpuBefore[i] ?? 0))),
        redisCpuSeconds: redisCpu,
        driverCpuSeconds: (driverCpu.user + driverCpu.system) / 1e6,
        simCpuSeconds: simCpu,
        runQueueWaitSeconds,
        small: smallRun(smallWatch, smallAt, smallAloneMs),
        finalizeLoopDelay: loopDelay.delay,
      };
      if (run.phase !== 'Completed') env.problems.push(`${name} ended ${run.phase}`);
      say(
        `  huge, window ${window || 'off'}: ${run.phase}, ${blocks} blocks in ${makespanMs} ms = ${Math.round(run.blocksPerSecond)} blocks/s; plan ${planMs} ms; small backup ×${run.small.overAlone.toFixed(1)} its time alone`,
      );
      runs.push(run);
    }
    const [windowed, unwindowed] = runs as [HugeBackupRun, HugeBackupRun];

    // One paginated list (pages of 500) per resource type and backup: across the cluster for the big
    // backup (its 1,000+ namespaces); in its one namespace for the small backup, which then reads
    // the first page of PVs and GETs the rest of its PVs, and GETs its Namespace (namespaceListsMax).
    const pages = (n: number) => Math.max(1, Math.ceil(n / 500));
    const related = pages(podsPerNamespace * s.namespaces + tinyPerNs * (s.tinyVolumePods > 0 ? TINY_NAMESPACES : 0) + s.smallPods);
    // Namespaces fill pages too (1,000 and more here); every other type listed fits one page.
    const namespacePages = pages(big.objects.filter((o) => (o as { kind?: string }).kind === 'Namespace').length);
    const planTypes = Object.keys(windowed.listCallsByResource).filter((r) => !INFORMER_RESOURCES.has(r)).length;
    const otherTypes = planTypes - 4; // besides pods, PVCs, PVs and namespaces
    const bigListRequests = 3 * related + namespacePages + otherTypes;
    const smallListRequests = 2 * pages(s.smallPods) + 1 + otherTypes;
    const expectedListRequests = bigListRequests + smallListRequests;
    return {
      scenario: s,
      dispatchOnly,
      backlogWindowed,
      expectedListRequests,
      smallAloneMs,
      smallAlone: smallAlone as SmallRun,
      windowed,
      unwindowed,
      problems: env.problems,
    };
  } finally {
    process.removeListener('exit', onExit);
    await env.close(keepLogs);
  }
}

/** Waits (bounded) until Redis has freed what earlier UNLINKs handed to its lazy-free thread. */
async function lazyFreeSettled(env: BenchEnv): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const info = await env.redis.info('memory');
    if (Number(/^lazyfree_pending_objects:(\d+)/m.exec(info)?.[1] ?? 0) === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function usedMemory(env: BenchEnv): Promise<number> {
  const info = await env.redis.info('memory');
  return Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? 0);
}

/** Bytes of the backup's block plans and item manifests (MEMORY USAGE of the two hashes, sampled). */
async function planStateBytes(env: BenchEnv, name: string): Promise<number> {
  let total = 0;
  for (const suffix of ['plan', 'items', 'border']) {
    const n = (await env.redis.call('MEMORY', 'USAGE', env.state.key(name, suffix), 'SAMPLES', '1000')) as number | null;
    total += n ?? 0;
  }
  return total;
}
