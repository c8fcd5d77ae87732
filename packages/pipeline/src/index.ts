// The registry lives in @stowage/queue (the node agent uses it without the processors); re-exported for the pipeline's users.
export { DEFAULT_AGENT_TTL_MS, NodeAgentRegistry, type NodeAgentRegistryOptions } from '@stowage/queue';
export { type DeleteBackupDeps, deleteBackup } from './deletion/delete-backup.js';
export { type DeletedSnapshot, deleteKeptSnapshots } from './deletion/delete-snapshots.js';
export {
  PRUNE_SUMMARY_FIELDS,
  type PruneRunSummary,
  type PruneStatus,
  PruneStatusStore,
  pruneJobId,
  type RepositoryGc,
  requestPrune,
} from './deletion/repository-gc.js';
export {
  type BlockWait,
  type BlockWaitInput,
  type Clock,
  DEFAULT_PIPELINE_CONFIG,
  type PipelineConfig,
  type PipelineDeps,
  type PipelineLogger,
  statePrefixFor,
} from './deps.js';
export { PipelineError, PipelineErrorCode, UnrecoverablePipelineError } from './errors.js';
export { PromotingInformerHub, type PromotingSource } from './informers/promoting-informer-hub.js';
export { inlineBlockWait } from './inline-block-wait.js';
export { NO_PIPELINE_METRICS, type PipelineMetrics, scheduleOf } from './metrics.js';
export type { BlockPlan, HookPhase, PlannedHook, PlannedItem, PlannedPod, PlannedVolume, PlanSkip } from './plan/block-plan.js';
export { type DryRunDeps, ESTIMATE_BASIS, planDryRun } from './plan/dry-run.js';
export { type VolumeOutcome, volumeOutcomes } from './plan/volume-outcomes.js';
export type { DeleteBackupResult } from './processors/delete-backup.processor.js';
export type { FinalizeResult } from './processors/finalize.processor.js';
export type { ItemBlockResult } from './processors/item-block.processor.js';
export type { PlanResult } from './processors/plan.processor.js';
export type { PostHooksResult } from './processors/post-hooks.processor.js';
export type { PruneRepositoryResult } from './processors/prune-repository.processor.js';
export type { PvrWatchResult } from './processors/pvr-watch.processor.js';
export { decideRestorePhase, type RestoreFinalizeResult } from './processors/restore-finalize.processor.js';
export type { RestoreHooksResult } from './processors/restore-hooks.processor.js';
export type { RestoreItemsResult } from './processors/restore-items.processor.js';
export type { RestorePlanResult } from './processors/restore-plan.processor.js';
export type { RestoreTierResult } from './processors/restore-tier.processor.js';
export type { RunScheduleResult } from './processors/run-schedule.processor.js';
export { PvbInformerHub } from './pvb/pvb-informer-hub.js';
export type { PvbWatchResult } from './pvb/pvb-observation.js';
export { InFlightLimit } from './restore/in-flight-limit.js';
export { applyRestoreApiCap, RESTORE_JOB_SHARE, restoreApiShares } from './restore/restore-api-cap.js';
export type { PlannedRestoreHook, PlannedRestoreItem, RestorePodPlan, RestoreTierPlan } from './restore/restore-plan-types.js';
export { completedSnapshotsOf } from './restore/restore-snapshots.js';
export {
  type ItemOutcome,
  type ItemResult,
  type PvrStateRecord,
  type RestoreRecord,
  RestoreState,
} from './restore/restore-state.js';
export {
  RESTORE_ARCHIVE_FORMAT_VERSION,
  type RestoreArchive,
  readRestoreArchive,
  readRestoreArchiveEvents,
  readRestoreArchiveItems,
  readRestoreArchiveLogs,
  restoreLayout,
  writeRestoreArchive,
} from './restore/restore-storage.js';
export {
  type CancelRestoreResult,
  cancelRestore,
  type SubmitRestoreDeps,
  type SubmitRestoreInput,
  type SubmitRestoreResult,
  submitRestore,
} from './restore/restore-submit.js';
export {
  type ArchivedSchedule,
  SCHEDULE_ARCHIVE_FORMAT_VERSION,
  SCHEDULES_ROOT,
  ScheduleArchive,
  scheduleLayout,
} from './schedules/schedule-archive.js';
export { type CreateScheduleResult, jobSchedulerId, ScheduleControl, type ScheduleStatus } from './schedules/schedule-control.js';
export { type ScheduleRecord, type ScheduleSkip, ScheduleStore } from './schedules/schedule-store.js';
export {
  ARCHIVE_BLOCKS_PER_PAGE,
  ARCHIVE_EVENTS_PER_SEGMENT,
  ARCHIVE_FORMAT_VERSION,
  type ArchivedBlock,
  BackupArchiveError,
  type BackupArchiveManifest,
  BackupArchiveReader,
  compareStreamIds,
  countLivePvbPhases,
  type LoadedBackupArchive,
  loadBackupArchive,
  readLiveBlocks,
  writeBackupArchive,
} from './state/backup-archive.js';
export {
  type BackupEvent,
  type BackupProblem,
  type BackupRecord,
  BackupState,
  type BackupStateOptions,
  type BlockStateRecord,
  type HookRunRecord,
  interruptedRun,
  type LogLine,
  type PvbStateRecord,
} from './state/backup-state.js';
export { type ClaimedBlock, DispatchWindow } from './state/dispatch-window.js';
export { type LogLine as RunLogLine, type RunEvent, type RunRecord, RunState } from './state/run-state.js';
export { STORAGE_COUNTER, storageCostFromCounters } from './state/storage-cost.js';
export {
  type CancelBackupResult,
  cancelBackup,
  type RequestDeletionResult,
  requestBackupDeletion,
  type SubmitBackupDeps,
  type SubmitBackupInput,
  type SubmitBackupResult,
  submitBackup,
} from './submit.js';
export {
  createPipeline,
  type HostedQueue,
  type Pipeline,
  type RunningWorkers,
  type StartWorkersOptions,
  startWorkers,
  type WorkerConcurrency,
  type WorkerLockTiming,
} from './workers.js';
