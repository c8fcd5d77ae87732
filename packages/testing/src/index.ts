export { getFreePort } from '@stowage/platform';
export {
  DEV_OVERLAY,
  type DeployedIdentities,
  deployIdentities,
  type IdentityCluster,
  type RenderedObject,
  renderDevOverlay,
  requestServiceAccountToken,
  STOWAGE_NAMESPACE,
} from './deployed-identities.js';
export { listeningPort, listeningPorts } from './listening-ports.js';
export { type RedisCluster, type RedisClusterNode, type RedisClusterOptions, startRedisCluster } from './redis-cluster.js';
export { type RedisServer, type RedisServerOptions, startRedisServer, uniquePrefix, useTestRedis } from './redis-server.js';
export {
  type S3Fault,
  type S3FaultPlan,
  type S3FaultProxy,
  type S3FaultStats,
  type S3Operation,
  type S3RequestInfo,
  startS3FaultProxy,
} from './s3-fault-proxy.js';
export {
  S3_SERVER_ACCESS_KEY_ID,
  S3_SERVER_SECRET_ACCESS_KEY,
  type S3Server,
  type S3Target,
  s3TargetEnv,
  startS3Server,
  useTestS3,
} from './s3-server.js';
export { REPO_ROOT, spawnService } from './service-process.js';
export { csiStorageClass, SIM_CSI_DRIVER, type SimClaimOptions, simClaim, simSnapshotClass } from './snapshot-cluster.js';
export { type DescribedEntry, describeTree, writeVolumeTree } from './volume-tree.js';
export {
  type ReadyServiceOptions,
  type ServiceProcess,
  spawnReadyService,
  spawnWorker,
  type WorkerProcess,
} from './worker-process.js';
