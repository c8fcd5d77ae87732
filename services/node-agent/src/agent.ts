import {
  callKube,
  createDataDownloadClient,
  createDataUploadClient,
  createPvbClient,
  createPvrClient,
  type DataMoverSpec,
  dataMoverLabels,
  type KubeClients,
  type PvbPhase,
  type PvrPhase,
  watchPods,
} from '@stowage/kube';
import type { Logger } from '@stowage/platform';
import { abortableSleep, ObjectStoreBackend, type Repository, TokenBucket } from '@stowage/repository';
import type { ObjectStore } from '@stowage/storage';
import { backupOperationHandler } from './backup-operation.js';
import { downloadOperationHandler } from './download-operation.js';
import { NodeAgentError, NodeAgentErrorCode } from './errors.js';
import { type LoadConcurrencyConfig, resolveLoadConcurrency } from './load-concurrency.js';
import { openOrInitRepository } from './repository-access.js';
import { type PodOnNode, restoreOperationHandler } from './restore-operation.js';
import { type OperationStart, type QueuedOperation, type ScheduledSource, startOperationSource } from './volume-operation-runner.js';

export interface NodeAgentOptions {
  /** The node this agent serves: PVBs labelled `stowage.dev/node=<nodeName>`, PVRs whose pod runs on it. */
  nodeName: string;
  kube: KubeClients;
  /** Where PVBs and PVRs live (Stowage's namespace). Default `stowage`. */
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
  /** Bytes per second read from volumes (backups) and written into them (restores), shared by all of this agent's work. Unset: no limit. */
  bandwidthBytesPerSec?: number | undefined;
  logger: Logger;
  /** Minimum time between progress writes of one PVB or PVR. Default 1000 ms. */
  progressIntervalMs?: number | undefined;
  /**
   * On start, an InProgress PVB or PVR of this node whose status did not change for this long is taken
   * over (its previous agent is gone). Default 2000 ms (twice the progress interval).
   */
  takeoverGraceMs?: number | undefined;
  /** Safety-net re-scan of the informer cache (watches are not the only trigger). Default 5000 ms. */
  rescanIntervalMs?: number | undefined;
  /** Bound on waiting for aborted copies in stop(). Default 10 000 ms. */
  stopTimeoutMs?: number | undefined;
  /** How long a claimed PVR waits for its pod's volume directory (kubelet mount, PVC binding). Default 5 min. */
  volumeDirTimeoutMs?: number | undefined;
  /** How long start waits for the first list of PVRs before going on without them (CRD missing). Default 5000 ms. */
  restoreSyncGraceMs?: number | undefined;
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
  /** PVRs this node runs, ran, or may start (its pod is here), by phase. */
  pvrsByPhase: Record<PvrPhase, number>;
  bytesRestoredTotal: number;
  restoresStarted: number;
  restoresCompleted: number;
  restoresFailed: number;
  restoresCanceled: number;
  /** DataUploads (moved CSI snapshot data) this node completed and failed, and their bytes. */
  dataUploadsCompleted: number;
  dataUploadsFailed: number;
  /** DataDownloads (a moved block volume written back) this node completed and failed. */
  dataDownloadsCompleted: number;
  dataDownloadsFailed: number;
  bytesUploadedTotal: number;
}

export interface CopyStart {
  pvb: string;
  /** True when this start took over a PVB left InProgress by a previous run. */
  resumed: boolean;
  at: string;
}

export interface NodeAgent {
  readonly nodeName: string;
  /** The resolved number of PVBs and PVRs (together) allowed InProgress at once on this node. */
  readonly loadConcurrency: number;
  /** Every copy (PVB) this agent started, in order (for logs and tests). */
  copyStarts(): readonly CopyStart[];
  /** Every PVB and PVR this agent started, in order. */
  operationStarts(): readonly OperationStart[];
  isReady(): boolean;
  metrics(): NodeAgentMetrics;
  /** Aborts running copies, leaving them InProgress for the next start to resume. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * The node agent (docs/architecture.md#the-node-agent): watches its node's PVBs and every PVR (taking those
 * whose pod runs here), claims New ones with a conditional status update, keeps at most
 * `loadConcurrency` PVBs and PVRs together InProgress on the node, copies or restores each volume
 * with progress, honours spec.cancel, and resumes what a previous run left InProgress. The
 * per-object rules are one implementation for both kinds (volume-operation-runner.ts); this file
 * wires them and owns the node-wide limit.
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
  const stopTimeoutMs = options.stopTimeoutMs ?? 10_000;
  const restoreSyncGraceMs = options.restoreSyncGraceMs ?? 5000;
  // One bucket for both directions: the limit is the node's, not per kind.
  const throttle = options.bandwidthBytesPerSec ? new TokenBucket(options.bandwidthBytesPerSec) : undefined;

  const nodeLabels = await readNodeLabels(kube, nodeName, log);
  const limit = resolveLoadConcurrency(options.loadConcurrency, nodeLabels);
  log.info(
    { loadConcurrency: limit, bandwidthBytesPerSec: options.bandwidthBytesPerSec ?? null, kubeletRoot, repoDir },
    'node agent starting',
  );

  const starts: OperationStart[] = [];
  let seenCounter = 0;
  let stopped = false;
  let ready = false;
  /**
   * No scheduling from a half-listed cache: a kind takes part once its informer has listed (the
   * node-wide count needs its InProgress objects). PVBs and this node's pods are awaited at start;
   * PVRs for a bounded time, so an agent on a cluster without the PVR CRD still backs up.
   */
  const syncedSources = new Set<ScheduledSource>();
  let podsSynced = false;
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

  // PVRs are taken by the node their pod runs on: the pods of this node, by uid (an index kept
  // from the informer's events, so matching every PVR to its pod is a lookup, not a scan).
  const podsByUid = new Map<string, PodOnNode>();
  const podOnNode = (uid: string): PodOnNode | undefined => podsByUid.get(uid);

  const sourceDeps = {
    log,
    progressIntervalMs,
    takeoverGraceMs: options.takeoverGraceMs ?? 2000,
    schedule,
    nextSeen: () => seenCounter++,
    stopSignal: stopController.signal,
    recordStart: (start: OperationStart) => void starts.push(start),
  };
  const common = { kube, nodeName, kubeletRoot, repoDir, getRepository, throttle };
  const backups = startOperationSource(
    backupOperationHandler({ ...common, client: createPvbClient(kube, { namespace: options.namespace }), progressIntervalMs }),
    sourceDeps,
  );
  const restores = startOperationSource(
    restoreOperationHandler({
      ...common,
      client: createPvrClient(kube, { namespace: options.namespace }),
      podOnNode,
      volumeDirTimeoutMs: options.volumeDirTimeoutMs ?? 5 * 60_000,
    }),
    sourceDeps,
  );
  // DataUploads: a CSI snapshot's data, exposed through a temporary pod on this node, copied as a PVB is.
  const uploads = startOperationSource(
    backupOperationHandler<DataMoverSpec>({
      ...common,
      label: 'DataUpload',
      client: createDataUploadClient(kube, { namespace: options.namespace }),
      labelSelector: `${dataMoverLabels.node}=${nodeName}`,
      progressIntervalMs,
    }),
    sourceDeps,
  );
  // DataDownloads: a moved block volume written back into a temporary pod's new claim on this node.
  const downloads = startOperationSource(
    downloadOperationHandler({ ...common, client: createDataDownloadClient(kube, { namespace: options.namespace }) }),
    sourceDeps,
  );
  const sources: ScheduledSource[] = [backups, restores, uploads, downloads];
  const podsHere = watchPods(kube, {
    fieldSelector: `spec.nodeName=${nodeName}`,
    onEvent: (event) => {
      const pod = event.object as PodOnNode;
      const uid = pod.metadata?.uid;
      if (!uid) return;
      if (event.type === 'DELETED' || pod.spec?.nodeName !== nodeName) podsByUid.delete(uid);
      else podsByUid.set(uid, pod);
      // A PVR is this node's once its pod is here: evaluate the PVRs naming this pod again.
      restores.dependencyChanged(uid);
      schedule();
    },
    onError: (err) => log.warn({ err, code: err.code }, 'pod watch problem (it recovers by itself)'),
  });

  /**
   * One limit for both kinds: what is busy on the node, then the queue of both in creation order.
   * Each kind re-evaluates only what changed since the last pass (its refresh); the periodic
   * rescan re-evaluates everything, as a safety net for anything no event announced.
   */
  let claimStepFailed = false;
  async function pumpOnce(): Promise<void> {
    if (stopped || !podsSynced) return;
    const active = sources.filter((source) => syncedSources.has(source));
    let changed = claimStepFailed;
    for (const source of active) if (await source.refresh()) changed = true;
    // Nothing busy or startable moved (most PVR events are other nodes'): nothing new to claim.
    if (!changed) return;
    claimStepFailed = true;
    // The limit is node-wide: work another agent (or a previous run) holds InProgress counts too.
    const busy = new Set<string>();
    for (const source of active) for (const name of source.busyOnNode()) busy.add(`${source.label}/${name}`);
    const queued: QueuedOperation[] = active
      .flatMap((source) => source.queued())
      .sort((a, b) => a.creationTimestamp.localeCompare(b.creationTimestamp) || a.seen - b.seen || a.name.localeCompare(b.name));
    for (const next of queued) {
      if (stopped || busy.size >= limit) break;
      if (await next.claim()) busy.add(`${next.kind}/${next.name}`);
    }
    // A claim that threw leaves the flag set: the next pass claims again, whatever its events.
    claimStepFailed = false;
  }

  // ---------------------------------------------------------------- start
  const rescan = setInterval(() => {
    for (const source of sources) source.rescanAll();
    schedule();
  }, options.rescanIntervalMs ?? 5000);
  rescan.unref();
  const recoveries: Promise<void>[] = [];
  /** A kind joins scheduling once listed; what a previous run left InProgress is resumed then. */
  const joinScheduling = (source: ScheduledSource) =>
    source.synced.then((ok) => {
      if (!ok || stopped) return;
      syncedSources.add(source);
      source.rescanAll();
      const recovery = source
        .recoverOrphans()
        .catch((error: unknown) => {
          if (!stopped)
            log.error({ err: error, kind: source.label }, 'resuming work left in progress failed; it is retried on the next start');
        })
        .finally(schedule);
      recoveries.push(recovery);
      schedule();
    });
  const restoresJoined = joinScheduling(restores);
  // Without the DataUpload and DataDownload CRDs the agent still backs up and restores; they join once listed.
  void joinScheduling(uploads);
  void joinScheduling(downloads);
  await Promise.all([joinScheduling(backups), podsHere.synced]);
  podsSynced = true;
  const restoresListed = await Promise.race([restoresJoined.then(() => true), abortableSleep(restoreSyncGraceMs).then(() => false)]);
  if (!restoresListed && !stopped) {
    log.warn(
      { waitedMs: restoreSyncGraceMs },
      'PodVolumeRestores cannot be listed yet (is the podvolumerestores.stowage.dev CRD installed and the agent allowed to list it?); backups go on, restores start once they can be listed',
    );
  }
  ready = true;
  schedule();

  return {
    nodeName,
    loadConcurrency: limit,
    copyStarts: () => starts.filter((s) => s.kind === 'PVB').map((s) => ({ pvb: s.name, resumed: s.resumed, at: s.at })),
    operationStarts: () => starts,
    isReady: () => ready && !stopped,
    metrics: () => ({
      node: nodeName,
      loadConcurrency: limit,
      running: backups.running() + restores.running(),
      pvbsByPhase: backups.byPhase(),
      bytesCopiedTotal: backups.counters.bytes,
      copiesStarted: backups.counters.started,
      copiesCompleted: backups.counters.completed,
      copiesFailed: backups.counters.failed,
      copiesCanceled: backups.counters.canceled,
      pvrsByPhase: restores.byPhase(),
      bytesRestoredTotal: restores.counters.bytes,
      restoresStarted: restores.counters.started,
      restoresCompleted: restores.counters.completed,
      restoresFailed: restores.counters.failed,
      restoresCanceled: restores.counters.canceled,
      dataUploadsCompleted: uploads.counters.completed,
      dataUploadsFailed: uploads.counters.failed,
      dataDownloadsCompleted: downloads.counters.completed,
      dataDownloadsFailed: downloads.counters.failed,
      bytesUploadedTotal: uploads.counters.bytes,
    }),
    stop: async () => {
      if (stopped) return;
      stopped = true;
      ready = false;
      clearInterval(rescan);
      stopController.abort();
      const stopping = Promise.allSettled([...sources.map((source) => source.stop()), podsHere.stop(), ...recoveries, pumping]);
      await Promise.race([
        stopping,
        abortableSleep(stopTimeoutMs).then(() => log.warn('work did not stop in time; it stays InProgress for the next start')),
      ]);
      log.info('node agent stopped');
    },
  };
}

async function readNodeLabels(kube: KubeClients, nodeName: string, log: Logger): Promise<Record<string, string>> {
  try {
    const node = await callKube(`get node ${nodeName}`, () => kube.core.readNode({ name: nodeName }));
    return node.metadata?.labels ?? {};
  } catch (error) {
    // Without the Node's labels only globalConfig applies; say so rather than refuse to start.
    log.warn({ err: error }, `node ${nodeName} could not be read; perNodeConfig rules cannot match, using globalConfig`);
    return {};
  }
}
