import type { PlannedHook } from '../plan/block-plan.js';
import type { PlannedBlockDownload } from './block-download-plan.js';

/*
 * What restore-plan stores (RestoreState.planWriter) and the restore jobs read back. It outlives
 * deploys like a payload does: only add optional fields.
 */

export interface RestoreTierPlan {
  index: number;
  groupResources: string[];
  /** What the tier waits for once its items exist, before the next tier starts. */
  waitUntil: 'crds-established' | 'namespaces-active' | null;
  batches: number;
  items: number;
  /** The CRDs or namespaces of this tier that `waitUntil` waits for (target names). */
  waitFor: string[];
}

/** One item to create: where, and the object as it is sent (transforms applied). */
export interface PlannedRestoreItem {
  /** `<group-resource>/<target namespace or -cluster->/<target name>`: the once-key of its result. */
  key: string;
  groupResource: string;
  /** API group ('' = core), version and plural: the REST path. */
  group: string;
  version: string;
  resource: string;
  kind: string;
  namespace: string | null;
  name: string;
  /** Where it was backed up (before namespaceMapping), for the results and the diff. */
  sourceNamespace: string | null;
  object: Record<string, unknown>;
}

/** A post-restore exec hook, resolved for one pod. */
export interface PlannedRestoreHook extends PlannedHook {
  /** How long to wait for the container to be running (ready with waitForReady); 0 = until the restore's deadline. */
  waitTimeoutMs: number;
  waitForReady: boolean;
}

/** A restored pod that gets PVRs or post-restore hooks (or both): a restore-hooks job. */
export interface RestorePodPlan {
  /** Target namespace and name. */
  namespace: string;
  name: string;
  sourceNamespace: string;
  volumes: Array<{ volume: string; snapshotID: string }>;
  hooks: PlannedRestoreHook[];
  /** Moved block volumes written back through DataDownloads before the claim binds (block-downloads.ts). */
  blockVolumes?: PlannedBlockDownload[];
}
