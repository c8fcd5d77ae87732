/*
 * Hooks and fs-backup volume decisions for one pod, from @stowage/core, mapped to what the
 * block plan stores. The rules live in core; this only translates and keeps the once-keys
 * unique (a hook's index here is its position in the pod's list for the phase).
 */
import {
  type BackupSpec,
  CORE_ERROR_CODES,
  type PersistentVolume,
  type PersistentVolumeClaim,
  type Pod,
  resolvePodHooks as resolveCoreHooks,
  type SnapshotContext,
  selectFsBackupVolumes as selectCoreVolumes,
  type VolumePolicy,
} from '@stowage/core';
import type { HookPhase, PlannedHook, PlannedVolume, PlanSkip } from './block-plan.js';

export interface HookDecision {
  hooks: { pre: PlannedHook[]; post: PlannedHook[] };
  skips: PlanSkip[];
  warnings: string[];
}

/**
 * The pre and post hooks of a pod (an annotation hook of a phase replaces the spec hooks for that
 * phase); an annotation's timeout is held to `maxHookTimeoutMs` (a warning says so).
 */
export function resolvePodHooks(pod: Pod, spec: BackupSpec, maxHookTimeoutMs?: number): HookDecision {
  const out: HookDecision = { hooks: { pre: [], post: [] }, skips: [], warnings: [] };
  const where = `pods/${pod.metadata.namespace}/${pod.metadata.name}`;
  for (const phase of ['pre', 'post'] as const satisfies readonly HookPhase[]) {
    const res = resolveCoreHooks(pod, spec, phase, maxHookTimeoutMs);
    if (res.status === 'skipped') {
      if (phase === 'pre') out.skips.push({ what: `${where} hooks`, reason: res.reason });
      continue;
    }
    for (const w of res.warnings) out.warnings.push(`${where}: ${w.message}`);
    res.hooks.forEach((hook, position) => {
      out.hooks[phase].push({
        container: hook.container,
        command: hook.command,
        onError: hook.onError,
        timeoutMs: hook.timeoutMs,
        source: hook.source,
        hookName: hook.specName ?? '',
        index: position,
        ...(hook.invalid ? { invalid: hook.invalid.message } : {}),
        ...(hook.retries ? { retries: hook.retries } : {}),
        ...(hook.executionPolicy ? { executionPolicy: hook.executionPolicy } : {}),
      });
    });
  }
  return out;
}

export interface VolumeContext {
  spec: BackupSpec;
  policies: readonly VolumePolicy[];
  nodesWithAgent: ReadonlySet<string>;
  pvcs: Map<string, PersistentVolumeClaim>;
  pvs: Map<string, PersistentVolume>;
  /** `<ns>/<claim>` → the pod that took it (one PVB per PVC per backup). Updated here. */
  takenClaims: Map<string, string>;
  /** Snapshots asked for and the cluster's VolumeSnapshotClasses (absent: no snapshots). */
  snapshots?: SnapshotContext | undefined;
}

/** Which of the pod's volumes get a PVB, and why each other one does not. */
export function selectFsBackupVolumes(
  pod: Pod,
  ctx: VolumeContext,
  pvbNameOf: (podUid: string, volume: string) => string,
  snapshotNameOf: (podUid: string, volume: string) => string = pvbNameOf,
): PlannedVolume[] {
  const selection = selectCoreVolumes(pod, {
    spec: ctx.spec,
    volumePolicies: ctx.policies.length > 0 ? ctx.policies : null,
    findPvc: (namespace, name) => ctx.pvcs.get(`${namespace}/${name}`),
    findPv: (name) => ctx.pvs.get(name),
    nodesWithAgent: ctx.nodesWithAgent,
    claimedPvcs: ctx.takenClaims,
    snapshots: ctx.snapshots,
  });
  const thisPod = `${pod.metadata.namespace}/${pod.metadata.name}`;
  // Holders are looked up as they were before this pod (its own claims are recorded after the
  // map below), without copying the backup-wide map per pod: that copy made planning quadratic.
  const volumes = selection.volumes.map((v): PlannedVolume => {
    const pvbName = pvbNameOf(pod.metadata.uid ?? '', v.volume);
    if (v.decision === 'fs-backup') {
      return { name: v.volume, action: 'fs-backup', reason: v.reason, claimName: v.pvcName ?? undefined, pvbName };
    }
    if (v.decision === 'snapshot' && v.snapshot) {
      return {
        name: v.volume,
        action: 'snapshot',
        reason: v.reason,
        claimName: v.pvcName ?? undefined,
        snapshot: { name: snapshotNameOf(pod.metadata.uid ?? '', v.volume), ...v.snapshot },
      };
    }
    // Taken by another pod: this one stands by to take it over (see claim-handover.ts).
    const holder =
      v.code === CORE_ERROR_CODES.CORE_VOLUME_PVC_ALREADY_CLAIMED && v.pvcName !== null
        ? ctx.takenClaims.get(`${pod.metadata.namespace}/${v.pvcName}`)
        : undefined;
    if (holder !== undefined && holder !== thisPod) {
      return {
        name: v.volume,
        action: 'skip',
        reason: `${v.reason}; this pod takes it over should ${holder} not be backed up`,
        claimName: v.pvcName ?? undefined,
        pvbName,
        claimedBy: holder,
      };
    }
    return { name: v.volume, action: v.decision === 'error' ? 'error' : 'skip', reason: v.reason, claimName: v.pvcName ?? undefined };
  });
  for (const claim of selection.newClaims) ctx.takenClaims.set(claim.pvcKey, claim.podKey);
  return volumes;
}
