import { DEFAULT_MAX_HOOK_TIMEOUT_MS } from '@stowage/core';
import { type AccessReviewer, type KubeClients, type PvbClient, type PvrClient, restoreWaitContainer } from '@stowage/kube';
import { DEFAULT_RESTORE_PLAN_HEAP_MB, DEFAULT_RESTORE_WAIT_IMAGE } from '@stowage/platform';
import type { NodeAgentRegistry, RedisClient } from '@stowage/queue';
import type { BackupStorage } from '@stowage/storage';
import type { RepositoryGc } from './deletion/repository-gc.js';
import type { PipelineMetrics } from './metrics.js';
import type { RestoreState } from './restore/restore-state.js';
import type { BackupState } from './state/backup-state.js';

/** pino-compatible: object first, message second. */
export interface PipelineLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  child(bindings: Record<string, unknown>): PipelineLogger;
}

export interface PipelineConfig {
  /** Namespace of the PVB objects (Stowage's namespace). */
  namespace: string;
  /** `spec.backupStorageLocation` of every PVB. */
  backupStorageLocation: string;
  /** Blocks per FlowProducer.addBulk while planning. */
  blockBatchSize: number;
  /**
   * A backup's blocks in the queues at once (its dispatch window, fairness between backups); each
   * block that ends adds the next. 0 = no window: plan adds every block as it goes.
   */
  blocksInFlightPerBackup: number;
  /** Items per list request while planning. */
  listPageSize: number;
  /** A backup of at most this many named namespaces is planned from their lists, not the cluster's (0: never). */
  namespaceListsMax: number;
  /** The operator's cap on hook timeouts (STOWAGE_MAX_HOOK_TIMEOUT): a pod's timeout annotation over it is clamped, with a warning. */
  maxHookTimeoutMs: number;
  /** pvb-watch re-park backoff: first delay and cap. */
  pvbPollBaseMs: number;
  pvbPollMaxMs: number;
  /** A real GET of a PVB at least this often even when the informer cache is healthy. */
  pvbRealReadEveryMs: number;
  /** After asking a PVB to cancel (deadline or backup cancel), how long to wait for it to stop. */
  pvbCancelWaitMs: number;
  /** Bytes of hook stdout/stderr kept per run. */
  hookOutputTailBytes: number;
  /** Items per restore-items job (created concurrently inside it). */
  restoreBatchSize: number;
  /** Requests in flight against the API server from restore-items jobs, at most, across all processes (restore-api-cap.ts). */
  restoreMaxInFlight: number;
  /**
   * A restore-hooks job that finds the pod's PVRs settled but its container not running yet waits
   * this long (holding its slot) for the pod informer to show it running, before it re-parks.
   */
  restoreContainerGraceMs: number;
  /** How long a restore tier waits for its CRDs to be Established / namespaces Active. */
  restoreTierWaitMs: number;
  /** The `stowage-restore-wait` init container: the node agent's image as deployed (STOWAGE_RESTORE_WAIT_IMAGE) and the program's command. */
  restoreWaitImage: string;
  restoreWaitCommand: string[];
  /** The V8 heap cap (MiB) of a restore plan's own process (STOWAGE_RESTORE_PLAN_HEAP_MB; restore-plan-process.ts). */
  restorePlanHeapMb: number;
}

export const DEFAULT_PIPELINE_CONFIG: PipelineConfig = Object.freeze({
  namespace: 'stowage',
  backupStorageLocation: 'default',
  blockBatchSize: 500,
  blocksInFlightPerBackup: 1_000,
  listPageSize: 500,
  namespaceListsMax: 10,
  maxHookTimeoutMs: DEFAULT_MAX_HOOK_TIMEOUT_MS,
  pvbPollBaseMs: 200,
  pvbPollMaxMs: 5_000,
  pvbRealReadEveryMs: 30_000,
  pvbCancelWaitMs: 60_000,
  hookOutputTailBytes: 4096,
  restoreBatchSize: 50,
  restoreMaxInFlight: 100,
  restoreContainerGraceMs: 250,
  restoreTierWaitMs: 60_000,
  restoreWaitImage: DEFAULT_RESTORE_WAIT_IMAGE,
  restoreWaitCommand: [...restoreWaitContainer.command],
  restorePlanHeapMb: DEFAULT_RESTORE_PLAN_HEAP_MB,
});

export interface Clock {
  now(): number;
}

/**
 * Everything the processors need, passed in by the hosting process (worker service, api
 * service or a test). No globals: two pipelines with different prefixes can share a process.
 */
export interface PipelineDeps {
  /** BullMQ connection (maxRetriesPerRequest: null). Workers duplicate it for blocking reads. */
  connection: RedisClient;
  /** Hash-tagged prefix shared by every queue, e.g. `{stowage}`. */
  queuePrefix: string;
  state: BackupState;
  agents: NodeAgentRegistry;
  kube: KubeClients;
  pvbs: PvbClient;
  storage: BackupStorage;
  logger: PipelineLogger;
  clock: Clock;
  config: PipelineConfig;
  /** Restore state and the PVR client: needed by the processes that host restore queues. */
  restores?: RestoreState | undefined;
  pvrs?: PvrClient | undefined;
  /** The volume repository: when given, deleting a backup forgets its snapshots and a prune job follows. */
  repository?: RepositoryGc | undefined;
  /**
   * Asks the API server what a run's requester may do (SubjectAccessReview): a spec hook's exec is
   * checked as the requester first. Absent: a run with a Kubernetes requester runs no spec hook.
   */
  access?: Pick<AccessReviewer, 'review'> | undefined;
  /** This process's metrics, told where each event happens (metrics.ts); none by default. */
  metrics?: PipelineMetrics | undefined;
  /**
   * Not the product: a comparison the benchmark wires in (`inlineBlockWait`, Velero's way), which
   * holds each item-block job until its block's PVBs have ended and its post hooks have run.
   * Unset, an item-block job returns once its PVBs are created and its post-hooks job waits, parked.
   */
  blockWait?: BlockWait | undefined;
}

/** What an item-block job offers a BlockWait once its items are staged and its PVBs created. */
export interface BlockWaitInput {
  backupName: string;
  blockId: string;
  pvbNames: readonly string[];
  /** Resolves when the PVB has ended or the backup's fs-backup deadline has passed. */
  pvbEnded(pvbName: string): Promise<void>;
  /** Runs the block's post hooks and writes its end, as its post-hooks job would. */
  finishBlock(): Promise<void>;
}

export type BlockWait = (input: BlockWaitInput) => Promise<void>;

/** The state key prefix for a queue prefix; the one key module (`@stowage/queue` redis-keys) names every key. */
export { statePrefixFor } from '@stowage/queue';
