/*
 * A backup's dry run: the real plan step (planCluster, the same lists and decisions as the plan
 * processor) into a sink that only collects. Nothing is written anywhere: no backup record, no
 * job, no storage object, no PVB, no hook exec. Volume decisions are read back through
 * volumeOutcomes, the code the block view of a real backup uses, so both say the same thing.
 */
import {
  type BackupSpec,
  claimNameOfVolume,
  estimateBytesPerNode,
  estimateVolumeBytes,
  type NodeByteEstimate,
  type Pod,
  type VolumeSizeBasis,
} from '@stowage/core';
import type { KubeClients } from '@stowage/kube';
import { type BackupHookPreview, previewBackupHooks } from '../hooks/backup-hooks.js';
import type { PlannedHook, PlanSkip } from './block-plan.js';
import { type ClusterPlanRead, type PlannedBlock, planCluster, resolveResourcePolicies } from './cluster-plan.js';
import { volumeOutcomes } from './volume-outcomes.js';

export interface DryRunDeps {
  kube: KubeClients;
  /** Nodes with a live node agent (the registry in Redis, read only). */
  nodesWithAgent: () => Promise<ReadonlySet<string>>;
  /** Stowage's namespace (resource policy ConfigMaps). */
  namespace: string;
  listPageSize: number;
  /** As the plan step's (PipelineConfig.namespaceListsMax): the dry run reads what a real plan would. */
  namespaceListsMax: number;
}

export interface DryRunHook {
  container: string;
  command: string[];
  onError: 'Fail' | 'Continue' | 'FailBlock';
  timeoutMs: number;
  /** `annotation` (the pod's hook annotations) or `spec` (spec.hooks.resources). */
  source: string;
  /** The spec hook's name; absent for annotations. */
  hookName?: string;
  /** Why the hook cannot run (a real run records it as a failed attempt). */
  invalid?: string;
}

export interface DryRunVolume {
  /** `namespace/name` of the pod. */
  pod: string;
  volume: string;
  /** `fs-backup`: gets a PodVolumeBackup; `skip`: does not (reason); `error`: cannot be decided (reason; an error of the run). */
  decision: 'fs-backup' | 'skip' | 'error';
  reason?: string;
  claimName?: string;
  node?: string;
  /** fs-backup volumes only: an estimate (see estimateBasis), not a measurement. */
  estimatedBytes?: number | null;
  estimateBasis?: VolumeSizeBasis | 'unknown';
}

export interface DryRunBlock {
  id: string;
  items: Array<{ key: string; apiVersion: string; kind: string; namespace?: string; name: string }>;
  pods: Array<{ namespace: string; name: string; node?: string; hooks: { pre: DryRunHook[]; post: DryRunHook[] } }>;
  volumes: DryRunVolume[];
  /** What the plan skips in this block (hooks, volumes), with why. */
  skips: PlanSkip[];
}

export interface DryRunPlan {
  name: string;
  dryRun: true;
  /** Set when a real run would end FailedValidation before listing anything (e.g. a bad resource policy ConfigMap). */
  failedValidation?: string;
  summary: {
    blocks: number;
    items: number;
    pods: number;
    preHooks: number;
    postHooks: number;
    fsBackupVolumes: number;
    skippedVolumes: number;
    volumeErrors: number;
  };
  estimate: {
    /** Always true: the numbers are provisioned sizes, not measured. */
    isEstimate: true;
    basis: string;
    totalBytes: number;
    perNode: NodeByteEstimate[];
  };
  /** spec.hooks.backup: per phase, each hook with the pods it would run in now (pre: before any block; post: after all). */
  backupHooks: { pre: BackupHookPreview[]; post: BackupHookPreview[] };
  blocks: DryRunBlock[];
  /** What a real run would record as warnings. */
  warnings: string[];
  /** What a real run would record as errors (volumes that cannot be decided). */
  errors: string[];
  /** Informational lines a real run would log. */
  notes: string[];
}

export const ESTIMATE_BASIS =
  "per fs-backup volume, the size it was provisioned with: the PVC's requested storage, else its capacity, else its PV's capacity, else an emptyDir's sizeLimit. An upper bound of what a first backup copies; incremental runs reuse unchanged files.";

/** Plans `spec` (already validated by core) as a real backup named `name` would, writing nothing. */
export async function planDryRun(deps: DryRunDeps, request: { name: string; spec: BackupSpec }): Promise<DryRunPlan> {
  const out: DryRunPlan = {
    name: request.name,
    dryRun: true,
    summary: { blocks: 0, items: 0, pods: 0, preHooks: 0, postHooks: 0, fsBackupVolumes: 0, skippedVolumes: 0, volumeErrors: 0 },
    estimate: { isEstimate: true, basis: ESTIMATE_BASIS, totalBytes: 0, perNode: [] },
    backupHooks: { pre: [], post: [] },
    blocks: [],
    warnings: [],
    errors: [],
    notes: [],
  };
  const loaded = await resolveResourcePolicies(deps.kube, deps.namespace, request.spec);
  if (!loaded.ok) return { ...out, failedValidation: loaded.why };

  // Backup-level hooks: a hook that would find no pod fails in a real run (an error, or the
  // backup's failure with onError: Fail); the plan says so up front.
  out.backupHooks = await previewBackupHooks(deps, loaded.spec);
  for (const phase of ['pre', 'post'] as const) {
    for (const hook of out.backupHooks[phase]) {
      if (hook.failure === undefined) continue;
      const consequence =
        phase === 'pre' && hook.onError === 'Fail' ? 'the backup would fail before any block runs' : 'it would be recorded as failed';
      out.errors.push(`backup ${phase} hook ${hook.name}: ${hook.failure}; ${consequence}`);
    }
  }

  // Only the pods' manifests are kept (for their volumes' sizes); a large cluster's others are dropped at once.
  const planned: Array<{ plan: PlannedBlock['plan']; pods: Map<string, Pod> }> = [];
  const seenProblems = new Set<string>();
  const read: ClusterPlanRead = await planCluster(
    {
      kube: deps.kube,
      backupName: request.name,
      spec: loaded.spec,
      policies: loaded.policies,
      nodesWithAgent: await deps.nodesWithAgent(),
      listPageSize: deps.listPageSize,
      namespaceListsMax: deps.namespaceListsMax,
    },
    {
      blocks: async (blocks) => {
        for (const { plan, manifests } of blocks) {
          const pods = new Map<string, Pod>();
          plan.items.forEach((item, i) => {
            if (item.groupResource === 'pods') pods.set(`${item.namespace}/${item.name}`, manifests[i] as Pod);
          });
          planned.push({ plan, pods });
        }
      },
      problem: async (problem) => {
        if (seenProblems.has(problem.onceKey)) return;
        seenProblems.add(problem.onceKey);
        out.warnings.push(problem.msg);
      },
      note: async (msg) => {
        out.notes.push(msg);
      },
    },
  );

  const sized: Array<{ node: string; estimate: ReturnType<typeof estimateVolumeBytes> }> = [];
  for (const { plan, pods: podObjects } of planned) {
    const nodeOf = new Map(plan.pods.map((p) => [`${p.namespace}/${p.name}`, p.node]));
    const volumes = volumeOutcomes(plan, undefined).map((v): DryRunVolume => {
      const decision = v.outcome === 'error' ? 'error' : v.outcome === 'skipped' ? 'skip' : 'fs-backup';
      const node = nodeOf.get(v.pod);
      const base: DryRunVolume = {
        pod: v.pod,
        volume: v.volume,
        decision,
        ...(v.reason ? { reason: v.reason } : {}),
        ...(v.claimName ? { claimName: v.claimName } : {}),
        ...(node ? { node } : {}),
      };
      if (decision !== 'fs-backup') return base;
      const pod = podObjects.get(v.pod);
      const podVolume = pod?.spec.volumes?.find((pv) => pv.name === v.volume);
      if (!pod || !podVolume) return { ...base, estimatedBytes: null, estimateBasis: 'unknown' };
      const claim = claimNameOfVolume(pod, podVolume);
      const pvc = claim ? read.pvcs.get(`${pod.metadata.namespace}/${claim}`) : undefined;
      const estimate = estimateVolumeBytes(podVolume, pvc, pvc?.spec.volumeName ? read.pvs.get(pvc.spec.volumeName) : undefined);
      if (node) sized.push({ node, estimate });
      return { ...base, estimatedBytes: estimate.bytes, estimateBasis: estimate.basis };
    });
    out.blocks.push({
      id: plan.id,
      items: plan.items.map((i) => ({
        key: i.key,
        apiVersion: i.apiVersion,
        kind: i.kind,
        ...(i.namespace ? { namespace: i.namespace } : {}),
        name: i.name,
      })),
      pods: plan.pods.map((p) => ({
        namespace: p.namespace,
        name: p.name,
        ...(p.node ? { node: p.node } : {}),
        hooks: { pre: p.hooks.pre.map(toDryRunHook), post: p.hooks.post.map(toDryRunHook) },
      })),
      volumes,
      skips: plan.skips,
    });
    out.warnings.push(...(plan.warnings ?? []));
    out.errors.push(...(plan.errors ?? []).map((e) => `${e.what} not backed up: ${e.reason}`));
    const s = out.summary;
    s.blocks += 1;
    s.items += plan.items.length;
    s.pods += plan.pods.length;
    for (const p of plan.pods) {
      s.preHooks += p.hooks.pre.length;
      s.postHooks += p.hooks.post.length;
    }
    for (const v of volumes) {
      if (v.decision === 'fs-backup') s.fsBackupVolumes += 1;
      else if (v.decision === 'skip') s.skippedVolumes += 1;
      else s.volumeErrors += 1;
    }
  }
  out.estimate.perNode = estimateBytesPerNode(sized);
  out.estimate.totalBytes = out.estimate.perNode.reduce((n, e) => n + e.estimatedBytes, 0);
  return out;
}

function toDryRunHook(hook: PlannedHook): DryRunHook {
  return {
    container: hook.container,
    command: hook.command,
    onError: hook.onError,
    timeoutMs: hook.timeoutMs,
    source: hook.source,
    ...(hook.hookName ? { hookName: hook.hookName } : {}),
    ...(hook.invalid ? { invalid: hook.invalid } : {}),
  };
}
