/**
 * Every code core hands out, in one place. Codes are stable strings (`CORE_WHAT`): services map
 * them to HTTP errors, records and metrics by table, so never rename one — add new ones.
 */
export const CORE_ERROR_CODES = {
  /** The backup request failed validation; `problems` lists every reason. */
  CORE_VALIDATION_FAILED: 'CORE_VALIDATION_FAILED',
  /** A resource-policy document (inline or from a ConfigMap) is invalid. */
  CORE_RESOURCE_POLICY_INVALID: 'CORE_RESOURCE_POLICY_INVALID',

  // Grouping warnings
  /** A pod mounts a PVC that is not in the listed items. */
  CORE_GROUPING_PVC_NOT_FOUND: 'CORE_GROUPING_PVC_NOT_FOUND',
  /** A bound PVC names a PV that is not in the listed items. */
  CORE_GROUPING_PV_NOT_FOUND: 'CORE_GROUPING_PV_NOT_FOUND',
  /** Two items share a key (same resource, namespace and name); the later duplicate is ignored. */
  CORE_GROUPING_DUPLICATE_ITEM: 'CORE_GROUPING_DUPLICATE_ITEM',
  /** An item labelled stowage.dev/never-backup=true (Stowage's own key or credentials) is left out of every backup. */
  CORE_GROUPING_NEVER_BACKUP: 'CORE_GROUPING_NEVER_BACKUP',

  // Hook resolution
  /** A hook names a container the pod does not have: recorded as a failed hook, never run. */
  CORE_HOOK_CONTAINER_NOT_FOUND: 'CORE_HOOK_CONTAINER_NOT_FOUND',
  /** A hook would default to the first container but the pod has none. */
  CORE_HOOK_POD_HAS_NO_CONTAINERS: 'CORE_HOOK_POD_HAS_NO_CONTAINERS',
  /** An annotation value could not be used; the default was used instead (a warning). */
  CORE_HOOK_ANNOTATION_INVALID: 'CORE_HOOK_ANNOTATION_INVALID',
  /** The pod is Succeeded/Failed: its hooks are skipped. */
  CORE_HOOK_POD_FINISHED: 'CORE_HOOK_POD_FINISHED',

  // fs-backup volume decisions (every decision carries one of these)
  CORE_VOLUME_TYPE_NEVER_BACKED_UP: 'CORE_VOLUME_TYPE_NEVER_BACKED_UP',
  CORE_VOLUME_DEFAULT_TOKEN: 'CORE_VOLUME_DEFAULT_TOKEN',
  CORE_VOLUME_PVC_EXCLUDED: 'CORE_VOLUME_PVC_EXCLUDED',
  CORE_VOLUME_PVC_NOT_FOUND: 'CORE_VOLUME_PVC_NOT_FOUND',
  CORE_VOLUME_HOSTPATH_PV: 'CORE_VOLUME_HOSTPATH_PV',
  CORE_VOLUME_POLICY_FS_BACKUP: 'CORE_VOLUME_POLICY_FS_BACKUP',
  CORE_VOLUME_POLICY_SKIP: 'CORE_VOLUME_POLICY_SKIP',
  CORE_VOLUME_POLICY_SNAPSHOT: 'CORE_VOLUME_POLICY_SNAPSHOT',
  CORE_VOLUME_OPTED_IN: 'CORE_VOLUME_OPTED_IN',
  CORE_VOLUME_NOT_OPTED_IN: 'CORE_VOLUME_NOT_OPTED_IN',
  CORE_VOLUME_DEFAULT_FS_BACKUP: 'CORE_VOLUME_DEFAULT_FS_BACKUP',
  CORE_VOLUME_OPTED_OUT: 'CORE_VOLUME_OPTED_OUT',
  CORE_VOLUME_POD_NOT_RUNNING: 'CORE_VOLUME_POD_NOT_RUNNING',
  CORE_VOLUME_NO_NODE_AGENT: 'CORE_VOLUME_NO_NODE_AGENT',
  CORE_VOLUME_PVC_ALREADY_CLAIMED: 'CORE_VOLUME_PVC_ALREADY_CLAIMED',
  CORE_VOLUME_NOT_MOUNTED: 'CORE_VOLUME_NOT_MOUNTED',
  CORE_VOLUME_BLOCK_MODE: 'CORE_VOLUME_BLOCK_MODE',
  /** A PVC without a PV (Pending, Lost) that no volume policy matched: an error, as in Velero. */
  CORE_VOLUME_PVC_WITHOUT_PV: 'CORE_VOLUME_PVC_WITHOUT_PV',
  /** Snapshotted because the backup's snapshotVolumes is true and nothing chose fs-backup. */
  CORE_VOLUME_SNAPSHOT_VOLUMES: 'CORE_VOLUME_SNAPSHOT_VOLUMES',
  /** A block-mode volume chosen for fs-backup is snapshotted instead (snapshotVolumes is true). */
  CORE_VOLUME_BLOCK_MODE_SNAPSHOT: 'CORE_VOLUME_BLOCK_MODE_SNAPSHOT',
  /** A volume chosen for a snapshot that cannot be snapshotted (not a CSI PVC, no class, ...): an error. */
  CORE_VOLUME_SNAPSHOT_IMPOSSIBLE: 'CORE_VOLUME_SNAPSHOT_IMPOSSIBLE',

  /** A phase change that the state machine does not allow. */
  CORE_ILLEGAL_TRANSITION: 'CORE_ILLEGAL_TRANSITION',
} as const;

export type CoreErrorCode = keyof typeof CORE_ERROR_CODES;

/** Thrown only for broken invariants (a caller bug), never for expected outcomes. */
export class CoreInvariantError extends Error {
  override readonly name = 'CoreInvariantError';
  constructor(
    readonly code: CoreErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Exhaustiveness check for `switch` over a union: a type error when a case is missing. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}
