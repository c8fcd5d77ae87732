export { type ApiClientOptions, type EventStreamOptions, isTerminalPhase, parseApiUrl, StowageApiClient } from './api-client.js';
export type {
  Backup,
  BackupEvent,
  BackupList,
  BackupSummary,
  Block,
  BlockPage,
  BlockPvb,
  CreateBackupRequest,
  HookRun,
  PvbCounts,
} from './api-types.js';
export {
  type BackupReport,
  buildBackupReport,
  type HookRunSummary,
  type PostHookLag,
  type PvbSummary,
  postHookLags,
} from './backup-report.js';
export { type BackupSpecFlags, mergeRequest, parseSelector, readSpecFile, requestFromDocument, specFromFlags } from './backup-spec.js';
export { CLI_VERSION, type CliEnv, type CliIo, clientFromEnv, runCli, USAGE } from './cli.js';
export { DEMO_USAGE, type DemoOptions, parseDemoArgs } from './demo/demo-options.js';
export { type DemoIo, type DemoSummary, formatDemoSummary, runDemo } from './demo/demo-runner.js';
export { type ExitInfo, ManagedProcess, type ManagedProcessOptions } from './demo/managed-process.js';
export { CliError, CliErrorCode, type CliProblem, ExitCode, formatCliError, isCliError } from './errors.js';
export { type FollowOptions, type FollowResult, followBackup } from './follow.js';
export { BackupProgress, ProgressRenderer, type ProgressSnapshot, renderBars } from './progress.js';
export { SseParser } from './sse-parser.js';
