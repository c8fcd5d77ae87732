import type { StorageCost } from './format.js';
/*
 * What the Stowage REST API returns (mirrors services/api's api.schema.ts). The CLI reads these
 * shapes tolerantly: optional fields may be absent and unknown fields are ignored.
 */

export const TERMINAL_BACKUP_PHASES: ReadonlySet<string> = new Set([
  'Completed',
  'PartiallyFailed',
  'Failed',
  'FailedValidation',
  'Canceled',
]);
export const TERMINAL_PVB_PHASES: ReadonlySet<string> = new Set(['Completed', 'Failed', 'Canceled']);

export interface PvbCounts {
  total: number;
  New: number;
  InProgress: number;
  Completed: number;
  Failed: number;
  Canceling: number;
  Canceled: number;
}

export interface Backup {
  name: string;
  uid: string;
  phase: string;
  spec: unknown;
  requestId?: string;
  progress: { totalItems: number; itemsBackedUp: number };
  hookStatus: { hooksAttempted: number; hooksFailed: number };
  podVolumeBackups: PvbCounts;
  errors: number;
  warnings: number;
  /** What the run asked of object storage (absent from servers before it was counted). */
  storage?: StorageCost;
  failureReason?: string;
  createdAt: string;
  startedAt?: string;
  completedAt?: string;
  cancelRequestedAt?: string;
  /** When the backup is deleted (created + ttl). */
  expiration?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** What the backup-level hooks did (pre before the first block, post after every block). */
  backupHooks?: { pre?: BackupHookPhase; post?: BackupHookPhase };
}

export interface BackupSummary {
  name: string;
  /** A namespaced backup's namespace; absent: cluster-wide. */
  namespace?: string;
  uid: string;
  phase: string;
  createdAt: string;
  startedAt?: string;
  completedAt?: string;
  expiration?: string;
  labels?: Record<string, string>;
}

export interface BackupList {
  items: BackupSummary[];
  nextCursor?: string;
}

export interface HookRun {
  pod: string;
  container: string;
  phase: 'pre' | 'post';
  source: string;
  command: string[];
  outcome: string;
  exitCode?: number;
  startedAt?: string;
  endedAt?: string;
  message?: string;
  /** The last bytes of the hook's output (the API sends them; older servers may not). */
  stdoutTail?: string;
  stderrTail?: string;
  /** The spec hook set or backup hook the run comes from. */
  hookName?: string;
  /** A hook with retries: this run's try (1-based) of `tries`. */
  try?: number;
  tries?: number;
}

/** What one phase of the backup-level hooks (spec.hooks.backup) did. */
export interface BackupHookPhase {
  doneAt: string;
  /** A hook with onError: Fail failed. */
  failed?: string;
  hooksRun: number;
  hooksFailed: number;
  runs: HookRun[];
}

export interface BlockPvb {
  name: string;
  pod: string;
  node: string;
  volume: string;
  phase: string;
  totalBytes?: number;
  bytesDone?: number;
  message?: string;
  startTimestamp?: string;
  completionTimestamp?: string;
}

export interface Block {
  id: string;
  state: string;
  pods: string[];
  itemCount: number;
  itemsWritten?: number;
  failedPods?: string[];
  /** Why the whole block was skipped (a pre hook with onError: FailBlock failed). */
  skipped?: string;
  error?: string;
  startedAt?: string;
  completedAt?: string;
  podVolumeBackups: BlockPvb[];
  hookRuns: HookRun[];
}

export interface BlockPage {
  items: Block[];
  total: number;
  nextCursor?: string;
}

/** One event of `GET /v1/backups/:name/events` (the SSE `data:` JSON). */
export interface BackupEvent {
  id: string;
  type: string;
  at: string;
  data: Record<string, unknown>;
}

export interface CreateBackupRequest {
  name?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  spec: Record<string, unknown>;
}

export const isTerminalBackupEvent = (ev: BackupEvent): boolean =>
  (ev.type === 'backup.phase' || ev.type === 'restore.phase') && typeof ev.data.to === 'string' && TERMINAL_BACKUP_PHASES.has(ev.data.to);

/** `GET /v1/schedules/:name` (Velero's Schedule shape). */
export interface Schedule {
  name: string;
  /** As submitted: schedule, template, paused, skipImmediately. */
  spec: { schedule?: string; template?: Record<string, unknown>; paused?: boolean; skipImmediately?: boolean } & Record<string, unknown>;
  status: {
    phase: 'Enabled' | 'FailedValidation';
    validationErrors: Array<{ path: string; message: string }>;
    lastBackup?: { name: string; startedAt: string };
    lastSuccessfulBackup?: { name: string; completedAt?: string };
    nextRunAt?: string;
    lastSkipped?: { at: string; backup: string; reason: string };
    skipped: number;
  };
  createdAt: string;
  updatedAt: string;
}

export interface RestorePvr {
  name: string;
  pod: string;
  volume: string;
  snapshotID: string;
  phase: string;
  node?: string;
  totalBytes?: number;
  bytesDone?: number;
  message?: string;
  startTimestamp?: string;
  completionTimestamp?: string;
}

export interface Restore {
  name: string;
  uid: string;
  backupName: string;
  phase: string;
  spec: unknown;
  progress: { totalItems: number; itemsRestored: number };
  itemResults: { created: number; updated: number; existsSkipped: number; failed: number; notSelected: number };
  hookStatus: { hooksAttempted: number; hooksFailed: number };
  podVolumeRestores: Record<'total' | 'New' | 'InProgress' | 'Completed' | 'Failed' | 'Canceling' | 'Canceled' | 'TimedOut', number>;
  tiers: Array<{ index: number; groupResources: string[]; items: number; batches: number; waitUntil: string | null }>;
  pvrs: RestorePvr[];
  hookRuns: HookRun[];
  errors: number;
  warnings: number;
  /** What the run asked of object storage (absent from servers before it was counted). */
  storage?: StorageCost;
  failureReason?: string;
  createdAt: string;
  startedAt?: string;
  completedAt?: string;
  cancelRequestedAt?: string;
}

export interface RestoreSummary {
  name: string;
  /** A namespaced restore's namespace; absent: cluster-wide. */
  namespace?: string;
  uid: string;
  backupName: string;
  phase: string;
  createdAt: string;
  startedAt?: string;
  completedAt?: string;
}

export interface RestoreList {
  items: RestoreSummary[];
  nextCursor?: string;
}

export interface RestoreItemPage {
  items: Array<{ key: string; outcome: string; reason?: string; at: string }>;
  total: number;
  nextCursor?: string;
}
