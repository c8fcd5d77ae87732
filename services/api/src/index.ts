export { type ApiDeps, type BackupControl, DEFAULT_BODY_LIMIT_BYTES } from './api-deps.js';
export { type ApiService, type ApiServiceOptions, authModeOf, startApiService } from './api-service.js';
export { buildApp } from './app.js';
export { type AuthMode, createTokenVerifier } from './auth.js';
export { formatSseEvent, isTerminalPhaseEvent } from './backup-events.routes.js';
export {
  type BackupSyncLoop,
  type BackupSyncOptions,
  type BackupSyncResult,
  LOST_IN_FLIGHT_REASON,
  startBackupSyncLoop,
  syncBackupCatalogue,
} from './backup-sync.js';
export { BackupReads } from './backup-view.js';
export { ApiError, type ApiErrorBody, ApiErrorCode, type ApiProblem, HTTP_STATUS_OF } from './errors.js';
export { type ApiMetrics, createApiMetrics } from './metrics.plugin.js';
export { createPipelineControl, type PipelineControlDeps } from './pipeline-control.js';
