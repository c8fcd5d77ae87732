/*
 * The wire shape of a backup's dry run (POST /v1/backups?dryRun=true): what the pipeline's plan
 * step produces, the API answers and the CLI prints. Typed once, here, so the three agree.
 */

import type { NodeByteEstimate, VolumeSizeBasis } from './backup-estimate.js';
import type { BackupLevelHook } from './backup-spec.js';

/** Something the plan skips (a volume's data, a hook, an item), with why. */
export interface PlanSkip {
  /** What was skipped: `pods/ns/name volume data`, a hook, an item. */
  what: string;
  reason: string;
}

export interface DryRunHook {
  container: string;
  command: string[];
  onError: 'Fail' | 'Continue' | 'FailBlock';
  timeoutMs: number;
  /** `annotation` (the pod's hook annotations) or `spec` (spec.hooks.resources). */
  source: string;
  /** The spec hook's name; absent for annotations. */
  hookName?: string;
  /** Why the hook cannot run (a real run records it as a failed attempt). */
  invalid?: string;
}

export interface DryRunVolume {
  /** `namespace/name` of the pod. */
  pod: string;
  volume: string;
  /**
   * `fs-backup`: gets a PodVolumeBackup; `snapshot`: a CSI VolumeSnapshot (kept, or its data moved);
   * `skip`: neither (reason); `error`: cannot be backed up (reason; an error of the run).
   */
  decision: 'fs-backup' | 'snapshot' | 'skip' | 'error';
  /** snapshot volumes: kept in the cluster or moved into the repository, and the VolumeSnapshotClass. */
  snapshot?: { method: 'kept' | 'moved'; className: string };
  reason?: string;
  claimName?: string;
  node?: string;
  /** fs-backup volumes only: an estimate (see estimateBasis), not a measurement. */
  estimatedBytes?: number | null;
  estimateBasis?: VolumeSizeBasis | 'unknown';
}

export interface DryRunBlock {
  id: string;
  items: Array<{ key: string; apiVersion: string; kind: string; namespace?: string; name: string }>;
  pods: Array<{ namespace: string; name: string; node?: string; hooks: { pre: DryRunHook[]; post: DryRunHook[] } }>;
  volumes: DryRunVolume[];
  /** What the plan skips in this block (hooks, volumes), with why. */
  skips: PlanSkip[];
}

/** A backup-level hook (spec.hooks.backup) and the pods it would run in now. */
export interface BackupHookPreview {
  name: string;
  namespace: string;
  command: string[];
  onError: BackupLevelHook['onError'];
  timeoutMs: number;
  targets: Array<{ pod: string; container: string; invalid?: string }>;
  /** Why it would fail without running anywhere (no pod matches, pods cannot be listed). */
  failure?: string;
}

export interface DryRunPlan {
  name: string;
  dryRun: true;
  /** Set when a real run would end FailedValidation before listing anything (e.g. a bad resource policy ConfigMap). */
  failedValidation?: string;
  summary: {
    blocks: number;
    items: number;
    pods: number;
    preHooks: number;
    postHooks: number;
    fsBackupVolumes: number;
    skippedVolumes: number;
    volumeErrors: number;
  };
  estimate: {
    /** Always true: the numbers are provisioned sizes, not measured. */
    isEstimate: true;
    basis: string;
    totalBytes: number;
    perNode: NodeByteEstimate[];
  };
  /** spec.hooks.backup: per phase, each hook with the pods it would run in now (pre: before any block; post: after all). */
  backupHooks: { pre: BackupHookPreview[]; post: BackupHookPreview[] };
  blocks: DryRunBlock[];
  /** What a real run would record as warnings. */
  warnings: string[];
  /** What a real run would record as errors (volumes that cannot be decided). */
  errors: string[];
  /** Informational lines a real run would log. */
  notes: string[];
}
