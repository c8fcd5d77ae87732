export {
  type CopyStart,
  type NodeAgent,
  type NodeAgentMetrics,
  type NodeAgentOptions,
  startNodeAgent,
} from './agent.js';
export { DEFAULT_KUBELET_ROOT, DEFAULT_NODE_AGENT_PORT, loadNodeAgentConfig, type NodeAgentConfig } from './agent-config.js';
export { type ByteRateResult, parseByteRate } from './byte-rate.js';
export { NodeAgentError, NodeAgentErrorCode } from './errors.js';
export { describeCopyFailure } from './failure-message.js';
export {
  DEFAULT_LOAD_CONCURRENCY,
  type LoadConcurrencyConfig,
  type ParsedLoadConcurrency,
  parseLoadConcurrency,
  resolveLoadConcurrency,
} from './load-concurrency.js';
export { renderMetrics } from './metrics.js';
export { type NodeAgentService, startNodeAgentService } from './node-agent-service.js';
export { openOrInitRepository } from './repository-access.js';
export {
  doneMarkerPath,
  RESTORE_WAIT_COMMAND,
  type RestoreWaitOptions,
  type RestoreWaitResult,
  runRestoreWait,
  waitForRestoredVolumes,
} from './restore-wait.js';
export { resolveVolumeDir, type VolumeDirResult } from './volume-dir.js';
export type { OperationStart } from './volume-operation-runner.js';
