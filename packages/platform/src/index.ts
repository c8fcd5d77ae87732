export {
  type ConfigProblem,
  type ConfigResult,
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
export { parseCommandStats } from './redis-info.js';
