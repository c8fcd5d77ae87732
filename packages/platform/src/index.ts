export {
  type ConfigProblem,
  type ConfigResult,
  DEFAULT_RESTORE_PLAN_HEAP_MB,
  DEFAULT_RESTORE_WAIT_IMAGE,
  formatConfigProblems,
  LOG_LEVELS,
  type LoadConfigOptions,
  type LoadConfigOrExitOptions,
  type LogLevel,
  loadConfig,
  loadConfigOrExit,
  STOWAGE_ENV_VARS,
  type StorageLocation,
  type StowageConfig,
  type StowageEnvVar,
  stowageEnvSchema,
  WORKER_QUEUES,
  type WorkerQueue,
} from './config.js';
export { type EmbeddedRedis, type EmbeddedRedisOptions, REDIS_INSTALL_HINT, startEmbeddedRedis } from './embedded-redis.js';
export { PlatformError, PlatformErrorCode } from './errors.js';
export { getFreePort } from './free-port.js';
export {
  createLifecycle,
  type Lifecycle,
  type LifecycleOptions,
  type ProcessEvents,
  type ShutdownReport,
  type ShutdownStep,
  type StepOptions,
  type StepReport,
} from './lifecycle.js';
export {
  type CreateLoggerOptions,
  componentLogger,
  createLogger,
  type JobLogContext,
  jobLogger,
  type Logger,
  REDACT_PATHS,
  REDACTED,
} from './logger.js';
export {
  createProcessMetrics,
  type PipelineEventMetrics,
  type ProcessMetrics,
  registerStorageMetrics,
  type StorageCostSource,
} from './process-metrics.js';
export { parseCommandStats } from './redis-info.js';
