/*
 * How each pod volume's data is backed up — a file-system backup (a PVB), a CSI snapshot (kept, or
 * with its data moved into the repository), or not at all — per docs/architecture.md#volumes-that-get-a-file-system-backup
 * (Velero's: docs/velero.md#which-volumes-get-a-file-system-backup), in this order:
 * 1. never: hostPath, secret, configMap, projected, downwardAPI, `default-token*`, a PVC bound to
 *    a hostPath PV, and PVC-backed volumes when PVCs are excluded by the resource filters;
 * 2. the first matching volume policy decides (fs-backup / skip / snapshot);
 * 3. the annotations, read per `defaultVolumesToFsBackup`: true → every volume except those in
 *    `backup.velero.io/backup-volumes-excludes`; false → only those in
 *    `backup.velero.io/backup-volumes`. Only the annotation that matches the mode is read, so a
 *    volume listed in both follows the mode (Velero does exactly this). A PVC-backed volume not
 *    chosen for fs-backup is snapshotted when the backup's `snapshotVolumes` is true;
 * 4. run-time skips for what would get a PVB: pod not Running, no node agent on the pod's node,
 *    volume not mounted by any container, PVC already taken by another pod of the backup (one PVB
 *    or snapshot per PVC). A block-mode volume cannot be read file by file: it is snapshotted
 *    instead when `snapshotVolumes` is true, else skipped.
 * A snapshot needs a bound CSI PVC and a VolumeSnapshotClass for its driver (snapshot-class.ts);
 * moving its data needs a node agent. A volume chosen for a snapshot that cannot have one is an
 * `error`, never a silent skip. Unlike Velero (whose `snapshotVolumes` defaults to true), Stowage
 * snapshots only what is asked for: `snapshotVolumes` defaults to false.
 * `error`: with volume policies, a PVC that has no PV (Pending, Lost) and that no policy matched
 * (a `pvcPhase` policy may skip it) cannot be decided; Velero fails the volume, and so do we: it
 * is recorded as an error, never skipped in silence.
 */
import type { BackupSpec } from './backup-spec.js';
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
import { chooseSnapshotClass, type SnapshotClassInfo } from './snapshot-class.js';
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
  | C['CORE_VOLUME_PVC_WITHOUT_PV']
  | C['CORE_VOLUME_SNAPSHOT_VOLUMES']
  | C['CORE_VOLUME_BLOCK_MODE_SNAPSHOT']
  | C['CORE_VOLUME_SNAPSHOT_IMPOSSIBLE'];

/**
 * A PVC annotation that overrides the backup's `snapshotMoveData` for that claim's snapshot:
 * `"true"` moves its data into the repository, `"false"` keeps the snapshot; any other value is an
 * error naming it.
 */
export const SNAPSHOT_MOVE_DATA_ANNOTATION = 'stowage.dev/snapshot-move-data';

/** How a snapshotted volume is snapshotted. */
export interface VolumeSnapshotPlan {
  /** The VolumeSnapshotClass (snapshot-class.ts). */
  className: string;
  /** The volume's CSI driver. */
  driver: string;
  pvName: string;
  volumeMode: 'Filesystem' | 'Block';
  /** The snapshot's data is moved into the repository (a DataUpload), then the snapshot is deleted. */
  moveData: boolean;
}

export interface VolumeDecision {
  /** Pod volume name. */
  volume: string;
  decision: VolumeDecisionKind;
  code: VolumeDecisionCode;
  /** A sentence for the backup log and results. */
  reason: string;
  /** The PVC behind the volume, when PVC-backed. */
  pvcName: string | null;
  /** Set when `decision` is `snapshot`. */
  snapshot?: VolumeSnapshotPlan;
}

/** What the backup asks of snapshots, and the classes the cluster has. */
export interface SnapshotContext {
  /** The backup's `snapshotVolumes`: snapshot PVC-backed volumes nothing chose fs-backup for. */
  volumes: boolean;
  /** The backup's `snapshotMoveData`: move each snapshot's data into the repository. */
  moveData: boolean;
  /** The cluster's VolumeSnapshotClasses; undefined when it serves no snapshot API. */
  classes: readonly SnapshotClassInfo[] | undefined;
}

export interface FsBackupContext {
  spec: Pick<BackupSpec, 'defaultVolumesToFsBackup' | 'includedResources' | 'excludedResources'> & ScopedResourceFilter;
  /** The backup's volume policies, already loaded (inline, or from the referenced ConfigMap); null = none. */
  volumePolicies: readonly VolumePolicy[] | null;
  findPvc: (namespace: string, name: string) => PersistentVolumeClaim | undefined;
  findPv: (name: string) => PersistentVolume | undefined;
  /** Nodes that run a node agent. */
  nodesWithAgent: ReadonlySet<string>;
  /** PVCs that already have a PVB or a snapshot in this backup: `<ns>/<pvc>` → `<ns>/<pod>` that took it. */
  claimedPvcs: ReadonlyMap<string, string>;
  /** Snapshots asked for, and the classes; absent = no snapshots (`snapshotVolumes` false, no classes). */
  snapshots?: SnapshotContext | undefined;
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
    // The PVC is taken by this pod (one PVB or snapshot per PVC); undefined when it is free.
    const takenBy = (): { pvcKey: string; owner: string | undefined } | undefined => {
      if (claimName === null) return undefined;
      const pvcKey = `${namespace}/${claimName}`;
      return { pvcKey, owner: claimedNow.get(pvcKey) ?? ctx.claimedPvcs.get(pvcKey) };
    };
    const alreadyClaimed = (): VolumeDecision | undefined => {
      const taken = takenBy();
      if (!taken) return undefined;
      const { pvcKey, owner } = taken;
      if (owner !== undefined && (owner !== podKey || claimedHere.has(pvcKey))) {
        const through = owner === podKey ? 'another volume of this pod' : `pod ${owner}`;
        return decide(
          'skip',
          CORE_ERROR_CODES.CORE_VOLUME_PVC_ALREADY_CLAIMED,
          `PVC ${claimName} is already backed up through ${through} (one PVB or snapshot per PVC)`,
        );
      }
      claimedHere.add(pvcKey);
      if (owner === undefined) {
        claimedNow.set(pvcKey, podKey);
        newClaims.push({ pvcKey, podKey });
      }
      return undefined;
    };
    // A snapshot of this volume, chosen for `why`: checked that it can be taken, else an error.
    const snapshotOf = (
      code: VolumeDecisionCode,
      why: string,
      pvc: PersistentVolumeClaim | undefined,
      pv: PersistentVolume | undefined,
    ) => {
      const impossible = (problem: string) =>
        decide('error', CORE_ERROR_CODES.CORE_VOLUME_SNAPSHOT_IMPOSSIBLE, `cannot be snapshotted (${why}): ${problem}`);
      if (claimName === null) return impossible('only PVC-backed volumes can be snapshotted');
      if (!pvc) return impossible(`PVC ${namespace}/${claimName} was not found`);
      if (!pv) return impossible(`PVC ${namespace}/${claimName} is not bound to a PersistentVolume`);
      const driver = pv.spec.csi?.driver;
      if (!driver) return impossible(`PersistentVolume ${pv.metadata.name} is not a CSI volume`);
      const chosen = chooseSnapshotClass(driver, ctx.snapshots?.classes, pvc.metadata.annotations);
      if (!chosen.ok) return impossible(chosen.message);
      // The claim may say otherwise than the backup's snapshotMoveData (one block may keep one snapshot and move another).
      const override = pvc.metadata.annotations?.[SNAPSHOT_MOVE_DATA_ANNOTATION];
      if (override !== undefined && override !== 'true' && override !== 'false') {
        return impossible(
          `PVC ${namespace}/${claimName} has annotation ${SNAPSHOT_MOVE_DATA_ANNOTATION}: ${JSON.stringify(override)}; it must be "true" or "false"`,
        );
      }
      const moveData = override === undefined ? ctx.snapshots?.moveData === true : override === 'true';
      if (moveData && ctx.nodesWithAgent.size === 0) {
        return impossible(
          `${override === undefined ? 'snapshotMoveData' : `annotation ${SNAPSHOT_MOVE_DATA_ANNOTATION}`} is true and no node agent runs to move its data`,
        );
      }
      const claimed = alreadyClaimed();
      if (claimed) return claimed;
      const mode =
        (moveData ? 'its data moved into the repository' : 'the snapshot kept') +
        (override === undefined ? '' : ` (PVC annotation ${SNAPSHOT_MOVE_DATA_ANNOTATION}: "${override}")`);
      return {
        ...decide('snapshot', code, `${why}; VolumeSnapshotClass ${chosen.className} (${chosen.why}), ${mode}`),
        snapshot: {
          className: chosen.className,
          driver,
          pvName: pv.metadata.name ?? '',
          volumeMode: (pv.spec.volumeMode ?? pvc.spec.volumeMode) === 'Block' ? 'Block' : 'Filesystem',
          moveData,
        },
      } satisfies VolumeDecision;
    };
    const snapshotVolumes = ctx.snapshots?.volumes === true;

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
          return snapshotOf(CORE_ERROR_CODES.CORE_VOLUME_POLICY_SNAPSHOT, `${which} says snapshot`, pvc, pv);
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
        if (snapshotVolumes && claimName !== null) {
          return snapshotOf(
            CORE_ERROR_CODES.CORE_VOLUME_SNAPSHOT_VOLUMES,
            `listed in ${BACKUP_VOLUMES_EXCLUDES_ANNOTATION} and snapshotVolumes is true`,
            pvc,
            pv,
          );
        }
        return decide('skip', CORE_ERROR_CODES.CORE_VOLUME_OPTED_OUT, `listed in ${BACKUP_VOLUMES_EXCLUDES_ANNOTATION}${both}`);
      }
      candidate = decide(
        'fs-backup',
        CORE_ERROR_CODES.CORE_VOLUME_DEFAULT_FS_BACKUP,
        'defaultVolumesToFsBackup is true and the volume is not excluded',
      );
    } else {
      if (!optIn.includes(volume.name) && snapshotVolumes && claimName !== null) {
        return snapshotOf(
          CORE_ERROR_CODES.CORE_VOLUME_SNAPSHOT_VOLUMES,
          `snapshotVolumes is true and the volume is not listed in ${BACKUP_VOLUMES_ANNOTATION}`,
          pvc,
          pv,
        );
      }
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
    if (blockDevices.has(volume.name) && snapshotVolumes && claimName !== null) {
      return snapshotOf(
        CORE_ERROR_CODES.CORE_VOLUME_BLOCK_MODE_SNAPSHOT,
        `a block-mode volume cannot be backed up file by file, and snapshotVolumes is true (selected for fs-backup because ${selectedBy})`,
        pvc,
        pv,
      );
    }
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
      return decide(
        'skip',
        CORE_ERROR_CODES.CORE_VOLUME_BLOCK_MODE,
        'block-mode volumes cannot be backed up file by file (set snapshotVolumes: true to snapshot them)',
      );
    }
    if (!mounted.has(volume.name)) {
      return decide('skip', CORE_ERROR_CODES.CORE_VOLUME_NOT_MOUNTED, 'no container mounts this volume');
    }
    return alreadyClaimed() ?? candidate;
  });
  return { volumes, newClaims };
}
