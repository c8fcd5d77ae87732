export { type CappedBackoffOptions, cappedBackoffMs } from './backoff.js';
export { createProducerConnection, createWorkerConnection, type RedisConnectionOptions, reconnectStrategy } from './connections.js';
export { JobName, QUEUE_NAMES, QUEUE_OF_JOB, QUEUE_PREFIX, QueueName, qualifiedQueueName } from './constants.js';
export { JobPayloadError, QueueError, QueueErrorCode } from './errors.js';
export { createFlowProducer, createQueue, type QueueFactoryOptions } from './factories.js';
export {
  addBackupFlow,
  addBlockFlows,
  addDeleteBackupJob,
  addPvbWatch,
  type BackupFlowIds,
  type BackupFlowInput,
  type BlockFlowProducers,
  type BlockFlowSpec,
  type BlockFlowsInput,
  type BlockFlowsResult,
  DEFAULT_BLOCK_BATCH_SIZE,
  deleteBackupJobId,
  type ParentRef,
  type PvbWatchStart,
  postHooksParentOf,
  repark,
} from './flows.js';
export { childJobOptions, DEFAULT_JOB_OPTIONS } from './job-options.js';
export {
  type DeleteBackupJobData,
  deleteBackupJobSchema,
  type FinalizeJobData,
  finalizeJobSchema,
  type ItemBlockJobData,
  itemBlockJobSchema,
  type PlanJobData,
  type PostHooksJobData,
  type PvbWatchJobData,
  parseDeleteBackupJobData,
  parseFinalizeJobData,
  parseItemBlockJobData,
  parsePlanJobData,
  parsePostHooksJobData,
  parsePvbWatchJobData,
  parseRunScheduleJobData,
  planJobSchema,
  postHooksJobSchema,
  pvbWatchJobSchema,
  type RunScheduleJobData,
  runScheduleJobSchema,
} from './payloads.js';
export {
  nodeAgentsKey,
  type RunKeyTag,
  runIndexKey,
  runKey,
  scheduleIndexKey,
  scheduleKey,
  statePrefixFor,
} from './redis-keys.js';
export {
  addRestoreFlow,
  addRestoreHooksFlow,
  addRestoreTier,
  type PvrWatchJobData,
  parentRefOf,
  parsePvrWatchJobData,
  parseRestoreHooksJobData,
  parseRestoreItemsJobData,
  parseRestoreRunJobData,
  parseRestoreTierJobData,
  type RestoreHooksJobData,
  type RestoreItemsJobData,
  type RestoreRunJobData,
  type RestoreTierJobData,
  restoreFinalizeRef,
  restoreJobIds,
} from './restore-flows.js';
