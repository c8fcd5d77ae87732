/*
 * A backup's dry run: the real plan step (planCluster, the same lists and decisions as the plan
 * processor) into a sink that only collects. Nothing is written anywhere: no backup record, no
 * job, no storage object, no PVB, no hook exec. Volume decisions are read back through
 * volumeOutcomes, the code the block view of a real backup uses, so both say the same thing. The
 * plan's wire shape (DryRunPlan) is core's, shared with the API and the CLI.
 */
import {
  type BackupSpec,
  claimNameOfVolume,
  type DryRunHook,
  type DryRunPlan,
  type DryRunVolume,
  estimateBytesPerNode,
  estimateVolumeBytes,
  type Pod,
} from '@stowage/core';
import type { KubeClients } from '@stowage/kube';
import { previewBackupHooks } from '../hooks/backup-hooks.js';
import { TurnClock } from '../in-turns.js';
import type { PlannedHook } from './block-plan.js';
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
  /** As the plan step's (PipelineConfig.maxHookTimeoutMs). */
  maxHookTimeoutMs?: number;
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
      ...(deps.maxHookTimeoutMs !== undefined ? { maxHookTimeoutMs: deps.maxHookTimeoutMs } : {}),
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
  const turn = new TurnClock();
  for (const { plan, pods: podObjects } of planned) {
    await turn.maybePass();
    const nodeOf = new Map(plan.pods.map((p) => [`${p.namespace}/${p.name}`, p.node]));
    const volumes = volumeOutcomes(plan, undefined).map((v): DryRunVolume => {
      const decision = v.outcome === 'error' ? 'error' : v.outcome === 'skipped' ? 'skip' : v.snapshot ? 'snapshot' : 'fs-backup';
      const node = nodeOf.get(v.pod);
      const base: DryRunVolume = {
        pod: v.pod,
        volume: v.volume,
        decision,
        ...(v.reason ? { reason: v.reason } : {}),
        ...(v.claimName ? { claimName: v.claimName } : {}),
        ...(node ? { node } : {}),
        ...(v.snapshot ? { snapshot: { method: v.snapshot.method, className: v.snapshot.className } } : {}),
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
