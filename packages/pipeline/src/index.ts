export { DEFAULT_AGENT_TTL_MS, NodeAgentRegistry, type NodeAgentRegistryOptions } from './agents/node-agent-registry.js';
export {
  type Clock,
  DEFAULT_PIPELINE_CONFIG,
  type PipelineConfig,
  type PipelineDeps,
  type PipelineLogger,
  statePrefixFor,
  type WaitMode,
} from './deps.js';
export { PipelineError, PipelineErrorCode, UnrecoverablePipelineError } from './errors.js';
export type { BlockPlan, HookPhase, PlannedHook, PlannedItem, PlannedPod, PlannedVolume, PlanSkip } from './plan/block-plan.js';
export { type VolumeOutcome, volumeOutcomes } from './plan/volume-outcomes.js';
export type { FinalizeResult } from './processors/finalize.processor.js';
export type { ItemBlockResult } from './processors/item-block.processor.js';
export type { PlanResult } from './processors/plan.processor.js';
export type { PostHooksResult } from './processors/post-hooks.processor.js';
export { PvbInformerHub } from './pvb/pvb-informer-hub.js';
export type { PvbWatchResult } from './pvb/pvb-observation.js';
export {
  type BackupEvent,
  type BackupProblem,
  type BackupRecord,
  BackupState,
  type BackupStateOptions,
  type BlockStateRecord,
  ENDED_BACKUP_PHASES,
  type HookRunRecord,
  interruptedRun,
  type LogLine,
  type PvbStateRecord,
} from './state/backup-state.js';
export {
  type CancelBackupResult,
  cancelBackup,
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
  workerLockTimingFromEnv,
} from './workers.js';
