/**
 * Every queue shares one hash-tagged prefix so a flow (which spans queues) keeps all its keys
 * in one Redis Cluster slot. Tests pass their own prefix (`uniquePrefix()` from @stowage/testing).
 */
export const QUEUE_PREFIX = '{stowage}';

/** Queue names: kebab nouns. */
export const QueueName = {
  backups: 'backups',
  itemBlocks: 'item-blocks',
  pvbWatch: 'pvb-watch',
  hooks: 'hooks',
  /** Restore plan, tiers and finalize (hosted by the api service, like `backups`). */
  restores: 'restores',
  /** Batches of items a restore creates (hosted by workers). */
  restoreItems: 'restore-items',
  /**
   * Backup deletions and repository prunes (hosted by the backup workers, which hold the
   * repository key: the internet-facing api never opens the repository).
   */
  repository: 'repository',
} as const;
export type QueueName = (typeof QueueName)[keyof typeof QueueName];

export const QUEUE_NAMES: readonly QueueName[] = Object.values(QueueName);

/** Job names: verb-nouns. */
export const JobName = {
  plan: 'plan',
  finalize: 'finalize',
  backupItemBlock: 'backup-item-block',
  watchPvb: 'watch-pvb',
  runPostHooks: 'run-post-hooks',
  /**
   * The backup-level hooks of one phase (queue hooks, in the backup workers, which hold
   * `pods/exec`): a child of plan (pre) or of finalize (post), which wait for it parked.
   */
  runBackupHooks: 'run-backup-hooks',
  /** One tick of a schedule (produced by its BullMQ job scheduler): starts the tick's backup. */
  runSchedule: 'run-schedule',
  /** Deletes a backup: delayed by its TTL when it is submitted, or at once when a user deletes it. */
  deleteBackup: 'delete-backup',
  /** Garbage-collects the volume repository after deletions (and again when retired data is past its grace). */
  pruneRepository: 'prune-repository',
  restorePlan: 'restore-plan',
  restoreTier: 'restore-tier',
  restoreItems: 'restore-items',
  restoreFinalize: 'restore-finalize',
  /** Watches a PodVolumeRestore (queue pvb-watch: the same machinery as watch-pvb). */
  watchPvr: 'watch-pvr',
  /** Post-restore hooks of one pod (queue hooks), after its PVRs and once its container is up. */
  runRestoreHooks: 'run-restore-hooks',
} as const;
export type JobName = (typeof JobName)[keyof typeof JobName];

/** The queue each job name lives on. */
export const QUEUE_OF_JOB: Readonly<Record<JobName, QueueName>> = {
  plan: QueueName.backups,
  finalize: QueueName.backups,
  'backup-item-block': QueueName.itemBlocks,
  'watch-pvb': QueueName.pvbWatch,
  'run-post-hooks': QueueName.hooks,
  'run-backup-hooks': QueueName.hooks,
  'run-schedule': QueueName.backups,
  'delete-backup': QueueName.repository,
  'prune-repository': QueueName.repository,
  'restore-plan': QueueName.restores,
  'restore-tier': QueueName.restores,
  'restore-items': QueueName.restoreItems,
  'restore-finalize': QueueName.restores,
  'watch-pvr': QueueName.pvbWatch,
  'run-restore-hooks': QueueName.hooks,
};

/** The key BullMQ uses for a queue (`parent.queue` of a child job): `<prefix>:<queue>`. */
export function qualifiedQueueName(prefix: string, queueName: QueueName): string {
  return `${prefix}:${queueName}`;
}
