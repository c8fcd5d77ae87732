/*
 * What the planner stores per block (BackupState.putBlockPlans) and the block jobs read back.
 * It outlives deploys like a payload does: only add optional fields.
 */
import type { PlanSkip } from '@stowage/core';

export type { PlanSkip };

export type HookPhase = 'pre' | 'post';

export interface PlannedHook {
  container: string;
  /** argv, never run through a shell. */
  command: string[];
  /** `FailBlock` (pre hooks): the whole block is skipped when the hook fails. */
  onError: 'Fail' | 'Continue' | 'FailBlock';
  timeoutMs: number;
  /** A failed hook runs again up to `max` more times, `backoffMs` apart; absent = once. */
  retries?: { max: number; backoffMs: number } | undefined;
  /** Post hooks: Always (absent), OnSuccess (every PVB of the block completed), OnFailure (one did not). */
  executionPolicy?: 'Always' | 'OnSuccess' | 'OnFailure' | undefined;
  /** `annotation` or `spec`. */
  source: string;
  /** The spec hook's name ('' for annotations). */
  hookName: string;
  /** Position in the pod's list for this phase (part of the once-key). */
  index: number;
  /** Set when the hook cannot run (e.g. its container does not exist): attempted and failed, never run. */
  invalid?: string | undefined;
}

export interface PlannedVolume {
  /** The pod volume's name. */
  name: string;
  /**
   * `fs-backup` gets a PVB; `snapshot` a CSI VolumeSnapshot (`snapshot` says how); `skip` neither
   * (reason says why); `error` cannot be backed up (reason says why; recorded as an error).
   */
  action: 'fs-backup' | 'snapshot' | 'skip' | 'error';
  reason?: string | undefined;
  /** The PVC behind the volume, if any. */
  claimName?: string | undefined;
  /**
   * The deterministic PVB name: of an fs-backup volume, or of a volume skipped only because
   * another pod took its PVC (`claimedBy`), which gets that name if it takes the claim over.
   */
  pvbName?: string | undefined;
  /**
   * Set on a volume skipped only because pod `claimedBy` (`<ns>/<name>`, same block) took its PVC
   * (one PVB per PVC): should that pod not be backed up (its pre hook failed with `onError:
   * Fail`), this pod takes the claim over at run time (see claim-handover.ts).
   */
  claimedBy?: string | undefined;
  /** Set when `action` is `snapshot`. */
  snapshot?: PlannedSnapshot | undefined;
}

/** How a volume is snapshotted (core's VolumeSnapshotPlan, named). */
export interface PlannedSnapshot {
  /** The VolumeSnapshot's name (in the pod's namespace); also the DataUpload's, when its data is moved. */
  name: string;
  className: string;
  driver: string;
  pvName: string;
  volumeMode: 'Filesystem' | 'Block';
  /** Its data is moved into the repository (a DataUpload), then the snapshot is deleted. */
  moveData: boolean;
}

export interface PlannedPod {
  namespace: string;
  name: string;
  uid: string;
  node?: string | undefined;
  /** The pod's item key (items of a pod whose pre hook failed with Fail are not written). */
  itemKey: string;
  hooks: { pre: PlannedHook[]; post: PlannedHook[] };
  volumes: PlannedVolume[];
}

/** One item of the block, without its manifest (the manifests are stored apart and dropped after finalize). */
export interface PlannedItem {
  /** `<group-resource>/<namespace or -cluster->/<name>`: unique per backup, the once-key of itemsBackedUp. */
  key: string;
  apiVersion: string;
  kind: string;
  /** `resource.group`, e.g. `pods`, `deployments.apps`. */
  groupResource: string;
  namespace?: string | undefined;
  name: string;
}

export interface BlockPlan {
  id: string;
  pods: PlannedPod[];
  items: PlannedItem[];
  skips: PlanSkip[];
  /** Volumes that could not be decided (e.g. a PVC without a PV under a volume policy): recorded as errors. */
  errors?: PlanSkip[];
  /** Problems with hook annotations and the like (the default was used). */
  warnings?: string[];
}

export function podKey(pod: { namespace: string; name: string }): string {
  return `${pod.namespace}/${pod.name}`;
}

export function itemKeyOf(groupResource: string, namespace: string | undefined, name: string): string {
  return `${groupResource}/${namespace ?? '-cluster-'}/${name}`;
}

/**
 * Whether the block needs a post-hooks job: some pod has a post hook, or a volume that gets a PVB
 * or a snapshot (which the post hooks, if any, must wait for: a PVB's end, a snapshot's cut). A block without either is planned "solo": one
 * item-block job under finalize, which finishes the block itself (docs/architecture.md#blocks-without-volume-operations: blocks without PVBs
 * run their post hooks — here none — right after their items).
 */
export function needsPostHooksJob(plan: Pick<BlockPlan, 'pods'>): boolean {
  return plan.pods.some((pod) => pod.hooks.post.length > 0 || pod.volumes.some((v) => v.action === 'fs-backup' || v.action === 'snapshot'));
}
