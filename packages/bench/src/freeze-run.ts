/**
 * pnpm bench --scenario freeze (issue 47): how long an application stays frozen — its pre hook's
 * start to its post hook's end, from the simulator's exec log — when its volume is backed up by
 * fs-backup (the post hook waits for the node agent's copy) and by a CSI snapshot whose data the
 * data mover moves (the post hook waits only for the cut), and each backup's total time. Each run
 * is a fresh environment (redis-server, the simulator in its own process with the generated
 * cluster, node agents, worker processes), so neither mode meets the other's repository or cache.
 *
 * The simulator's cut copies the volume (volume-disks.ts): a clone per file where the data root's
 * filesystem has reflinks, every byte elsewhere (ext4, tmpfs); `creationTime` is set only once the
 * copy is done, so a copy-based cut is timed in full inside the freeze. Each run records which it was.
 */
import { execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { createDataUploadClient, type DataMoverOperation, type PodVolumeBackup } from '@stowage/kube';
import { type ExecRecord, type Fixture, generateCluster, SIM_SNAPSHOT_PARAMETERS, snapshotCrdsPath } from '@stowage/kube-sim';
import { BenchEnv, objectsToMerge, REPO_ROOT } from './bench-env.js';
import { percentile } from './stats.js';

export type FreezeMode = 'fs-backup' | 'snapshot';
export const FREEZE_MODES: readonly FreezeMode[] = ['fs-backup', 'snapshot'];

export interface FreezeScenario {
  /** Pods, one PVC-backed volume each, with a pre and a post hook; one pod per block. */
  pods: number;
  bytesPerVolume: number;
  filesPerVolume: number;
  nodes: number;
  /** Node agent loadConcurrency (PVBs and DataUploads alike). */
  loadConcurrency: number;
  /** Per node agent; undefined = no limit (the default: the copy runs as fast as the machine lets it). */
  bandwidthBytesPerSec: number | undefined;
  workers: number;
  blockConcurrency: number;
  hookConcurrency: number;
  preHookMs: number;
  postHookMs: number;
  /** The VolumeSnapshotClass's cut → readyToUse delay (a provider's upload after the cut). */
  readyDelayMs: number;
  agentsPerProcess: number;
  /** Each round runs both modes, the order alternating from one round to the next. */
  rounds: number;
  /** The modes each round runs (both by default; one for a quick look). */
  modes: FreezeMode[];
}

const MiB = 1024 * 1024;

export const FREEZE_SCENARIO: FreezeScenario = {
  pods: 20,
  bytesPerVolume: 256 * MiB,
  filesPerVolume: 4,
  // One pod per node and loadConcurrency 1: every pod's volume is copied at once, fs-backup's
  // shortest possible freeze (no pod waits for another's copy on its node).
  nodes: 20,
  loadConcurrency: 1,
  bandwidthBytesPerSec: undefined,
  workers: 2,
  blockConcurrency: 2,
  hookConcurrency: 16,
  preHookMs: 100,
  postHookMs: 20,
  readyDelayMs: 0,
  agentsPerProcess: 10,
  rounds: 2,
  modes: [...FREEZE_MODES],
};

/** The scripted hooks' commands: how the exec log tells a pre hook from a post hook. */
export const FREEZE_COMMAND = ['/bin/sh', '-c', 'sync && fsfreeze -f /data/0'];
export const THAW_COMMAND = ['/bin/sh', '-c', 'fsfreeze -u /data/0'];
const MEASURED_NAMESPACE = 'freeze-0';
const DATA_UPLOAD_CRD = join(REPO_ROOT, 'k8s/base/crd-datauploads.yaml');
const SNAPSHOT_CLASS = 'sim-snap';

/** The modes of round `r` (0-based), in the order they run: alternating, so neither always goes first. */
export function roundOrder(round: number, modes: readonly FreezeMode[]): FreezeMode[] {
  return round % 2 === 0 ? [...modes] : [...modes].reverse();
}

export interface Spread {
  count: number;
  p50: number | null;
  p95: number | null;
  max: number | null;
}

export function spread(values: readonly number[]): Spread {
  return {
    count: values.length,
    p50: percentile(values, 50),
    p95: percentile(values, 95),
    max: values.length > 0 ? Math.max(...values) : null,
  };
}

/** One pod's freeze, ms after the backup's submit. */
export interface PodFreeze {
  pod: string;
  preStartMs: number;
  preEndMs: number;
  postStartMs: number;
  postEndMs: number;
  /** Pre hook start → post hook end. */
  freezeMs: number;
}

/**
 * Each pod's freeze window from the exec log: its first pre hook's start to its last post hook's
 * end (`command` tells them apart). A pod whose pre or post hook is missing or never ended is
 * named in `missing` (never silently left out).
 */
export function freezeWindows(
  execs: readonly ExecRecord[],
  opts: { namespace: string; originMs: number; pre: readonly string[]; post: readonly string[] },
): { pods: PodFreeze[]; missing: string[] } {
  const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
  const byPod = new Map<string, { pre: ExecRecord[]; post: ExecRecord[] }>();
  for (const e of execs) {
    if (e.namespace !== opts.namespace || e.refused !== undefined) continue;
    const kind = same(e.command, opts.pre) ? 'pre' : same(e.command, opts.post) ? 'post' : undefined;
    if (!kind) continue;
    const entry = byPod.get(e.pod) ?? { pre: [], post: [] };
    entry[kind].push(e);
    byPod.set(e.pod, entry);
  }
  const pods: PodFreeze[] = [];
  const missing: string[] = [];
  const at = (iso: string | null | undefined) => (iso ? Date.parse(iso) - opts.originMs : Number.NaN);
  for (const [pod, { pre, post }] of [...byPod].sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }))) {
    const firstPre = pre.sort((a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt))[0];
    // A post hook still running (no endedAt) ends the freeze never: it sorts last of all.
    const endOf = (e: ExecRecord) => (e.endedAt ? Date.parse(e.endedAt) : Number.POSITIVE_INFINITY);
    const lastPost = post.sort((a, b) => endOf(b) - endOf(a))[0];
    const preStartMs = at(firstPre?.startedAt);
    const preEndMs = at(firstPre?.endedAt);
    const postStartMs = at(lastPost?.startedAt);
    const postEndMs = at(lastPost?.endedAt);
    if (![preStartMs, preEndMs, postStartMs, postEndMs].every(Number.isFinite)) {
      missing.push(`${opts.namespace}/${pod}: ${!firstPre ? 'no pre hook' : !lastPost ? 'no post hook' : 'a hook that never ended'}`);
      continue;
    }
    pods.push({ pod, preStartMs, preEndMs, postStartMs, postEndMs, freezeMs: postEndMs - preStartMs });
  }
  return { pods, missing };
}

/** One pod's copy: a PVB's (fs-backup), or a snapshot's cut and its DataUpload (snapshot). */
export interface PodCopy {
  pod: string;
  /** fs-backup: the PVB's copy; snapshot: the VolumeSnapshot created → cut (creationTime). */
  startMs: number;
  endMs: number;
  /** snapshot: the DataUpload's copy into the repository (node agent's start → completion). */
  uploadStartMs?: number;
  uploadEndMs?: number;
  bytes: number;
}

export interface CpuSeconds {
  workers: number;
  nodeAgents: number;
  simulator: number;
  redis: number;
  driver: number;
  total: number;
}

export interface FreezeRunResult {
  mode: FreezeMode;
  round: number;
  /** 1: the round's first run, 2: its second. */
  orderInRound: number;
  phase: string;
  startedAt: string;
  /** The 1-minute load average before and after the measured backup. */
  loadBefore: number;
  loadAfter: number;
  /** Submit → the backup's completedAt (plan, blocks, uploads, finalize). */
  totalMs: number;
  freezeMs: Spread;
  pods: PodFreeze[];
  copies: PodCopy[];
  /** fs-backup: PVB copy; snapshot: VolumeSnapshot created → cut. */
  copyMs: Spread;
  /** snapshot: the DataUploads' copies. */
  uploadMs: Spread | undefined;
  /** The copy's (or cut's) end → the post hook's start: what the pipeline adds to the freeze. */
  postHookAfterCopyMs: Spread;
  bytes: number;
  cpuSeconds: CpuSeconds;
  /** How the simulator cut snapshots (reflink: clones; copy: every byte) and the data root's filesystem. */
  cutMode: 'reflink' | 'copy';
  dataFilesystem: string;
  problems: string[];
}

const ms = (iso: string | undefined | null, origin: number): number | undefined => (iso ? Date.parse(iso) - origin : undefined);

/** The measured cluster (namespace freeze-0) and the warm-up's (warmup-0: a pod per node), hooks on every pod. */
export function freezeFixture(s: FreezeScenario): Fixture {
  const hooks = {
    preHook: { command: FREEZE_COMMAND, durationMs: s.preHookMs },
    postHook: { command: THAW_COMMAND, durationMs: s.postHookMs },
  };
  const fixture = generateCluster({
    namespaces: 1,
    podsPerNamespace: s.pods,
    volumesPerPod: 1,
    bytesPerVolume: s.bytesPerVolume,
    filesPerVolume: s.filesPerVolume,
    nodes: s.nodes,
    namespacePrefix: 'freeze',
    ...hooks,
  });
  // Two 2 MiB files and a small one per warm-up volume: the repository's large-file threads (files
  // over 1 MiB) start in the warm-up as its small-file readers do, not in the measured copies.
  const warmup = generateCluster({
    namespaces: 1,
    podsPerNamespace: s.nodes,
    volumesPerPod: 1,
    bytesPerVolume: 2 * 2 * MiB + 1000,
    filesPerVolume: 2,
    nodes: s.nodes,
    namespacePrefix: 'warmup',
    includeStowage: false,
    ...hooks,
  });
  fixture.objects.push(...objectsToMerge(warmup.objects), {
    apiVersion: 'snapshot.storage.k8s.io/v1',
    kind: 'VolumeSnapshotClass',
    metadata: { name: SNAPSHOT_CLASS, annotations: { 'snapshot.storage.kubernetes.io/is-default-class': 'true' } },
    driver: 'sim.csi.stowage.dev',
    deletionPolicy: 'Delete',
    parameters: { [SIM_SNAPSHOT_PARAMETERS.readyDelayMs]: String(s.readyDelayMs) },
  });
  fixture.include = [...(fixture.include ?? []), snapshotCrdsPath, DATA_UPLOAD_CRD];
  return fixture;
}

/** The backup spec of a mode: fs-backup of every volume, or a CSI snapshot of each whose data is moved. */
export function freezeSpec(mode: FreezeMode): Record<string, unknown> {
  return mode === 'fs-backup'
    ? { defaultVolumesToFsBackup: true }
    : { defaultVolumesToFsBackup: false, snapshotVolumes: true, snapshotMoveData: true, csiSnapshotTimeoutMs: 60 * 60_000 };
}

async function cpuNow(env: BenchEnv): Promise<Omit<CpuSeconds, 'total'>> {
  const of = async (prefix: string) =>
    (await Promise.all(env.children.filter((c) => c.name.startsWith(prefix)).map((c) => c.cpuSeconds()))).reduce<number>(
      (a, b) => a + (b ?? 0),
      0,
    );
  const driver = process.cpuUsage();
  return {
    workers: await of('worker-'),
    nodeAgents: await of('agents-'),
    simulator: (await env.sim.cpuSeconds()) ?? 0,
    redis: await env.redisCpuSeconds(),
    driver: (driver.user + driver.system) / 1e6,
  };
}

function filesystemOf(path: string): string {
  try {
    return execFileSync('stat', ['-f', '-c', '%T', path], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

/** One mode in a fresh environment: a warm-up backup in the same mode, then the measured one. */
export async function runFreezeMode(
  s: FreezeScenario,
  mode: FreezeMode,
  where: { round: number; orderInRound: number },
  logDir: string,
  keepLogs: boolean,
  say: (line: string) => void,
): Promise<FreezeRunResult> {
  // The simulator writes every volume's files before it answers (5 GiB at full size): given longer.
  const env = await BenchEnv.start(freezeFixture(s), 'all', join(logDir, `${mode}-${where.round}`), { simReadyTimeoutMs: 900_000 });
  const onExit = () => env.killChildren();
  process.once('exit', onExit);
  try {
    const nodes = Array.from({ length: s.nodes }, (_, i) => `node-${i}`);
    const t0 = Date.now();
    await env.startNodeAgents({
      nodes,
      perProcess: s.agentsPerProcess,
      loadConcurrency: s.loadConcurrency,
      bandwidthBytesPerSec: s.bandwidthBytesPerSec,
    });
    await env.startWorkers({
      count: s.workers,
      blockConcurrency: s.blockConcurrency,
      hookConcurrency: s.hookConcurrency,
      waitMode: 'decoupled',
    });
    env.hostBackupsQueue();
    say(
      `  ${mode}: ${s.nodes} node agents and ${s.workers} workers ready in ${((Date.now() - t0) / 1000).toFixed(1)} s (cut: ${env.sim.cutMode})`,
    );
    const spec = freezeSpec(mode);
    const warm = await env.runBackup(`warmup-${mode}`, ['warmup-0'], 10 * 60_000, spec);
    if (warm.phase !== 'Completed') env.problems.push(`warm-up backup ended ${warm.phase}`);
    const execsBefore = (await env.sim.execLog()).length;
    say(`  ${mode}: warm-up backup ${warm.phase} in ${warm.completedAt - warm.submittedAt} ms; measuring`);

    const name = `freeze-${mode}`;
    const loadBefore = loadavg()[0] ?? 0;
    const startedAt = new Date().toISOString();
    const cpuBefore = await cpuNow(env);
    const wait = await env.runBackup(name, [MEASURED_NAMESPACE], 60 * 60_000, spec);
    const cpuAfter = await cpuNow(env);
    const loadAfter = loadavg()[0] ?? 0;
    const origin = wait.submittedAt;
    const problems = [...env.problems];
    if (wait.phase !== 'Completed') problems.push(`backup ${name} ended ${wait.phase}`);

    const execs = (await env.sim.execLog()).slice(execsBefore);
    const { pods, missing } = freezeWindows(execs, {
      namespace: MEASURED_NAMESPACE,
      originMs: origin,
      pre: FREEZE_COMMAND,
      post: THAW_COMMAND,
    });
    problems.push(...missing.map((m) => `freeze window: ${m}`));
    if (pods.length + missing.length !== s.pods)
      problems.push(`freeze window: ${pods.length + missing.length} pods ran hooks, ${s.pods} expected`);

    const copies: PodCopy[] = [];
    if (mode === 'fs-backup') {
      const pvbs: PodVolumeBackup[] = await env.pvbs.listPvbs({ labelSelector: `stowage.dev/backup-name=${name}` });
      for (const p of pvbs) {
        const start = ms(p.status?.startTimestamp, origin);
        const end = ms(p.status?.completionTimestamp, origin);
        if (start === undefined || end === undefined) {
          problems.push(`PVB ${p.metadata.name} has no copy times (phase ${p.status?.phase ?? 'New'})`);
          continue;
        }
        copies.push({ pod: p.spec.pod.name, startMs: start, endMs: end, bytes: p.status?.progress?.totalBytes ?? 0 });
      }
    } else {
      // The cut, from the pipeline's events: the VolumeSnapshot created → its content's creationTime.
      const { events } = await env.finishedBackup(name);
      const created = new Map<string, { pod: string; at: number }>();
      const cutAt = new Map<string, number>();
      for (const e of events) {
        const snapshot = typeof e.data.snapshot === 'string' ? e.data.snapshot : undefined;
        if (!snapshot) continue;
        if (e.type === 'snapshot.created' && typeof e.data.pod === 'string')
          created.set(snapshot, { pod: e.data.pod.split('/')[1] ?? '', at: e.at });
        if (e.type === 'snapshot.cut' && typeof e.data.cutAt === 'number') cutAt.set(snapshot, e.data.cutAt);
      }
      const uploads: DataMoverOperation[] = await createDataUploadClient(env.kube, { namespace: 'stowage' }).list({
        labelSelector: `stowage.dev/backup-name=${name}`,
      });
      const uploadOf = new Map(uploads.map((u) => [u.metadata.name, u]));
      for (const [snapshot, c] of created) {
        const cut = cutAt.get(snapshot);
        if (cut === undefined) {
          problems.push(`VolumeSnapshot ${snapshot} (pod ${c.pod}) was never seen cut`);
          continue;
        }
        const u = uploadOf.get(snapshot);
        const uploadStartMs = ms(u?.status?.startTimestamp, origin);
        const uploadEndMs = ms(u?.status?.completionTimestamp, origin);
        if (uploadStartMs === undefined || uploadEndMs === undefined) problems.push(`DataUpload ${snapshot} has no copy times`);
        copies.push({
          pod: c.pod,
          startMs: c.at - origin,
          endMs: cut - origin,
          ...(uploadStartMs !== undefined && uploadEndMs !== undefined ? { uploadStartMs, uploadEndMs } : {}),
          bytes: u?.status?.progress?.totalBytes ?? 0,
        });
      }
    }
    if (copies.length !== s.pods) problems.push(`${copies.length} volume copies measured, ${s.pods} expected`);
    const copyEndOf = new Map(copies.map((c) => [c.pod, c.endMs]));
    const afterCopy = pods.flatMap((p) => {
      const end = copyEndOf.get(p.pod);
      return end === undefined ? [] : [p.postStartMs - end];
    });
    const uploads = copies.flatMap((c) =>
      c.uploadStartMs !== undefined && c.uploadEndMs !== undefined ? [c.uploadEndMs - c.uploadStartMs] : [],
    );
    const cpu = {
      workers: cpuAfter.workers - cpuBefore.workers,
      nodeAgents: cpuAfter.nodeAgents - cpuBefore.nodeAgents,
      simulator: cpuAfter.simulator - cpuBefore.simulator,
      redis: cpuAfter.redis - cpuBefore.redis,
      driver: cpuAfter.driver - cpuBefore.driver,
    };
    return {
      mode,
      round: where.round,
      orderInRound: where.orderInRound,
      phase: wait.phase,
      startedAt,
      loadBefore,
      loadAfter,
      totalMs: wait.completedAt - wait.submittedAt,
      freezeMs: spread(pods.map((p) => p.freezeMs)),
      pods,
      copies,
      copyMs: spread(copies.map((c) => c.endMs - c.startMs)),
      uploadMs: mode === 'snapshot' ? spread(uploads) : undefined,
      postHookAfterCopyMs: spread(afterCopy),
      bytes: copies.reduce((a, c) => a + c.bytes, 0),
      cpuSeconds: { ...cpu, total: cpu.workers + cpu.nodeAgents + cpu.simulator + cpu.redis + cpu.driver },
      cutMode: env.sim.cutMode,
      dataFilesystem: filesystemOf(env.sim.dataRoot),
      problems,
    };
  } finally {
    process.removeListener('exit', onExit);
    await env.close(keepLogs);
  }
}
