export {
  type DiscoveredResource,
  type DiscoveryFailure,
  type DiscoveryResult,
  discoverResources,
  groupVersionPath,
  preferredGroupVersions,
  selectListableResources,
  splitGroupVersion,
} from './discovery.js';
export {
  type Informer,
  type InformerEvent,
  type InformerEventType,
  type InformerOptions,
  type InformerStats,
  startInformer,
  type WatchPodsOptions,
  watchPods,
} from './informer.js';
export { createKubeClients, type KubeClientOptions, type KubeClients, type KubeJsonRequest } from './kube-clients.js';
export {
  callKube,
  codeForStatus,
  isConnectionError,
  isKubeError,
  KubeError,
  type KubeErrorCode,
  KubeErrorCodes,
  type KubeErrorInit,
  kubeErrorFromResponse,
  toKubeError,
} from './kube-errors.js';
export {
  apiVersionOfPath,
  collectionPath,
  type ListAllOptions,
  type ListCollectionOptions,
  type ListPage,
  listAll,
  listAllItems,
  listCollection,
  type ResourceRef,
} from './list-all.js';
export { type ExecErrorReason, type ExecInPodOptions, type ExecResult, execInPod, exitCodeFromStatus } from './pod-exec.js';
export { getPod, listNodes, type ReadPodsOptions, readPods } from './pods.js';
export {
  type ConditionalStatusResult,
  type CreatePvbResult,
  createPvbClient,
  isPvbTerminal,
  type NewPodVolumeBackup,
  type PodVolumeBackup,
  type PodVolumeBackupSpec,
  type PodVolumeBackupStatus,
  type PvbClient,
  type PvbClientOptions,
  type PvbPhase,
  pvbApiVersion,
  pvbGroup,
  pvbKind,
  pvbLabels,
  pvbPlural,
  pvbVersion,
  type RequestCancelResult,
  terminalPvbPhases,
} from './pvb-client.js';
export {
  type AttemptResult,
  computeBackoffMs,
  createRetryStats,
  decideRetry,
  defaultRetryPolicy,
  parseRetryAfterMs,
  type RetryContext,
  type RetryDecision,
  type RetryDeps,
  type RetryPolicy,
  type RetryStats,
  realRetryDeps,
  retryableStatuses,
  runWithRetry,
} from './retry-policy.js';
export { TailBuffer } from './tail-buffer.js';
