/*
 * What a backup asks for, once validated: the spec's types with every default applied, the
 * defaults themselves, and the facts about a spec that validation and planning both need.
 * Validation lives in `backup-spec.schema.ts`.
 */
import type { LabelSelector } from './label-selector.js';
import { type HookSetScope, nonEmptyList, type SpecSelection, type ValidationProblem } from './spec-validation.js';
import type { VolumePolicy } from './volume-policy.js';

/** `FailBlock` (pre hooks only): the whole ItemBlock is skipped when the hook fails. */
export type HookOnError = 'Continue' | 'Fail' | 'FailBlock';
/** When a post hook runs, from its block's PVBs: always, only if all completed, only if one did not. */
export type HookExecutionPolicy = 'Always' | 'OnSuccess' | 'OnFailure';

/** A failed hook is run again up to `max` more times, `backoffMs` apart (every try recorded). */
export interface HookRetries {
  max: number;
  backoffMs: number;
}

export interface BackupHookExec {
  /** null = the pod's first container. */
  container: string | null;
  command: string[];
  onError: HookOnError;
  timeoutMs: number;
  /** Absent = no retry (specs stored before retries existed read the same). */
  retries?: HookRetries;
  /** Post hooks only; absent = Always. */
  executionPolicy?: HookExecutionPolicy;
}

/**
 * A backup-level hook (`spec.hooks.backup.pre[]`/`.post[]`): one exec in the Running pods of
 * `namespace` matching `labelSelector` (all of them, or the first by name with `mode: one`), run
 * once before the first block starts (pre) or once after every block ended (post).
 */
export interface BackupLevelHook {
  name: string;
  namespace: string;
  labelSelector: LabelSelector | null;
  /** null = each pod's first container. */
  container: string | null;
  mode: 'all' | 'one';
  command: string[];
  onError: 'Continue' | 'Fail';
  timeoutMs: number;
  retries?: HookRetries;
}

export interface BackupResourceHookSpec extends HookSetScope {
  pre: { exec: BackupHookExec }[];
  post: { exec: BackupHookExec }[];
}

export type ResourcePolicyRef =
  | { kind: 'Inline'; volumePolicies: VolumePolicy[] }
  /** A ConfigMap in Stowage's namespace; the caller loads and validates it (`validateResourcePolicyDocument`). */
  | { kind: 'ConfigMap'; name: string };

/** A validated backup spec with every default applied and durations in milliseconds. */
export interface BackupSpec extends SpecSelection {
  defaultVolumesToFsBackup: boolean;
  /** `backup` is optional so specs stored before backup-level hooks still read. */
  hooks: { resources: BackupResourceHookSpec[]; backup?: { pre: BackupLevelHook[]; post: BackupLevelHook[] } };
  resourcePolicy: ResourcePolicyRef | null;
  /**
   * Velero's scoped resource filters (its "new" filters; see resource-selection.ts). Absent or
   * empty = not used; they cannot be mixed with includedResources, excludedResources or
   * includeClusterResources. Optional, so specs stored before them still read.
   */
  includedClusterScopedResources?: string[];
  excludedClusterScopedResources?: string[];
  includedNamespaceScopedResources?: string[];
  excludedNamespaceScopedResources?: string[];
  fsBackupTimeoutMs: number;
  /**
   * Snapshot the PVC-backed volumes nothing chose fs-backup for (CSI). Default false: Stowage
   * snapshots only what is asked for (Velero's default is true). Optional, so specs stored before
   * snapshots still read.
   */
  snapshotVolumes?: boolean;
  /** Move each CSI snapshot's data into the repository (a DataUpload), then delete the snapshot. Default false. */
  snapshotMoveData?: boolean;
  /** How long a CSI snapshot may take to be ready to use before its volume fails (Velero's default: 10 min). */
  csiSnapshotTimeoutMs?: number;
  ttlMs: number;
  storageLocation: string;
}

/** A backup's own labels and annotations (Velero's `metadata.labels` / `metadata.annotations`): found by `--selector`, never read by the pipeline. */
export interface BackupMetadata {
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export type BackupRequestValidation =
  | { ok: true; name: string | null; value: BackupSpec; metadata: BackupMetadata }
  | { ok: false; problems: ValidationProblem[] };

/** Server-side defaults (Velero's server flags); each has Velero's default when not given. */
export interface BackupSpecDefaults {
  defaultVolumesToFsBackup?: boolean;
  fsBackupTimeoutMs?: number;
  ttlMs?: number;
  storageLocation?: string;
}

export const DEFAULT_FS_BACKUP_TIMEOUT_MS = 4 * 3_600_000;
export const DEFAULT_CSI_SNAPSHOT_TIMEOUT_MS = 10 * 60_000;
export const DEFAULT_TTL_MS = 720 * 3_600_000;
export const DEFAULT_STORAGE_LOCATION = 'default';
export const DEFAULT_HOOK_TIMEOUT_MS = 30_000;
/** Velero (main, #10125) caps a hook's timeout at 4 h. */
export const MAX_HOOK_TIMEOUT_MS = 4 * 3_600_000;
/** The operator's cap on hook timeouts unless raised (STOWAGE_MAX_HOOK_TIMEOUT, at most MAX_HOOK_TIMEOUT_MS). */
export const DEFAULT_MAX_HOOK_TIMEOUT_MS = 30 * 60_000;
/** Retries of one hook: a few, not a loop that outlives the backup. */
export const MAX_HOOK_RETRIES = 10;
export const MAX_HOOK_RETRY_BACKOFF_MS = 10 * 60_000;
export const DEFAULT_HOOK_RETRY_BACKOFF_MS = 1_000;

/** Velero's scoped resource filters (its "new" filters), which never mix with the old ones. */
export const SCOPED_FILTER_FIELDS = [
  'includedClusterScopedResources',
  'excludedClusterScopedResources',
  'includedNamespaceScopedResources',
  'excludedNamespaceScopedResources',
] as const;

/** True when the spec (raw or validated) uses the old resource filters (Velero's `UseOldResourceFilters`). */
export function usesOldResourceFilters(spec: Record<string, unknown>): boolean {
  return (
    (spec.includeClusterResources !== undefined && spec.includeClusterResources !== null) ||
    nonEmptyList(spec.includedResources) ||
    nonEmptyList(spec.excludedResources)
  );
}
