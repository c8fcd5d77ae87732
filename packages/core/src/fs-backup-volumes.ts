/*
 * Which pod volumes get a file-system backup (a PVB), per DESIGN §3 / Velero §6, in this order:
 * 1. never: hostPath, secret, configMap, projected, downwardAPI, `default-token*`, a PVC bound to
 *    a hostPath PV, and PVC-backed volumes when PVCs are excluded by the resource filters;
 * 2. the first matching volume policy decides (fs-backup / skip / snapshot);
 * 3. the annotations, read per `defaultVolumesToFsBackup`: true → every volume except those in
 *    `backup.velero.io/backup-volumes-excludes`; false → only those in
 *    `backup.velero.io/backup-volumes`. Only the annotation that matches the mode is read, so a
 *    volume listed in both follows the mode (Velero does exactly this);
 * 4. run-time skips for what would be backed up: pod not Running, no node agent on the pod's
 *    node, volume not mounted by any container, block-mode volume, PVC already taken by another
 *    pod of the backup (one PVB per PVC).
 * `snapshot` is reported as a decision, but Stowage takes no snapshots: no PVB is created.
 * `error`: with volume policies, a PVC that has no PV (Pending, Lost) and that no policy matched
 * (a `pvcPhase` policy may skip it) cannot be decided; Velero fails the volume, and so do we: it
 * is recorded as an error, never skipped in silence.
 */
import type { BackupSpec } from './backup-spec.schema.js';
import { CORE_ERROR_CODES } from './errors.js';
import {
  claimNameOfVolume,
  isPodRunning,
  type PersistentVolume,
  type PersistentVolumeClaim,
  type Pod,
  type PodVolume,
} from './kube-types.js';
import { parseQuantity } from './quantity.js';
import { isResourceIncluded, type ScopedResourceFilter } from './resource-selection.js';
import { findMatchingVolumePolicy, VOLUME_TYPES, type VolumeDescription, type VolumePolicy } from './volume-policy.js';

export const BACKUP_VOLUMES_ANNOTATION = 'backup.velero.io/backup-volumes';
export const BACKUP_VOLUMES_EXCLUDES_ANNOTATION = 'backup.velero.io/backup-volumes-excludes';

export type VolumeDecisionKind = 'fs-backup' | 'skip' | 'snapshot' | 'error';

type C = typeof CORE_ERROR_CODES;
export type VolumeDecisionCode =
  | C['CORE_VOLUME_TYPE_NEVER_BACKED_UP']
  | C['CORE_VOLUME_DEFAULT_TOKEN']
  | C['CORE_VOLUME_PVC_EXCLUDED']
  | C['CORE_VOLUME_PVC_NOT_FOUND']
  | C['CORE_VOLUME_HOSTPATH_PV']
  | C['CORE_VOLUME_POLICY_FS_BACKUP']
  | C['CORE_VOLUME_POLICY_SKIP']
  | C['CORE_VOLUME_POLICY_SNAPSHOT']
  | C['CORE_VOLUME_OPTED_IN']
  | C['CORE_VOLUME_NOT_OPTED_IN']
  | C['CORE_VOLUME_DEFAULT_FS_BACKUP']
  | C['CORE_VOLUME_OPTED_OUT']
  | C['CORE_VOLUME_POD_NOT_RUNNING']
  | C['CORE_VOLUME_NO_NODE_AGENT']
  | C['CORE_VOLUME_PVC_ALREADY_CLAIMED']
  | C['CORE_VOLUME_NOT_MOUNTED']
  | C['CORE_VOLUME_BLOCK_MODE']
  | C['CORE_VOLUME_PVC_WITHOUT_PV'];

export interface VolumeDecision {
  /** Pod volume name. */
  volume: string;
  decision: VolumeDecisionKind;
  code: VolumeDecisionCode;
  /** A sentence for the backup log and results. */
  reason: string;
  /** The PVC behind the volume, when PVC-backed. */
  pvcName: string | null;
}

export interface FsBackupContext {
  spec: Pick<BackupSpec, 'defaultVolumesToFsBackup' | 'includedResources' | 'excludedResources'> & ScopedResourceFilter;
  /** The backup's volume policies, already loaded (inline, or from the referenced ConfigMap); null = none. */
  volumePolicies: readonly VolumePolicy[] | null;
  findPvc: (namespace: string, name: string) => PersistentVolumeClaim | undefined;
  findPv: (name: string) => PersistentVolume | undefined;
  /** Nodes that run a node agent. */
  nodesWithAgent: ReadonlySet<string>;
  /** PVCs that already have a PVB in this backup: `<ns>/<pvc>` → `<ns>/<pod>` that took it. */
  claimedPvcs: ReadonlyMap<string, string>;
}

export interface FsBackupSelection {
  volumes: VolumeDecision[];
  /** PVCs this pod takes (add them to `claimedPvcs` before the next pod). */
  newClaims: { pvcKey: string; podKey: string }[];
}

const NEVER_TYPES = ['hostPath', 'secret', 'configMap', 'projected', 'downwardAPI'] as const;

function sourceTypeOf(source: Record<string, unknown>): string | undefined {
  return (VOLUME_TYPES as readonly string[]).find((type) => source[type] !== undefined && source[type] !== null);
}

function splitList(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
}

function describeVolume(volume: PodVolume, pvc: PersistentVolumeClaim | undefined, pv: PersistentVolume | undefined): VolumeDescription {
  // A generic ephemeral volume is seen by the conditions as the pod volume it is (type
  // `ephemeral`, capacity 0, no PVC labels or phase), as Velero does.
  if (!pvc || volume.ephemeral) {
    const type = sourceTypeOf(volume);
    return {
      pvcBacked: false,
      ...(type ? { volumeType: type } : {}),
      ...(volume.nfs ? { nfs: { server: volume.nfs.server, path: volume.nfs.path } } : {}),
      ...(volume.csi ? { csi: volume.csi } : {}),
    };
  }
  const description: VolumeDescription = { pvcBacked: true };
  if (pvc.metadata.labels) description.pvcLabels = pvc.metadata.labels;
  if (pvc.status?.phase) description.pvcPhase = pvc.status.phase;
  if (pv) {
    const capacity = pv.spec.capacity?.storage;
    if (capacity !== undefined) {
      const parsed = parseQuantity(capacity);
      if (parsed.ok) description.capacityBytes = parsed.value;
    }
    const storageClass = pv.spec.storageClassName ?? pvc.spec.storageClassName ?? undefined;
    if (storageClass) description.storageClass = storageClass;
    if (pv.spec.nfs) description.nfs = { server: pv.spec.nfs.server, path: pv.spec.nfs.path };
    if (pv.spec.csi) description.csi = pv.spec.csi;
    const type = sourceTypeOf(pv.spec);
    if (type) description.volumeType = type;
  } else if (pvc.spec.storageClassName) {
    description.storageClass = pvc.spec.storageClassName;
  }
  return description;
}

/** Decides, for every volume of `pod`, whether it gets a PVB, and why. */
export function selectFsBackupVolumes(pod: Pod, ctx: FsBackupContext): FsBackupSelection {
  const namespace = pod.metadata.namespace ?? '';
  const podKey = `${namespace}/${pod.metadata.name}`;
  const annotations = pod.metadata.annotations ?? {};
  const optIn = splitList(annotations[BACKUP_VOLUMES_ANNOTATION]);
  const optOut = splitList(annotations[BACKUP_VOLUMES_EXCLUDES_ANNOTATION]);
  const pvcsExcluded = !isResourceIncluded({ group: '', resource: 'persistentvolumeclaims', namespaced: true }, ctx.spec);
  const mounted = new Set<string>();
  const blockDevices = new Set<string>();
  for (const container of [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]) {
    for (const mount of container.volumeMounts ?? []) mounted.add(mount.name);
    for (const device of container.volumeDevices ?? []) blockDevices.add(device.name);
  }
  const running = isPodRunning(pod);
  const nodeName = pod.spec.nodeName;
  // This pod's claims over the backup's: no copy of the backup-wide map per pod (planning was quadratic).
  const claimedNow = new Map<string, string>();
  // a claim recorded for this same pod by an earlier run (jobs run at least once) is its own
  const claimedHere = new Set<string>();
  const newClaims: FsBackupSelection['newClaims'] = [];

  const volumes = (pod.spec.volumes ?? []).map((volume): VolumeDecision => {
    const claimName = claimNameOfVolume(pod, volume) ?? null;
    const decide = (decision: VolumeDecisionKind, code: VolumeDecisionCode, reason: string): VolumeDecision => ({
      volume: volume.name,
      decision,
      code,
      reason,
      pvcName: claimName,
    });

    // 1. never
    const neverType = NEVER_TYPES.find((type) => volume[type] !== undefined && volume[type] !== null);
    if (neverType) return decide('skip', CORE_ERROR_CODES.CORE_VOLUME_TYPE_NEVER_BACKED_UP, `${neverType} volumes are never backed up`);
    if (volume.name.startsWith('default-token')) {
      return decide(
        'skip',
        CORE_ERROR_CODES.CORE_VOLUME_DEFAULT_TOKEN,
        'service account token volumes (default-token*) are never backed up',
      );
    }
    let pvc: PersistentVolumeClaim | undefined;
    let pv: PersistentVolume | undefined;
    if (claimName !== null) {
      if (pvcsExcluded) {
        return decide(
          'skip',
          CORE_ERROR_CODES.CORE_VOLUME_PVC_EXCLUDED,
          'persistentvolumeclaims are excluded from this backup by its resource filters',
        );
      }
      pvc = ctx.findPvc(namespace, claimName);
      if (!pvc) return decide('skip', CORE_ERROR_CODES.CORE_VOLUME_PVC_NOT_FOUND, `PVC ${namespace}/${claimName} was not found`);
      pv = pvc.spec.volumeName ? ctx.findPv(pvc.spec.volumeName) : undefined;
      if (pv?.spec.hostPath) {
        return decide(
          'skip',
          CORE_ERROR_CODES.CORE_VOLUME_HOSTPATH_PV,
          `PVC ${claimName} is bound to hostPath PV ${pv.metadata.name}; hostPath data is never backed up`,
        );
      }
    }

    // 2. volume policy, 3. annotations
    let candidate: VolumeDecision | undefined;
    const match = ctx.volumePolicies ? findMatchingVolumePolicy(ctx.volumePolicies, describeVolume(volume, pvc, pv)) : undefined;
    if (match) {
      const which = `volume policy #${match.index + 1}`;
      switch (match.policy.action.type) {
        case 'skip':
          return decide('skip', CORE_ERROR_CODES.CORE_VOLUME_POLICY_SKIP, `${which} says skip`);
        case 'snapshot':
          return decide(
            'snapshot',
            CORE_ERROR_CODES.CORE_VOLUME_POLICY_SNAPSHOT,
            `${which} says snapshot; Stowage takes no snapshots, so no PVB is created`,
          );
        case 'fs-backup':
          candidate = decide('fs-backup', CORE_ERROR_CODES.CORE_VOLUME_POLICY_FS_BACKUP, `${which} says fs-backup`);
          break;
        default: {
          const unknownAction: never = match.policy.action.type;
          throw new Error(`unknown volume policy action ${String(unknownAction)}`);
        }
      }
    } else if (ctx.volumePolicies && pvc && !volume.ephemeral && !pv) {
      const why = pvc.spec.volumeName
        ? `its PV ${pvc.spec.volumeName} was not found`
        : `it has no PV (phase ${pvc.status?.phase ?? 'unknown'})`;
      return decide(
        'error',
        CORE_ERROR_CODES.CORE_VOLUME_PVC_WITHOUT_PV,
        `PVC ${namespace}/${claimName} cannot be backed up: ${why}, and no volume policy matched it (a policy with pvcPhase can skip it)`,
      );
    } else if (ctx.spec.defaultVolumesToFsBackup) {
      if (optOut.includes(volume.name)) {
        const both = optIn.includes(volume.name)
          ? `; its listing in ${BACKUP_VOLUMES_ANNOTATION} is ignored because with defaultVolumesToFsBackup true only the excludes annotation is read (as Velero)`
          : '';
        return decide('skip', CORE_ERROR_CODES.CORE_VOLUME_OPTED_OUT, `listed in ${BACKUP_VOLUMES_EXCLUDES_ANNOTATION}${both}`);
      }
      candidate = decide(
        'fs-backup',
        CORE_ERROR_CODES.CORE_VOLUME_DEFAULT_FS_BACKUP,
        'defaultVolumesToFsBackup is true and the volume is not excluded',
      );
    } else {
      if (!optIn.includes(volume.name)) {
        return decide(
          'skip',
          CORE_ERROR_CODES.CORE_VOLUME_NOT_OPTED_IN,
          `not listed in ${BACKUP_VOLUMES_ANNOTATION} and defaultVolumesToFsBackup is false (add it to the annotation to back it up)`,
        );
      }
      const both = optOut.includes(volume.name)
        ? `; its listing in ${BACKUP_VOLUMES_EXCLUDES_ANNOTATION} is ignored because with defaultVolumesToFsBackup false only the opt-in annotation is read (as Velero)`
        : '';
      candidate = decide('fs-backup', CORE_ERROR_CODES.CORE_VOLUME_OPTED_IN, `listed in ${BACKUP_VOLUMES_ANNOTATION}${both}`);
    }

    // 4. run-time skips
    const selectedBy = candidate.reason;
    if (!running) {
      return decide(
        'skip',
        CORE_ERROR_CODES.CORE_VOLUME_POD_NOT_RUNNING,
        `pod is not running (phase ${pod.status?.phase ?? 'unknown'}); selected because ${selectedBy}`,
      );
    }
    if (!nodeName || !ctx.nodesWithAgent.has(nodeName)) {
      return decide(
        'skip',
        CORE_ERROR_CODES.CORE_VOLUME_NO_NODE_AGENT,
        `no node agent runs on node ${nodeName ?? '(none)'}; selected because ${selectedBy}`,
      );
    }
    if (blockDevices.has(volume.name)) {
      return decide('skip', CORE_ERROR_CODES.CORE_VOLUME_BLOCK_MODE, 'block-mode volumes cannot be backed up file by file');
    }
    if (!mounted.has(volume.name)) {
      return decide('skip', CORE_ERROR_CODES.CORE_VOLUME_NOT_MOUNTED, 'no container mounts this volume');
    }
    if (claimName !== null) {
      const pvcKey = `${namespace}/${claimName}`;
      const owner = claimedNow.get(pvcKey) ?? ctx.claimedPvcs.get(pvcKey);
      if (owner !== undefined && (owner !== podKey || claimedHere.has(pvcKey))) {
        const through = owner === podKey ? 'another volume of this pod' : `pod ${owner}`;
        return decide(
          'skip',
          CORE_ERROR_CODES.CORE_VOLUME_PVC_ALREADY_CLAIMED,
          `PVC ${claimName} is already backed up through ${through} (one PVB per PVC)`,
        );
      }
      claimedHere.add(pvcKey);
      if (owner === undefined) {
        claimedNow.set(pvcKey, podKey);
        newClaims.push({ pvcKey, podKey });
      }
    }
    return candidate;
  });
  return { volumes, newClaims };
}
