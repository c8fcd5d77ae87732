/*
 * Hooks and fs-backup volume decisions for one pod (DESIGN §3). STAND-IN: @stowage/core is to
 * provide `resolvePodHooks` and `selectFsBackupVolumes`; until it does, this adapter decides with
 * core's building blocks (selection, label selectors, durations, volume policies). It is the one
 * place to switch over.
 */
import {
  type BackupSpec,
  claimNameOfVolume,
  DEFAULT_HOOK_TIMEOUT_MS,
  findMatchingVolumePolicy,
  isNamespaceIncluded,
  isPodRunning,
  matchesLabelSelector,
  type PersistentVolume,
  type PersistentVolumeClaim,
  type Pod,
  type PodVolume,
  parseDuration,
  parseQuantity,
  resourceEntryMatches,
  type VolumeDescription,
  type VolumePolicy,
} from '@stowage/core';
import type { HookPhase, PlannedHook, PlannedVolume, PlanSkip } from './block-plan.js';

const ANNOTATION_PREFIX: Record<HookPhase, string> = { pre: 'pre.hook.backup.velero.io/', post: 'post.hook.backup.velero.io/' };
const LEGACY_PREFIX = 'hook.backup.velero.io/';
export const VOLUMES_TO_BACKUP_ANNOTATION = 'backup.velero.io/backup-volumes';
export const VOLUMES_TO_EXCLUDE_ANNOTATION = 'backup.velero.io/backup-volumes-excludes';

export interface HookDecision {
  hooks: { pre: PlannedHook[]; post: PlannedHook[] };
  skips: PlanSkip[];
}

function parseCommand(raw: string): string[] {
  const trimmed = raw.trim();
  if (trimmed.startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(trimmed);
      if (Array.isArray(parsed) && parsed.every((a) => typeof a === 'string')) return parsed;
    } catch {
      // not JSON: one argument, as Velero does
    }
  }
  return [raw];
}

function annotationHook(pod: Pod, phase: HookPhase, skips: PlanSkip[], where: string): PlannedHook | undefined {
  const annotations = pod.metadata.annotations ?? {};
  let prefix = ANNOTATION_PREFIX[phase];
  if (!annotations[`${prefix}command`] && phase === 'pre' && annotations[`${LEGACY_PREFIX}command`]) prefix = LEGACY_PREFIX;
  const command = annotations[`${prefix}command`];
  if (!command) return undefined;
  const firstContainer = pod.spec.containers[0]?.name ?? '';
  const onErrorRaw = annotations[`${prefix}on-error`];
  let timeoutMs = DEFAULT_HOOK_TIMEOUT_MS;
  const timeoutRaw = annotations[`${prefix}timeout`];
  if (timeoutRaw) {
    const parsed = parseDuration(timeoutRaw);
    if (parsed.ok && parsed.ms > 0) timeoutMs = parsed.ms;
    else skips.push({ what: `${where} ${phase} hook timeout`, reason: `unparsable timeout ${JSON.stringify(timeoutRaw)}; using 30s` });
  }
  return {
    container: annotations[`${prefix}container`] || firstContainer,
    command: parseCommand(command),
    // Velero: only a literal `Fail` propagates; anything else behaves like Continue.
    onError: onErrorRaw === 'Fail' ? 'Fail' : 'Continue',
    timeoutMs,
    source: 'annotation',
    hookName: '',
    index: 0,
  };
}

/** The pre and post hooks of a pod: an annotation hook of a phase replaces the spec hooks for that phase. */
export function resolvePodHooks(pod: Pod, spec: BackupSpec): HookDecision {
  const skips: PlanSkip[] = [];
  const where = `pods/${pod.metadata.namespace}/${pod.metadata.name}`;
  const phase = pod.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') {
    const hasAny =
      Boolean(
        pod.metadata.annotations?.[`${ANNOTATION_PREFIX.pre}command`] || pod.metadata.annotations?.[`${ANNOTATION_PREFIX.post}command`],
      ) || spec.hooks.resources.length > 0;
    if (hasAny) skips.push({ what: `${where} hooks`, reason: `pod is in phase ${phase}` });
    return { hooks: { pre: [], post: [] }, skips };
  }
  const firstContainer = pod.spec.containers[0]?.name ?? '';
  const result: HookDecision['hooks'] = { pre: [], post: [] };
  for (const hookPhase of ['pre', 'post'] as const) {
    const fromAnnotation = annotationHook(pod, hookPhase, skips, where);
    if (fromAnnotation) {
      result[hookPhase].push(fromAnnotation);
      continue;
    }
    for (const resource of spec.hooks.resources) {
      const namespace = pod.metadata.namespace ?? '';
      if (
        !isNamespaceIncluded(namespace, {
          includedNamespaces: resource.includedNamespaces,
          excludedNamespaces: resource.excludedNamespaces,
        })
      )
        continue;
      const podResource = { group: '', resource: 'pods' };
      if (
        resource.includedResources.length > 0 &&
        !resource.includedResources.some((e) => e === '*' || resourceEntryMatches(e, podResource))
      )
        continue;
      if (resource.excludedResources.some((e) => resourceEntryMatches(e, podResource))) continue;
      if (resource.labelSelector && !matchesLabelSelector(resource.labelSelector, pod.metadata.labels)) continue;
      for (const { exec } of resource[hookPhase]) {
        result[hookPhase].push({
          container: exec.container ?? firstContainer,
          command: exec.command,
          onError: exec.onError,
          timeoutMs: exec.timeoutMs > 0 ? exec.timeoutMs : DEFAULT_HOOK_TIMEOUT_MS,
          source: 'spec',
          hookName: resource.name,
          index: result[hookPhase].length,
        });
      }
    }
  }
  return { hooks: result, skips };
}

const NEVER_FS_BACKUP: Array<[keyof PodVolume, string]> = [
  ['hostPath', 'hostPath volumes are never backed up'],
  ['secret', 'secret volumes are never backed up'],
  ['configMap', 'configMap volumes are never backed up'],
  ['projected', 'projected volumes are never backed up'],
  ['downwardAPI', 'downwardAPI volumes are never backed up'],
];

export interface VolumeContext {
  spec: BackupSpec;
  policies: readonly VolumePolicy[];
  nodesWithAgent: ReadonlySet<string>;
  pvcs: Map<string, PersistentVolumeClaim>;
  pvs: Map<string, PersistentVolume>;
  /** `<ns>/<claim>` → the pod that took it (one PVB per PVC per backup). Updated here. */
  takenClaims: Map<string, string>;
}

function sourceType(source: Record<string, unknown>): string | undefined {
  const known = [
    'nfs',
    'csi',
    'hostPath',
    'local',
    'emptyDir',
    'awsElasticBlockStore',
    'gcePersistentDisk',
    'azureDisk',
    'azureFile',
    'cephfs',
    'rbd',
    'iscsi',
    'fc',
    'glusterfs',
    'portworxVolume',
    'vsphereVolume',
    'cinder',
    'flexVolume',
    'ephemeral',
  ];
  return known.find((k) => source[k] !== undefined && source[k] !== null);
}

function csvAnnotation(pod: Pod, key: string): Set<string> {
  const raw = pod.metadata.annotations?.[key] ?? '';
  return new Set(
    raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
}

/** Which of the pod's volumes get a PVB, and why each other one does not. */
export function selectFsBackupVolumes(
  pod: Pod,
  backupName: string,
  ctx: VolumeContext,
  pvbNameOf: (podUid: string, volume: string) => string,
): PlannedVolume[] {
  const namespace = pod.metadata.namespace ?? '';
  const pk = `${namespace}/${pod.metadata.name}`;
  const optIn = csvAnnotation(pod, VOLUMES_TO_BACKUP_ANNOTATION);
  const optOut = csvAnnotation(pod, VOLUMES_TO_EXCLUDE_ANNOTATION);
  const mounted = new Set<string>();
  for (const c of [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]) for (const m of c.volumeMounts ?? []) mounted.add(m.name);
  const running = isPodRunning(pod);
  const node = pod.spec.nodeName;
  const out: PlannedVolume[] = [];
  for (const volume of pod.spec.volumes ?? []) {
    const claimName = claimNameOfVolume(pod, volume);
    const skip = (reason: string) => out.push({ name: volume.name, action: 'skip', reason, claimName });
    const never = NEVER_FS_BACKUP.find(([key]) => volume[key] !== undefined && volume[key] !== null);
    if (never) {
      skip(never[1]);
      continue;
    }
    if (volume.name.startsWith('default-token')) {
      skip('service account token volumes are never backed up');
      continue;
    }
    const pvc = claimName ? ctx.pvcs.get(`${namespace}/${claimName}`) : undefined;
    const pv = pvc?.spec.volumeName ? ctx.pvs.get(pvc.spec.volumeName) : undefined;
    if (pv?.spec.hostPath) {
      skip(`PVC ${claimName} is bound to hostPath PV ${pv.metadata.name}`);
      continue;
    }
    const describe: VolumeDescription = claimName
      ? {
          pvcBacked: true,
          ...(pv?.spec.capacity?.storage ? { capacityBytes: quantityBytes(pv.spec.capacity.storage) } : {}),
          ...((pv?.spec.storageClassName ?? pvc?.spec.storageClassName)
            ? { storageClass: (pv?.spec.storageClassName ?? pvc?.spec.storageClassName) as string }
            : {}),
          ...(pv?.spec.nfs ? { nfs: { server: pv.spec.nfs.server, path: pv.spec.nfs.path } } : {}),
          ...(pv?.spec.csi ? { csi: pv.spec.csi } : {}),
          ...(pv ? { volumeType: sourceType(pv.spec as Record<string, unknown>) } : {}),
          ...(pvc?.metadata.labels ? { pvcLabels: pvc.metadata.labels } : {}),
          ...(pvc?.status?.phase ? { pvcPhase: pvc.status.phase } : {}),
        }
      : {
          pvcBacked: false,
          ...(sourceType(volume) ? { volumeType: sourceType(volume) } : {}),
          ...(volume.nfs ? { nfs: { server: volume.nfs.server, path: volume.nfs.path } } : {}),
          ...(volume.csi ? { csi: volume.csi } : {}),
        };
    const matched = findMatchingVolumePolicy(ctx.policies, describe);
    let selectedBy: string;
    if (matched) {
      if (matched.policy.action.type !== 'fs-backup') {
        skip(
          `volume policy #${matched.index} says ${matched.policy.action.type}${matched.policy.action.type === 'snapshot' ? ' (snapshots are not taken by Stowage)' : ''}`,
        );
        continue;
      }
      selectedBy = `volume policy #${matched.index}`;
    } else if (ctx.spec.defaultVolumesToFsBackup) {
      if (optOut.has(volume.name)) {
        skip(`opted out by ${VOLUMES_TO_EXCLUDE_ANNOTATION}`);
        continue;
      }
      selectedBy = 'defaultVolumesToFsBackup';
    } else {
      if (!optIn.has(volume.name)) {
        skip(`not opted in by ${VOLUMES_TO_BACKUP_ANNOTATION}`);
        continue;
      }
      selectedBy = VOLUMES_TO_BACKUP_ANNOTATION;
    }
    if (!running) {
      skip(`pod is not running (phase ${pod.status?.phase ?? 'unknown'})`);
      continue;
    }
    if (!node || !ctx.nodesWithAgent.has(node)) {
      skip(`no node agent on node ${node ?? '(unscheduled)'}`);
      continue;
    }
    if (!mounted.has(volume.name)) {
      skip('volume is not mounted by any container');
      continue;
    }
    if (claimName) {
      const claimKey = `${namespace}/${claimName}`;
      const owner = ctx.takenClaims.get(claimKey);
      if (owner !== undefined && owner !== pk) {
        skip(`PVC ${claimName} is already backed up through pod ${owner}`);
        continue;
      }
      ctx.takenClaims.set(claimKey, pk);
    }
    out.push({
      name: volume.name,
      action: 'fs-backup',
      reason: selectedBy,
      claimName,
      pvbName: pvbNameOf(pod.metadata.uid ?? '', volume.name),
    });
  }
  void backupName;
  return out;
}

function quantityBytes(text: string): number | undefined {
  const parsed = parseQuantity(text);
  return parsed.ok ? parsed.value : undefined;
}
