import { join } from 'node:path';
import { validateRestoreRequest } from '@stowage/core';
import { createPvbClient, createPvrClient, type PodVolumeRestore, pvrLabels } from '@stowage/kube';
import { generateCluster } from '@stowage/kube-sim';
import {
  DEFAULT_PIPELINE_CONFIG,
  NodeAgentRegistry,
  RestoreState,
  type RunningWorkers,
  restoreApiShares,
  startWorkers,
  statePrefixFor,
  submitRestore,
} from '@stowage/pipeline';
import { createQueue, JobName, QueueName } from '@stowage/queue';
import { FileSystemStorage } from '@stowage/storage';
import { BenchEnv, driverLogger } from './bench-env.js';
import type { BenchChild } from './child-process.js';
import { startDriverProfile } from './driver-profile.js';
import { splitRequests } from './fs-backup-run.js';
import { type PartRunQueueWait, readRunQueueWaits, runQueueWaitOfParts } from './run-queue.js';
import { commandStatsDelta, type Distribution, distribution, sum } from './stats.js';

/** The restore scenario (issue 18): what is backed up, then restored twice, side by side. */
export interface RestoreScenario {
  /** Namespaces of plain objects (plain-0 …), each with `secretsPerNamespace` Secrets and `configMapsPerNamespace` ConfigMaps. */
  plainNamespaces: number;
  secretsPerNamespace: number;
  configMapsPerNamespace: number;
  /** Of those, how many the one-at-a-time mode restores (a rate needs no 20,000 serial creates). */
  serialPlainNamespaces: number;
  /** Pods with one PVC-backed volume each (namespaces pods-0 …, 50 a namespace), restored with a post-restore hook each. */
  pods: number;
  bytesPerVolume: number;
  filesPerVolume: number;
  nodes: number;
  agentsPerProcess: number;
  workers: number;
  /** STOWAGE_RESTORE_ITEMS_CONCURRENCY per worker. */
  itemsConcurrency: number;
  /** STOWAGE_RESTORE_MAX_INFLIGHT of the parallel mode (the product's default, 100). */
  maxInFlight: number;
  /** Added by the simulator to every API request during the restores. */
  latencyMs: number;
  /**
   * Pods restores of the parallel mode, one after another (each into namespaces of its own): the
   * hook lag's p99 is also given pooled over them (one restore's p99 is its second-slowest hook).
   */
  podsRepeat: number;
}

export const RESTORE_SCENARIO: RestoreScenario = {
  plainNamespaces: 20,
  secretsPerNamespace: 500,
  configMapsPerNamespace: 500,
  serialPlainNamespaces: 2,
  pods: 200,
  bytesPerVolume: 64 * 1024,
  filesPerVolume: 2,
  nodes: 20,
  agentsPerProcess: 10,
  workers: 2,
  itemsConcurrency: 8,
  maxInFlight: 100,
  latencyMs: 10,
  podsRepeat: 1,
};

export type RestoreMode = 'parallel' | 'one-at-a-time';

export interface RestorePhaseResult {
  name: string;
  phase: string;
  /** Items the plan selected, and those restored (created/updated/skipped) and failed (counters). */
  items: number;
  itemsRestored: number;
  itemsFailed: number;
  /** Submit → the restore's completedAt (plan, every tier, finalize). */
  makespanMs: number;
  objectsPerSecond: number;
  /** The simulator's own count: most non-watch requests in flight at once during this restore. */
  maxInFlightAtApiServer: number;
  apiRequests: number;
  /**
   * CPU seconds each part used during this restore (/proc for the children, INFO cpu for
   * redis-server, process.cpuUsage for the driver): what the restore costs whatever the load.
   */
  cpuSeconds: { workers: number; simulator: number; redis: number; driver: number; nodeAgents: number; total: number };
  /**
   * Time each part's threads were ready to run but waited for a core during this restore
   * (schedstat; by part: workers, nodeAgents, simulator, redis, driver), summed over its processes.
   */
  runQueueWaitSeconds?: Record<string, PartRunQueueWait>;
  /** Pods scenario only. */
  pvrs?: { total: number; completed: number };
  hookExecs?: number;
  /** Post-restore hook exec start − the last completionTimestamp among its pod's PVRs. */
  hookLagMs?: Distribution;
  /** Those lags themselves, one per hook (for a distribution pooled over several restores). */
  hookLagSamplesMs?: number[];
  /** The same, by the second (from the first PVR end) in which each pod's last PVR ended. */
  hookLagByEndSecond?: Array<{ second: number; lagMs: Distribution }>;
  /**
   * Redis commands of the whole restore (INFO commandstats delta: items, PVRs, hooks, finalize, and
   * this driver's polling of the record every 100 ms) ÷ the pods with PVRs.
   */
  redisCommandsPerPod?: number;
  /**
   * The lag in two parts, from the restore-hooks jobs (BullMQ keeps the last 10,000): last PVR done
   * → the start of the job's run that found the PVRs settled (`wait.containersSince` when it then
   * waited for the container, else its last run's `processedOn`; the PVR informer's promotion and a
   * hooks slot; for restores of older versions a pvr-watch job's end and the parent's release), and
   * that run → exec start (waiting for the container to run: `polls` re-parks, then the exec call).
   */
  hookLagParts?: {
    toFirstRunMs: Distribution;
    /** toFirstRunMs in two (only with pvr-watch jobs, older versions): last PVR done → its pvr-watch job finished, and that → the hooks job's first run. */
    toWatchDoneMs: Distribution;
    /** Of toWatchDoneMs, the last run of that pvr-watch job (its start → finish). */
    watchRunMs: Distribution;
    watchDoneToFirstRunMs: Distribution;
    firstRunToExecMs: Distribution;
    containerPolls: Distribution;
  };
  problems: string[];
}

export interface RestoreModeResult {
  mode: RestoreMode;
  /** STOWAGE_RESTORE_MAX_INFLIGHT of this mode's workers, and how it is split (restore-items jobs at once × requests per job). */
  maxInFlight: number;
  shares: { jobsAtOnce: number; perJob: number };
  /** Absent with `--restore-part pods`. */
  plain?: RestorePhaseResult;
  pods: RestorePhaseResult;
  /** With podsRepeat > 1 (parallel mode): the pods restores after the first, and the hook lag over all of them. */
  podsAgain?: RestorePhaseResult[];
  podsHookLagPooledMs?: Distribution;
}

export interface RestoreBenchResult {
  scenario: RestoreScenario;
  backup: { name: string; phase: string; makespanMs: number; items: number };
  modes: RestoreModeResult[];
  problems: string[];
}

const ENDED = new Set(['Completed', 'PartiallyFailed', 'Failed', 'Canceled', 'FailedValidation']);
const PODS_PER_NAMESPACE = 50;
const HOOK = ['/bin/sh', '-c', 'echo restored > /data/0/.restored'];

/** The cluster: plain-* namespaces of Secrets and ConfigMaps, pods-* namespaces of pods with a PVC each. */
function restoreFixture(s: RestoreScenario) {
  const podNamespaces = Math.ceil(s.pods / PODS_PER_NAMESPACE);
  const fixture = generateCluster({
    namespaces: podNamespaces,
    podsPerNamespace: Math.min(s.pods, PODS_PER_NAMESPACE),
    volumesPerPod: 1,
    bytesPerVolume: s.bytesPerVolume,
    filesPerVolume: s.filesPerVolume,
    nodes: s.nodes,
    namespacePrefix: 'pods',
  });
  for (let n = 0; n < s.plainNamespaces; n++) {
    const namespace = `plain-${n}`;
    fixture.objects.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
    for (let i = 0; i < s.secretsPerNamespace; i++)
      fixture.objects.push({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: `secret-${i}`, namespace, labels: { app: `app-${i % 10}` } },
        type: 'Opaque',
        data: { password: Buffer.from(`pw-${namespace}-${i}`).toString('base64') },
      });
    for (let i = 0; i < s.configMapsPerNamespace; i++)
      fixture.objects.push({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `config-${i}`, namespace, labels: { app: `app-${i % 10}` } },
        data: { 'settings.json': JSON.stringify({ index: i, namespace }) },
      });
  }
  return { fixture, podNamespaces: Array.from({ length: podNamespaces }, (_, i) => `pods-${i}`) };
}

/**
 * pnpm bench --scenario restore: one environment (redis-server, simulator, node agents), one backup
 * of the cluster made by the product's own backup pipeline, then per mode two restores into mapped
 * namespaces with W fresh worker processes: the plain objects, then the pods with their volumes and
 * a post-restore hook each. The one-at-a-time mode is the same code with STOWAGE_RESTORE_MAX_INFLIGHT=1.
 */
export async function runRestoreBench(
  s: RestoreScenario,
  part: 'all' | 'pods',
  logDir: string,
  keepLogs: boolean,
  say: (line: string) => void,
): Promise<RestoreBenchResult> {
  const { fixture, podNamespaces } = restoreFixture(s);
  const plainNamespaces = Array.from({ length: s.plainNamespaces }, (_, i) => `plain-${i}`);
  const env = await BenchEnv.start(fixture, 'all', join(logDir, 'restore'));
  const onExit = () => env.killChildren();
  process.once('exit', onExit);
  const problems = env.problems;
  let restoresHost: RunningWorkers | undefined;
  let workers: BenchChild[] = [];
  try {
    const nodes = Array.from({ length: s.nodes }, (_, i) => `node-${i}`);
    const t0 = Date.now();
    await env.startNodeAgents({ nodes, perProcess: s.agentsPerProcess, loadConcurrency: 2, bandwidthBytesPerSec: 256 * 1024 * 1024 });
    // The driver hosts what the api service hosts: backups (plan, finalize) and restores (plan, tiers, finalize).
    env.hostBackupsQueue();
    const restores = new RestoreState({ redis: env.redis, prefix: statePrefixFor(env.queuePrefix) });
    const pvrs = createPvrClient(env.apiKube, { namespace: 'stowage' });
    restoresHost = startWorkers({
      deps: {
        connection: env.redis,
        queuePrefix: env.queuePrefix,
        state: env.state,
        agents: new NodeAgentRegistry({ redis: env.redis, prefix: statePrefixFor(env.queuePrefix) }),
        kube: env.apiKube,
        pvbs: createPvbClient(env.apiKube, { namespace: 'stowage' }),
        restores,
        pvrs,
        storage: new FileSystemStorage(env.storageDir),
        logger: driverLogger(problems),
        clock: { now: Date.now },
        config: { ...DEFAULT_PIPELINE_CONFIG },
      },
      queues: [QueueName.restores],
      concurrency: { restores: 2 },
    });
    workers = await startRestoreWorkers(env, s, s.maxInFlight);
    say(`  ${s.nodes} node agents and ${s.workers} workers ready in ${((Date.now() - t0) / 1000).toFixed(1)} s; backing the cluster up`);
    const backupName = 'bench-source';
    const backedUp = part === 'pods' ? podNamespaces : [...plainNamespaces, ...podNamespaces];
    const backup = await env.runBackup(backupName, backedUp, 30 * 60_000);
    const backupCounters = await env.state.counters(backupName);
    const backupResult = {
      name: backupName,
      phase: backup.phase,
      makespanMs: backup.completedAt - backup.submittedAt,
      items: backupCounters.itemsBackedUp ?? backupCounters.items ?? 0,
    };
    say(`  backup ${backup.phase} in ${backupResult.makespanMs} ms`);
    if (backup.phase !== 'Completed') throw new Error(`the source backup ended ${backup.phase}; nothing to restore`);
    await env.sim.setFaults({ latencyMs: s.latencyMs });

    const runRestore = async (name: string, spec: Record<string, unknown>, maxInFlight: number): Promise<RestorePhaseResult> => {
      const validation = validateRestoreRequest({ name, spec: { backupName, ...spec } });
      if (!validation.ok) throw new Error(`restore ${name}: ${validation.problems.join('; ')}`);
      const execsBefore = (await env.sim.execLog()).length;
      await env.sim.resetRequests();
      const cpuBefore = await cpuNow(env);
      const parts = await env.processParts();
      const waitsBefore = await readRunQueueWaits(parts);
      const commandsBefore = await env.commandStats();
      const profiler = await startDriverProfile();
      const submittedAt = Date.now();
      // As the api service does: the cap is stored before the restore's jobs exist.
      await submitRestore({ restores, connection: env.redis, queuePrefix: env.queuePrefix, maxInFlight }, { name, spec: validation.value });
      let record = await restores.getRestore(name);
      for (;;) {
        if (record && ENDED.has(record.phase)) break;
        const dead = env.children.find((c) => c.hasExited);
        if (dead) throw new Error(`${dead.name} exited during restore ${name}; last lines:\n${dead.lastLines().join('\n')}`);
        if (Date.now() - submittedAt > 30 * 60_000) throw new Error(`restore ${name} did not end within 30 min (${record?.phase})`);
        await new Promise((r) => setTimeout(r, 100));
        record = await restores.getRestore(name);
      }
      const cpuAfter = await cpuNow(env);
      const runQueueWaitSeconds = runQueueWaitOfParts(parts, waitsBefore, await readRunQueueWaits(parts));
      // Written after the readings: serializing a profile costs the driver CPU of its own.
      await profiler?.stop(`restore-${name}`);
      const commands = sum(Object.values(commandStatsDelta(commandsBefore, await env.commandStats())));
      const requests = await env.sim.requests();
      const counters = await restores.counters(name);
      const cpu = {
        workers: cpuAfter.workers - cpuBefore.workers,
        simulator: cpuAfter.simulator - cpuBefore.simulator,
        redis: cpuAfter.redis - cpuBefore.redis,
        driver: cpuAfter.driver - cpuBefore.driver,
        nodeAgents: cpuAfter.nodeAgents - cpuBefore.nodeAgents,
      };
      const makespanMs = (record.completedAt ?? Date.now()) - submittedAt;
      const itemsRestored = counters.itemsRestored ?? 0;
      const result: RestorePhaseResult = {
        name,
        phase: record.phase,
        items: (counters.itemsRestored ?? 0) + (counters.itemsFailed ?? 0),
        itemsRestored,
        itemsFailed: counters.itemsFailed ?? 0,
        makespanMs,
        objectsPerSecond: itemsRestored / (makespanMs / 1000),
        maxInFlightAtApiServer: requests.inFlight.peak,
        apiRequests: splitRequests(requests).total,
        cpuSeconds: { ...cpu, total: cpu.workers + cpu.simulator + cpu.redis + cpu.driver + cpu.nodeAgents },
        runQueueWaitSeconds,
        problems: [],
      };
      const restored = await pvrs.list({ labelSelector: `${pvrLabels.restoreName}=${name}` });
      if (restored.length > 0) {
        const execs = (await env.sim.execLog()).slice(execsBefore);
        result.pvrs = { total: restored.length, completed: restored.filter((p) => p.status?.phase === 'Completed').length };
        result.hookExecs = execs.length;
        result.hookLagSamplesMs = hookLags(restored, execs);
        result.hookLagMs = distribution(result.hookLagSamplesMs);
        result.hookLagByEndSecond = hookLagsByEndSecond(restored, execs);
        result.redisCommandsPerPod = commands / new Set(restored.map((p) => `${p.spec.pod.namespace}/${p.spec.pod.name}`)).size;
        result.hookLagParts = await hookLagParts(env, name, restored, execs);
      }
      if (record.phase !== 'Completed') result.problems.push(`restore ${name} ended ${record.phase}`);
      return result;
    };

    const modes: RestoreModeResult[] = [];
    // One at a time first: the parallel restores then run against a simulator holding more objects (not flattering).
    for (const mode of part === 'pods' ? (['parallel'] as const) : (['one-at-a-time', 'parallel'] as const)) {
      const cap = mode === 'parallel' ? s.maxInFlight : 1;
      // Fresh workers per mode, with the mode's cap (each stores it as restore-items' global concurrency).
      await stopWorkers(env, workers);
      workers = await startRestoreWorkers(env, s, cap);
      const tag = mode === 'parallel' ? 'par' : 'one';
      const plainSubset = mode === 'parallel' ? plainNamespaces : plainNamespaces.slice(0, s.serialPlainNamespaces);
      if (mode === 'parallel') {
        // Warm-up (not measured): module loading and JIT of the fresh workers on a small restore
        // (with --restore-part pods, of one pod namespace: the measured restore follows no plain one).
        const warm = part === 'pods' ? (podNamespaces[0] ?? 'pods-0') : 'plain-0';
        await runRestore('warmup-par', { includedNamespaces: [warm], namespaceMapping: { [warm]: `warmup-${warm}` } }, cap);
      }
      let plain: RestorePhaseResult | undefined;
      if (part === 'all') {
        say(`  ${mode} (STOWAGE_RESTORE_MAX_INFLIGHT=${cap}): restoring ${plainSubset.length} namespaces of plain objects`);
        plain = await runRestore(
          `${tag}-plain`,
          { includedNamespaces: plainSubset, namespaceMapping: Object.fromEntries(plainSubset.map((n) => [n, `${tag}-${n}`])) },
          cap,
        );
        say(
          `    ${plain.phase}: ${plain.itemsRestored} objects in ${plain.makespanMs} ms = ${Math.round(plain.objectsPerSecond)} objects/s; max in flight at the API server ${plain.maxInFlightAtApiServer}`,
        );
      }
      // The pods restore, into namespaces `<into>-<pod namespace>`.
      const restorePods = async (name: string, into: string) => {
        const pods = await runRestore(
          name,
          {
            includedNamespaces: podNamespaces,
            namespaceMapping: Object.fromEntries(podNamespaces.map((n) => [n, `${into}-${n}`])),
            hooks: {
              resources: [
                {
                  name: 'mark-restored',
                  includedNamespaces: podNamespaces.map((n) => `${into}-${n}`),
                  postHooks: [{ exec: { container: 'app', command: HOOK, onError: 'Fail' } }],
                },
              ],
            },
          },
          cap,
        );
        say(
          `    ${pods.phase}: ${pods.itemsRestored} objects, ${pods.pvrs?.completed ?? 0}/${pods.pvrs?.total ?? 0} PVRs, ${pods.hookExecs ?? 0} hooks in ${pods.makespanMs} ms; hook lag p50 ${pods.hookLagMs?.p50} ms p99 ${pods.hookLagMs?.p99} ms; ${pods.redisCommandsPerPod?.toFixed(0)} Redis commands per pod; max in flight ${pods.maxInFlightAtApiServer}`,
        );
        return pods;
      };
      const repeat = mode === 'parallel' ? s.podsRepeat : 1;
      say(`  ${mode}: restoring ${s.pods} pods with volumes and a post-restore hook each${repeat > 1 ? `, ${repeat} times` : ''}`);
      const pods = await restorePods(`${tag}-pods`, tag);
      const podsAgain: RestorePhaseResult[] = [];
      for (let i = 2; i <= repeat; i++) podsAgain.push(await restorePods(`${tag}-pods-${i}`, `${tag}${i}`));
      const pooled = podsAgain.length > 0 ? distribution([pods, ...podsAgain].flatMap((p) => p.hookLagSamplesMs ?? [])) : undefined;
      modes.push({
        mode,
        maxInFlight: cap,
        shares: restoreApiShares(cap),
        ...(plain ? { plain } : {}),
        pods,
        ...(pooled ? { podsAgain, podsHookLagPooledMs: pooled } : {}),
      });
    }
    return { scenario: s, backup: backupResult, modes, problems };
  } finally {
    process.removeListener('exit', onExit);
    await restoresHost?.close().catch(() => undefined);
    await env.close(keepLogs);
  }
}

/** CPU seconds so far of the worker processes, the simulator, redis-server, the driver and the node-agent hosts. */
async function cpuNow(env: BenchEnv) {
  const of = async (names: (n: string) => boolean) =>
    (await Promise.all(env.children.filter((c) => names(c.name)).map((c) => c.cpuSeconds()))).reduce<number>((a, b) => a + (b ?? 0), 0);
  const driver = process.cpuUsage();
  return {
    workers: await of((n) => n.startsWith('worker-')),
    nodeAgents: await of((n) => n.startsWith('agents-')),
    simulator: (await env.sim.cpuSeconds()) ?? 0,
    redis: await env.redisCpuSeconds(),
    driver: (driver.user + driver.system) / 1e6,
  };
}

/** Stops them and forgets them (the waiting loops treat an exited child as a crash). */
async function stopWorkers(env: BenchEnv, workers: BenchChild[]): Promise<void> {
  await Promise.all(workers.map((w) => w.stop()));
  for (const w of workers) env.children.splice(env.children.indexOf(w), 1);
}

/**
 * W workers that restore (restore-items, as stowage-restorer) and W backup workers beside them
 * (blocks, PVR watches and post-restore hooks, as stowage-worker), as the overlay splits them.
 */
async function startRestoreWorkers(env: BenchEnv, s: RestoreScenario, maxInFlight: number): Promise<BenchChild[]> {
  const common = { count: s.workers, blockConcurrency: 4, hookConcurrency: 16, waitMode: 'decoupled' } as const;
  const settings = { STOWAGE_RESTORE_MAX_INFLIGHT: String(maxInFlight), STOWAGE_RESTORE_ITEMS_CONCURRENCY: String(s.itemsConcurrency) };
  const restorers = await env.startWorkers({ ...common, identity: 'restorer', env: settings });
  return [...restorers, ...(await env.startWorkers({ ...common, env: settings }))];
}

/** Per hook exec: when its pod's last PVR completed, and the exec's start − that (restored pods have new uids: matched by namespace/name). */
function hookLagSamples(
  pvrs: PodVolumeRestore[],
  execs: Array<{ namespace: string; pod: string; startedAt: string }>,
): Array<{ done: number; lag: number }> {
  const lastDone = new Map<string, number>();
  for (const p of pvrs) {
    const done = Date.parse(p.status?.completionTimestamp ?? '');
    if (!Number.isFinite(done)) continue;
    const key = `${p.spec.pod.namespace}/${p.spec.pod.name}`;
    lastDone.set(key, Math.max(lastDone.get(key) ?? 0, done));
  }
  const samples: Array<{ done: number; lag: number }> = [];
  for (const e of execs) {
    const done = lastDone.get(`${e.namespace}/${e.pod}`);
    const start = Date.parse(e.startedAt);
    if (done !== undefined && Number.isFinite(start)) samples.push({ done, lag: start - done });
  }
  return samples;
}

/** Per hook exec: its start − the last PVR completion of its pod. */
export function hookLags(pvrs: PodVolumeRestore[], execs: Array<{ namespace: string; pod: string; startedAt: string }>): number[] {
  return hookLagSamples(pvrs, execs).map((s) => s.lag);
}

/**
 * The hook lags grouped by the second, counted from the restore's first PVR end, in which the
 * pod's last PVR ended: whether the tail belongs to the hooks whose PVRs end while the restore is
 * still creating pods.
 */
export function hookLagsByEndSecond(
  pvrs: PodVolumeRestore[],
  execs: Array<{ namespace: string; pod: string; startedAt: string }>,
): Array<{ second: number; lagMs: Distribution }> {
  const samples = hookLagSamples(pvrs, execs);
  if (samples.length === 0) return [];
  const first = Math.min(...samples.map((s) => s.done));
  const bySecond = new Map<number, number[]>();
  for (const s of samples) {
    const second = Math.floor((s.done - first) / 1000);
    const lags = bySecond.get(second) ?? [];
    lags.push(s.lag);
    bySecond.set(second, lags);
  }
  return [...bySecond.entries()].sort(([a], [b]) => a - b).map(([second, lags]) => ({ second, lagMs: distribution(lags) }));
}

/** Where the hook lag goes, per pod: see RestorePhaseResult.hookLagParts. */
async function hookLagParts(
  env: BenchEnv,
  restoreName: string,
  pvrs: PodVolumeRestore[],
  execs: Array<{ namespace: string; pod: string; startedAt: string }>,
): Promise<RestorePhaseResult['hookLagParts']> {
  const queue = createQueue(QueueName.hooks, { connection: env.redis, prefix: env.queuePrefix });
  const watchQueue = createQueue(QueueName.pvbWatch, { connection: env.redis, prefix: env.queuePrefix });
  try {
    const jobs = (await queue.getJobs(['completed'], 0, -1)).filter(
      (j) => j.name === JobName.runRestoreHooks && (j.data as { restoreName?: string }).restoreName === restoreName,
    );
    const watchDone = new Map<string, { at: number; ranMs: number }>();
    for (const j of await watchQueue.getJobs(['completed'], 0, -1)) {
      const data = j.data as { restoreName?: string; pvrName?: string };
      if (j.name === JobName.watchPvr && data.restoreName === restoreName && data.pvrName && j.finishedOn)
        watchDone.set(data.pvrName, { at: j.finishedOn, ranMs: j.finishedOn - (j.processedOn ?? j.finishedOn) });
    }
    const lastDone = new Map<string, number>();
    const lastWatchDone = new Map<string, { at: number; ranMs: number }>();
    for (const p of pvrs) {
      const key = `${p.spec.pod.namespace}/${p.spec.pod.name}`;
      lastDone.set(key, Math.max(lastDone.get(key) ?? 0, Date.parse(p.status?.completionTimestamp ?? '') || 0));
      const watched = watchDone.get(p.metadata.name);
      if (watched && watched.at > (lastWatchDone.get(key)?.at ?? 0)) lastWatchDone.set(key, watched);
    }
    const execAt = new Map(execs.map((e) => [`${e.namespace}/${e.pod}`, Date.parse(e.startedAt)]));
    const toFirstRun: number[] = [];
    const toWatchDone: number[] = [];
    const watchRun: number[] = [];
    const watchDoneToFirstRun: number[] = [];
    const firstRunToExec: number[] = [];
    const polls: number[] = [];
    for (const j of jobs) {
      const data = j.data as { podNamespace: string; podName: string; wait?: { containersSince?: number; polls?: number } };
      const key = `${data.podNamespace}/${data.podName}`;
      const firstRun = data.wait?.containersSince ?? j.processedOn;
      const done = lastDone.get(key);
      const exec = execAt.get(key);
      if (firstRun === undefined || done === undefined || exec === undefined) continue;
      toFirstRun.push(firstRun - done);
      const watched = lastWatchDone.get(key);
      if (watched) {
        toWatchDone.push(watched.at - done);
        watchRun.push(watched.ranMs);
        watchDoneToFirstRun.push(firstRun - watched.at);
      }
      firstRunToExec.push(exec - firstRun);
      polls.push(data.wait?.polls ?? 0);
    }
    return {
      toFirstRunMs: distribution(toFirstRun),
      toWatchDoneMs: distribution(toWatchDone),
      watchRunMs: distribution(watchRun),
      watchDoneToFirstRunMs: distribution(watchDoneToFirstRun),
      firstRunToExecMs: distribution(firstRunToExec),
      containerPolls: distribution(polls),
    };
  } finally {
    await Promise.all([queue.close(), watchQueue.close()]);
  }
}
