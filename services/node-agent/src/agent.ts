import {
  callKube,
  createPvbClient,
  type Informer,
  type KubeClients,
  type PodVolumeBackup,
  type PodVolumeBackupStatus,
  type PvbClient,
  type PvbPhase,
  pvbLabels,
} from '@stowage/kube';
import type { Logger } from '@stowage/platform';
import { abortableSleep, isRepoError, ObjectStoreBackend, RepoErrorCode, type Repository, TokenBucket } from '@stowage/repository';
import type { ObjectStore } from '@stowage/storage';
import { NodeAgentError, NodeAgentErrorCode } from './errors.js';
import { describeCopyFailure } from './failure-message.js';
import { type LoadConcurrencyConfig, resolveLoadConcurrency } from './load-concurrency.js';
import { openOrInitRepository } from './repository-access.js';
import { resolveVolumeDir } from './volume-dir.js';

export interface NodeAgentOptions {
  /** The node this agent serves; it acts only on PVBs labelled `stowage.dev/node=<nodeName>`. */
  nodeName: string;
  kube: KubeClients;
  /** Where PVBs live (Stowage's namespace). Default `stowage`. */
  namespace?: string | undefined;
  /** The repository directory (`<STOWAGE_STORAGE>/repository`); created on first use. With `repoStore`, only its name in messages. */
  repoDir: string;
  /** The repository in an object store (S3 storage), under `repository/`, instead of in `repoDir`. */
  repoStore?: ObjectStore | undefined;
  /** STOWAGE_REPO_KEY. Required. */
  repoKey: string;
  /** `/var/lib/kubelet` on a node; `<dataRoot>/<node>` in the simulator. */
  kubeletRoot: string;
  loadConcurrency: LoadConcurrencyConfig;
  /** Bytes per second read from volumes, shared by all copies of this agent. Unset: no limit. */
  bandwidthBytesPerSec?: number | undefined;
  logger: Logger;
  /** Minimum time between progress writes of one PVB. Default 1000 ms. */
  progressIntervalMs?: number | undefined;
  /**
   * On start, an InProgress PVB of this node whose status did not change for this long is taken
   * over (its previous agent is gone). Default 2000 ms (twice the progress interval).
   */
  takeoverGraceMs?: number | undefined;
  /** Safety-net re-scan of the informer cache (watches are not the only trigger). Default 5000 ms. */
  rescanIntervalMs?: number | undefined;
  /** Bound on waiting for aborted copies in stop(). Default 10 000 ms. */
  stopTimeoutMs?: number | undefined;
}

export interface NodeAgentMetrics {
  node: string;
  loadConcurrency: number;
  running: number;
  /** PVBs of this node by phase, from the watch cache (`New` includes PVBs without a status). */
  pvbsByPhase: Record<PvbPhase, number>;
  bytesCopiedTotal: number;
  copiesStarted: number;
  copiesCompleted: number;
  copiesFailed: number;
  copiesCanceled: number;
}

export interface CopyStart {
  pvb: string;
  /** True when this start took over a PVB left InProgress by a previous run. */
  resumed: boolean;
  at: string;
}

export interface NodeAgent {
  readonly nodeName: string;
  /** The resolved number of PVBs allowed InProgress at once on this node. */
  readonly loadConcurrency: number;
  /** Every copy this agent started, in order (for logs and tests). */
  copyStarts(): readonly CopyStart[];
  isReady(): boolean;
  metrics(): NodeAgentMetrics;
  /** Aborts running copies, leaving them InProgress for the next start to resume. Safe to call twice. */
  stop(): Promise<void>;
}

interface RunningCopy {
  readonly name: string;
  readonly controller: AbortController;
  /** startTimestamp written at claim: the fencing token of this copy (a takeover writes a new one). */
  readonly token: string;
  status: PodVolumeBackupStatus;
  resourceVersion: string;
  cancelRequested: boolean;
  shuttingDown: boolean;
  lostOwnership: boolean;
  lastProgressWriteAt: number;
  progressWritePending: boolean;
  lastBytes: number;
  writes: Promise<unknown>;
  done?: Promise<void>;
}

const ACTIVE_PHASES: ReadonlySet<string> = new Set(['InProgress', 'Canceling']);

function phaseOf(pvb: PodVolumeBackup): PvbPhase {
  return pvb.status?.phase ?? 'New';
}

/**
 * The node agent (DESIGN §3 "Node agent"): watches its node's PVBs, claims New ones with a
 * conditional status update (one winner even with two agents or duplicate events), at most
 * `loadConcurrency` InProgress on the node, copies each volume into the repository with progress,
 * honours spec.cancel, and resumes what a previous run left InProgress.
 */
export async function startNodeAgent(options: NodeAgentOptions): Promise<NodeAgent> {
  if (!options.repoKey) {
    throw new NodeAgentError(
      NodeAgentErrorCode.ConfigMissing,
      'the node agent needs the repository key (STOWAGE_REPO_KEY); there is no default key',
    );
  }
  if (!options.nodeName)
    throw new NodeAgentError(NodeAgentErrorCode.ConfigMissing, 'the node agent needs its node name (STOWAGE_NODE_NAME)');
  const { nodeName, kube, repoDir, repoKey, kubeletRoot } = options;
  const log = options.logger.child({ component: 'node-agent', node: nodeName });
  const progressIntervalMs = options.progressIntervalMs ?? 1000;
  const takeoverGraceMs = options.takeoverGraceMs ?? 2000;
  const stopTimeoutMs = options.stopTimeoutMs ?? 10_000;
  const pvbs: PvbClient = createPvbClient(kube, { namespace: options.namespace });
  const throttle = options.bandwidthBytesPerSec ? new TokenBucket(options.bandwidthBytesPerSec) : undefined;

  const nodeLabels = await readNodeLabels(kube, nodeName, log);
  const limit = resolveLoadConcurrency(options.loadConcurrency, nodeLabels);
  log.info(
    { loadConcurrency: limit, bandwidthBytesPerSec: options.bandwidthBytesPerSec ?? null, kubeletRoot, repoDir },
    'node agent starting',
  );

  const copies = new Map<string, RunningCopy>();
  const starts: CopyStart[] = [];
  /** First-seen order breaks creationTimestamp ties (whole seconds) so PVBs start in creation order. */
  const firstSeen = new Map<string, number>();
  let seenCounter = 0;
  /** resourceVersions of New+cancel PVBs already answered, so a re-scan does not write twice. */
  const answeredCancels = new Set<string>();
  const counters = { bytesCopiedTotal: 0, copiesStarted: 0, copiesCompleted: 0, copiesFailed: 0, copiesCanceled: 0 };
  let stopped = false;
  let ready = false;
  /** No scheduling on a half-listed cache: the node-wide count needs every InProgress PVB. */
  let synced = false;
  const stopController = new AbortController();

  let repository: Promise<Repository> | undefined;
  const getRepository = () => {
    if (!repository) {
      repository = openOrInitRepository(repoDir, repoKey, options.repoStore ? new ObjectStoreBackend(options.repoStore) : undefined);
      // A failure is not cached: the storage may be mounted or fixed by the next PVB.
      repository.catch(() => {
        repository = undefined;
      });
    }
    return repository;
  };

  // ---------------------------------------------------------------- scheduling
  let pumping: Promise<void> | undefined;
  let pumpAgain = false;
  const schedule = () => {
    if (stopped) return;
    if (pumping) {
      pumpAgain = true;
      return;
    }
    pumping = (async () => {
      do {
        pumpAgain = false;
        try {
          await pumpOnce();
        } catch (error) {
          log.warn({ err: error }, 'scheduling pass failed; retrying on the next event');
        }
      } while (pumpAgain && !stopped);
    })().finally(() => {
      pumping = undefined;
    });
  };

  const informer: Informer<PodVolumeBackup> = pvbs.watchPvbs({
    labelSelector: `${pvbLabels.node}=${nodeName}`,
    onEvent: (event) => {
      const name = event.object.metadata.name;
      if (event.type === 'DELETED') {
        firstSeen.delete(name);
        const copy = copies.get(name);
        if (copy) {
          log.warn({ pvb: name }, 'PVB deleted while copying; stopping the copy');
          copy.lostOwnership = true;
          copy.controller.abort(new Error('PVB deleted'));
        }
      } else if (!firstSeen.has(name)) {
        firstSeen.set(name, seenCounter++);
      }
      schedule();
    },
    onError: (err) => log.warn({ err: err.message, code: err.code }, 'PVB watch problem (it recovers by itself)'),
  });

  async function pumpOnce(): Promise<void> {
    if (stopped || !synced) return;
    const cached = informer.list().filter((pvb) => pvb.spec?.node === nodeName);
    for (const pvb of cached) {
      const copy = copies.get(pvb.metadata.name);
      if (copy) {
        if (pvb.spec.cancel && !copy.cancelRequested) requestCancel(copy);
        continue;
      }
      const rv = pvb.metadata.resourceVersion ?? '';
      if (phaseOf(pvb) === 'New' && pvb.spec.cancel && !answeredCancels.has(rv)) {
        answeredCancels.add(rv);
        await cancelNew(pvb);
      }
    }
    // The limit is node-wide: PVBs another agent (or a previous run) holds InProgress count too.
    const busy = new Set<string>(copies.keys());
    for (const pvb of cached) if (ACTIVE_PHASES.has(phaseOf(pvb))) busy.add(pvb.metadata.name);
    const queued = cached
      .filter((pvb) => phaseOf(pvb) === 'New' && !pvb.spec.cancel && !copies.has(pvb.metadata.name))
      .sort(
        (a, b) =>
          (a.metadata.creationTimestamp ?? '').toString().localeCompare((b.metadata.creationTimestamp ?? '').toString()) ||
          (firstSeen.get(a.metadata.name) ?? 0) - (firstSeen.get(b.metadata.name) ?? 0) ||
          a.metadata.name.localeCompare(b.metadata.name),
      );
    for (const pvb of queued) {
      if (stopped || busy.size >= limit) break;
      if (await claim(pvb, false)) busy.add(pvb.metadata.name);
    }
  }

  async function cancelNew(pvb: PodVolumeBackup): Promise<void> {
    const result = await pvbs.updatePvbStatusIf(pvb.metadata.name, pvb.metadata.resourceVersion ?? '', {
      phase: 'Canceled',
      completionTimestamp: new Date().toISOString(),
      message: 'canceled before the copy started (spec.cancel); nothing was copied',
    });
    if (result.outcome === 'updated') {
      counters.copiesCanceled++;
      log.info({ pvb: pvb.metadata.name }, 'PVB canceled before it started');
    }
  }

  /** New (or orphaned InProgress) → InProgress with a fresh token; true when this agent won. */
  async function claim(pvb: PodVolumeBackup, resumed: boolean): Promise<boolean> {
    const name = pvb.metadata.name;
    const token = new Date().toISOString();
    const status: PodVolumeBackupStatus = {
      phase: 'InProgress',
      startTimestamp: token,
      progress: { totalBytes: 0, bytesDone: 0 },
      ...(resumed
        ? {
            message:
              'resumed after the node agent restarted: the copy starts again from the beginning (chunks already in the repository are not written again)',
          }
        : {}),
    };
    const result = await pvbs.updatePvbStatusIf(name, pvb.metadata.resourceVersion ?? '', status);
    if (result.outcome !== 'updated') {
      log.debug({ pvb: name, outcome: result.outcome }, 'claim lost: another agent or a newer version has it');
      return false;
    }
    const copy: RunningCopy = {
      name,
      controller: new AbortController(),
      token,
      status,
      resourceVersion: result.pvb.metadata.resourceVersion ?? '',
      cancelRequested: false,
      shuttingDown: false,
      lostOwnership: false,
      lastProgressWriteAt: Date.now(),
      progressWritePending: false,
      lastBytes: 0,
      writes: Promise.resolve(),
    };
    copies.set(name, copy);
    counters.copiesStarted++;
    starts.push({ pvb: name, resumed, at: token });
    log.info({ pvb: name, resumed }, resumed ? 'PVB resumed' : 'PVB claimed');
    copy.done = runCopy(copy, result.pvb).finally(() => {
      copies.delete(name);
      schedule();
    });
    return true;
  }

  // ---------------------------------------------------------------- status writes
  /**
   * Every write of a copy is conditional on the last resourceVersion it saw; on a conflict it
   * re-reads and goes on only if the PVB still carries its token (startTimestamp). Otherwise
   * someone took the PVB over (or deleted it): the copy stops and records nothing.
   */
  function writeStatus(copy: RunningCopy, next: PodVolumeBackupStatus, opts: { terminal: boolean }): Promise<boolean> {
    const write = copy.writes.then(async () => {
      if (copy.lostOwnership) return false;
      for (let attempt = 0; attempt < 20; attempt++) {
        try {
          const result = await pvbs.updatePvbStatusIf(copy.name, copy.resourceVersion, next);
          if (result.outcome === 'updated') {
            copy.resourceVersion = result.pvb.metadata.resourceVersion ?? copy.resourceVersion;
            copy.status = next;
            return true;
          }
          const current = result.outcome === 'conflict' ? result.current : undefined;
          if (
            current &&
            current.status?.startTimestamp === copy.token &&
            current.status.phase === next.phase &&
            sameStatus(current.status, next)
          ) {
            // Our earlier attempt landed and only its answer was lost.
            copy.resourceVersion = current.metadata.resourceVersion ?? copy.resourceVersion;
            copy.status = next;
            return true;
          }
          if (!current || current.status?.startTimestamp !== copy.token || !ACTIVE_PHASES.has(phaseOf(current))) {
            loseOwnership(copy, current ? `now ${phaseOf(current)} with start ${current.status?.startTimestamp ?? 'none'}` : 'deleted');
            return false;
          }
          copy.resourceVersion = current.metadata.resourceVersion ?? copy.resourceVersion;
        } catch (error) {
          if (!opts.terminal) {
            log.warn({ pvb: copy.name, err: (error as Error).message }, 'progress not written; the next one will try again');
            return false;
          }
          log.warn({ pvb: copy.name, err: (error as Error).message, attempt }, 'status not written yet; retrying');
          await abortableSleep(Math.min(5000, 200 * 2 ** attempt)).catch(() => undefined);
        }
      }
      log.error({ pvb: copy.name, phase: next.phase }, 'status could not be written; the next start of the agent resumes this PVB');
      return false;
    });
    copy.writes = write.catch(() => false);
    return write;
  }

  function loseOwnership(copy: RunningCopy, why: string): void {
    if (copy.lostOwnership) return;
    copy.lostOwnership = true;
    log.warn({ pvb: copy.name, why }, 'PVB was taken over by another agent; this copy stops and records nothing');
    copy.controller.abort(new Error('ownership lost'));
  }

  function requestCancel(copy: RunningCopy): void {
    copy.cancelRequested = true;
    log.info({ pvb: copy.name }, 'cancel requested; stopping the copy');
    void writeStatus(
      copy,
      { ...copy.status, phase: 'Canceling', message: 'cancel requested (spec.cancel); stopping the copy' },
      { terminal: false },
    );
    copy.controller.abort(new Error('canceled by spec.cancel'));
  }

  function onProgress(copy: RunningCopy, progress: { totalBytes: number; bytesDone: number }): void {
    counters.bytesCopiedTotal += Math.max(0, progress.bytesDone - copy.lastBytes);
    copy.lastBytes = progress.bytesDone;
    const now = Date.now();
    if (copy.progressWritePending || copy.cancelRequested || now - copy.lastProgressWriteAt < progressIntervalMs) return;
    const current = copy.status.progress;
    if (current?.bytesDone === progress.bytesDone && current?.totalBytes === progress.totalBytes) return;
    copy.lastProgressWriteAt = now;
    copy.progressWritePending = true;
    void writeStatus(
      copy,
      { ...copy.status, progress: { totalBytes: progress.totalBytes, bytesDone: progress.bytesDone } },
      { terminal: false },
    ).finally(() => {
      copy.progressWritePending = false;
    });
  }

  // ---------------------------------------------------------------- the copy
  async function runCopy(copy: RunningCopy, pvb: PodVolumeBackup): Promise<void> {
    const name = copy.name;
    let volumeDir: string | undefined;
    try {
      const resolved = await resolveVolumeDir(kube, { kubeletRoot, nodeName, spec: pvb.spec });
      if (!resolved.ok) {
        await finishFailed(copy, resolved.message);
        return;
      }
      volumeDir = resolved.path;
      copy.controller.signal.throwIfAborted();
      const repo = await getRepository();
      const result = await repo.backup(volumeDir, {
        tags: { ...(pvb.spec.tags ?? {}), pvb: name, node: nodeName, volume: pvb.spec.volume, 'pod-uid': pvb.spec.pod.uid },
        signal: copy.controller.signal,
        onProgress: (progress) => onProgress(copy, progress),
        progressIntervalMs: Math.min(250, progressIntervalMs),
        ...(throttle ? { throttle } : {}),
      });
      const skipped = result.stats.skipped.length;
      const written = await writeStatus(
        copy,
        {
          phase: 'Completed',
          startTimestamp: copy.token,
          completionTimestamp: new Date().toISOString(),
          snapshotID: result.snapshotId,
          path: volumeDir,
          progress: { totalBytes: result.stats.bytes, bytesDone: result.stats.bytes },
          ...(skipped > 0
            ? {
                message: `${skipped} entries were left out (sockets, FIFOs, devices or files removed during the copy), e.g. ${result.stats.skipped[0]!.path}`,
              }
            : {}),
        },
        { terminal: true },
      );
      if (written) counters.copiesCompleted++;
      log.info(
        { pvb: name, snapshotId: result.snapshotId, bytes: result.stats.bytes, newChunks: result.stats.newChunks, recorded: written },
        'PVB completed',
      );
    } catch (error) {
      if (copy.lostOwnership) return;
      const aborted = copy.controller.signal.aborted || isRepoError(error, RepoErrorCode.BackupCanceled);
      if (aborted && copy.cancelRequested) {
        const done = copy.lastBytes;
        const written = await writeStatus(
          copy,
          {
            ...copy.status,
            phase: 'Canceled',
            completionTimestamp: new Date().toISOString(),
            message: `canceled on request (spec.cancel) after reading ${done} bytes; no snapshot was written`,
          },
          { terminal: true },
        );
        if (written) counters.copiesCanceled++;
        log.info({ pvb: name }, 'PVB canceled');
        return;
      }
      if (aborted && copy.shuttingDown) {
        // Left InProgress on purpose: the next start of this agent resumes it (see README, Restart).
        await writeStatus(
          copy,
          { ...copy.status, message: 'interrupted by a node agent shutdown; the agent resumes it when it starts again' },
          { terminal: false },
        );
        log.info({ pvb: name }, 'copy interrupted by shutdown; left InProgress for the next start');
        return;
      }
      const message = describeCopyFailure(error, { repoDir, volumeDir });
      log.warn({ pvb: name, err: error }, 'PVB failed');
      await finishFailed(copy, message);
    }
  }

  async function finishFailed(copy: RunningCopy, message: string): Promise<void> {
    const written = await writeStatus(
      copy,
      { ...copy.status, phase: 'Failed', completionTimestamp: new Date().toISOString(), message },
      { terminal: true },
    );
    if (written) counters.copiesFailed++;
  }

  // ---------------------------------------------------------------- restart recovery
  /**
   * PVBs of this node that are InProgress or Canceling when the agent starts were left by its
   * previous run (one agent per node). They are resumed — the copy restarts from scratch; the
   * repository dedups what was already stored — after checking for `takeoverGraceMs` that no live
   * agent is still writing their status. Canceling ones end Canceled.
   */
  async function recoverOrphans(): Promise<void> {
    const orphans = informer.list().filter((pvb) => pvb.spec?.node === nodeName && ACTIVE_PHASES.has(phaseOf(pvb)));
    if (orphans.length === 0) return;
    log.info({ pvbs: orphans.map((p) => p.metadata.name) }, 'found PVBs left in progress; checking that no agent still runs them');
    await abortableSleep(takeoverGraceMs, stopController.signal);
    for (const seen of orphans) {
      if (stopped) return;
      const current = await pvbs.getPvb(seen.metadata.name);
      if (!current || !ACTIVE_PHASES.has(phaseOf(current)) || copies.has(current.metadata.name)) continue;
      if (JSON.stringify(current.status ?? {}) !== JSON.stringify(seen.status ?? {})) {
        log.info({ pvb: current.metadata.name }, 'PVB status still changes: another live agent runs it; leaving it alone');
        continue;
      }
      if (phaseOf(current) === 'Canceling' || current.spec.cancel) {
        const result = await pvbs.updatePvbStatusIf(current.metadata.name, current.metadata.resourceVersion ?? '', {
          ...current.status,
          phase: 'Canceled',
          completionTimestamp: new Date().toISOString(),
          message: 'canceled: the node agent restarted while the cancel was pending; no snapshot was written',
        });
        if (result.outcome === 'updated') counters.copiesCanceled++;
        continue;
      }
      await claim(current, true);
    }
  }

  // ---------------------------------------------------------------- start
  const rescan = setInterval(schedule, options.rescanIntervalMs ?? 5000);
  rescan.unref();
  synced = await informer.synced;
  const recovery = recoverOrphans()
    .catch((error: unknown) => {
      if (!stopped) log.error({ err: error }, 'resuming PVBs left in progress failed; they are retried on the next start');
    })
    .finally(schedule);
  ready = true;
  schedule();

  return {
    nodeName,
    loadConcurrency: limit,
    copyStarts: () => starts,
    isReady: () => ready && !stopped,
    metrics: () => {
      const pvbsByPhase: Record<PvbPhase, number> = { New: 0, InProgress: 0, Completed: 0, Failed: 0, Canceling: 0, Canceled: 0 };
      for (const pvb of informer.list()) pvbsByPhase[phaseOf(pvb)]++;
      return { node: nodeName, loadConcurrency: limit, running: copies.size, pvbsByPhase, ...counters };
    },
    stop: async () => {
      if (stopped) return;
      stopped = true;
      ready = false;
      clearInterval(rescan);
      stopController.abort();
      await informer.stop();
      for (const copy of copies.values()) {
        copy.shuttingDown = true;
        copy.controller.abort(new Error('node agent shutting down'));
      }
      const pending = [...copies.values()].map((c) => c.done);
      await Promise.race([
        Promise.allSettled([...pending, recovery, pumping]),
        abortableSleep(stopTimeoutMs).then(() => log.warn('copies did not stop in time; they stay InProgress for the next start')),
      ]);
      log.info('node agent stopped');
    },
  };
}

function sameStatus(a: PodVolumeBackupStatus, b: PodVolumeBackupStatus): boolean {
  return a.snapshotID === b.snapshotID && a.message === b.message && a.progress?.bytesDone === b.progress?.bytesDone;
}

async function readNodeLabels(kube: KubeClients, nodeName: string, log: Logger): Promise<Record<string, string>> {
  try {
    const node = await callKube(`get node ${nodeName}`, () => kube.core.readNode({ name: nodeName }));
    return node.metadata?.labels ?? {};
  } catch (error) {
    // Without the Node's labels only globalConfig applies; say so rather than refuse to start.
    log.warn({ err: (error as Error).message }, `node ${nodeName} could not be read; perNodeConfig rules cannot match, using globalConfig`);
    return {};
  }
}
