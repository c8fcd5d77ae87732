export { type KubeStatus, SimError, SimErrorCode, type StatusCause } from './api-status.js';
export { type GenerateClusterOptions, generateCluster, type HookSpec, pvbCrdPath, pvrCrdPath } from './cluster-generator.js';
export { ClusterState } from './cluster-state.js';
export type { ContainerExecBehaviour, ExecOutcome, ExecRecord, ExecRule, PodExecBehaviour } from './exec-sim.js';
export { execAnnotation } from './exec-sim.js';
export type { FaultConfig, FaultStatus, RequestCounts } from './faults.js';
export { type Fixture, type MaterializeMode, parseManifests, resolveFixture } from './fixture-loader.js';
export type { KubeObject, ObjectMeta } from './kube-object.js';
export { kubeconfigYaml, simContextName, writeKubeconfig } from './kubeconfig.js';
export { demoFixturePath, type Simulator, type SimulatorOptions, startSimulator } from './simulator.js';
export {
  DEFAULT_SNAPSHOT_CLASS_ANNOTATION,
  quantityBytes,
  SIM_SNAPSHOT_PARAMETERS,
  SNAPSHOT_API_GROUP,
  SNAPSHOT_API_VERSION,
  snapshotCrdsPath,
} from './snapshot-controller.js';
export { csiBlockPath, csiVolumePath, emptyDirPath, filesAnnotation, type PodVolumeDir, type VolumeFileSpec } from './volume-data.js';
