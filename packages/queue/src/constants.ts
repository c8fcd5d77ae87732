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
  /** One tick of a schedule (produced by its BullMQ job scheduler): starts the tick's backup. */
  runSchedule: 'run-schedule',
  /** Deletes a backup: delayed by its TTL when it is submitted, or at once when a user deletes it. */
  deleteBackup: 'delete-backup',
} as const;
export type JobName = (typeof JobName)[keyof typeof JobName];

/** The queue each job name lives on. */
export const QUEUE_OF_JOB: Readonly<Record<JobName, QueueName>> = {
  plan: QueueName.backups,
  finalize: QueueName.backups,
  'backup-item-block': QueueName.itemBlocks,
  'watch-pvb': QueueName.pvbWatch,
  'run-post-hooks': QueueName.hooks,
  'run-schedule': QueueName.backups,
  'delete-backup': QueueName.backups,
};

/** The key BullMQ uses for a queue (`parent.queue` of a child job): `<prefix>:<queue>`. */
export function qualifiedQueueName(prefix: string, queueName: QueueName): string {
  return `${prefix}:${queueName}`;
}
