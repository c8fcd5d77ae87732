/*
 * The data mover (snapshotMoveData; docs/architecture.md#csi-snapshots-and-the-data-mover): a ready
 * snapshot's data goes into the repository through the node agent, as Velero's CSI data mover does:
 *
 * 1. expose — the snapshot is handed to Stowage's namespace: its content is set to Retain, a content
 *    `stowage-<name>` naming the same snapshot handle (deletionPolicy Delete) and a VolumeSnapshot
 *    `<name>` bound to it are made there, and the user's VolumeSnapshot and its old content are
 *    deleted (the data stays, now owned by the new content). A temporary claim `<name>` is made from
 *    it (ReadOnlyMany: drivers serve it from the snapshot, no copy) and a temporary pod `<name>`
 *    mounts it (a block volume as a device) on a node with an agent — the pod's node when it has one;
 * 2. upload — once the pod runs, a DataUpload `<name>` asks that node's agent to copy the pod's
 *    volume into the repository (the PVB copy: same dedup, encryption, progress, cancel and
 *    loadConcurrency);
 * 3. clean up — the pod, the claim and the snapshot (its content and data with it) are deleted.
 *
 * Every step is idempotent (deterministic names, 409 = made already, 404 = gone already), so a
 * worker that dies between two steps is followed by one that does the rest, and a node agent
 * that dies mid-copy resumes it; what was uploaded is recorded once, from the DataUpload's status.
 */
import {
  createDataUploadClient,
  createVolumeSnapshot,
  createVolumeSnapshotContent,
  dataMoverLabels,
  deleteVolumeSnapshot,
  getPod,
  getVolumeSnapshot,
  getVolumeSnapshotContent,
  isKubeError,
  isVolumeOperationTerminal,
  type KubeClients,
  KubeErrorCodes,
  setSnapshotContentDeletionPolicy,
  snapshotGroup,
} from '@stowage/kube';
import type { PipelineDeps } from '../deps.js';
import type { SnapshotLook, SnapshotStateRecord } from './block-snapshots.js';

/** How far a moved snapshot got (in its record, `move`). */
export interface MoveState {
  stage: 'exposing' | 'uploading' | 'cleanup';
  /** When the stage began (ms): the looks back off from it. */
  since: number;
  node: string;
  /** The upload's end: the repository snapshot, or why it failed. */
  snapshotId?: string;
  bytes?: number;
  failed?: string;
  cancelAskedAt?: number;
}

/** The volume's name in the temporary pod. */
export const MOVER_VOLUME = 'data';

type MoverDeps = Pick<PipelineDeps, 'kube' | 'clock' | 'config' | 'agents'>;

const enc = encodeURIComponent;

async function ignoring<T>(codes: string[], work: () => Promise<T>): Promise<T | undefined> {
  try {
    return await work();
  } catch (err) {
    if (codes.some((code) => isKubeError(err, code as never))) return undefined;
    throw err;
  }
}

const EXISTS = [KubeErrorCodes.alreadyExists, KubeErrorCodes.conflict];
const GONE = [KubeErrorCodes.notFound];

/**
 * One look at a moved snapshot that is ready (`readyAt` set): its next step, done. Returns the
 * record as it now is; `changed` when a step moved it on.
 */
export async function moveSnapshotData(
  deps: MoverDeps,
  record: SnapshotStateRecord & { move?: MoveState },
  opts: { backupName: string; canceled: boolean },
): Promise<SnapshotLook> {
  const now = deps.clock.now();
  const ns = deps.config.namespace;
  const where = `pods/${record.namespace}/${record.pod} volume ${record.volume}`;
  let move = record.move;
  if (!move) {
    const agents = await deps.agents.nodesWithAgent();
    const node = record.node && agents.has(record.node) ? record.node : [...agents].sort()[0];
    if (!node) return end(deps, record, { stage: 'cleanup', since: now, node: '', failed: 'no node agent runs to move its data' }, now);
    move = { stage: 'exposing', since: now, node };
    return {
      record: { ...record, phase: 'Moving', move },
      changed: true,
      event: { type: 'snapshot.moving', data: { snapshot: record.name, node } },
    };
  }
  if (move.stage === 'exposing') {
    if (opts.canceled) return toCleanup(record, move, now, 'backup canceled before its data was moved');
    const exposed = await expose(deps, record, move);
    if (exposed.failed) return toCleanup(record, move, now, exposed.failed);
    if (!exposed.podUid) return { record, changed: false };
    const client = createDataUploadClient(deps.kube, { namespace: ns });
    await client.create({
      metadata: {
        name: record.name,
        labels: { [dataMoverLabels.node]: move.node, [dataMoverLabels.backupName]: opts.backupName },
      },
      spec: {
        node: move.node,
        pod: { namespace: ns, name: record.name, uid: exposed.podUid },
        volume: MOVER_VOLUME,
        backupStorageLocation: deps.config.backupStorageLocation,
        volumeMode: record.volumeMode,
        snapshot: {
          namespace: record.namespace,
          name: record.name,
          className: record.className,
          driver: record.driver,
          handle: record.snapshotHandle ?? '',
        },
        tags: {
          backup: opts.backupName,
          ns: record.namespace,
          pod: record.pod,
          'pod-uid': record.podUid,
          volume: record.volume,
          pvc: record.pvc,
          'volume-mode': record.volumeMode,
        },
      },
    });
    const next: MoveState = { ...move, stage: 'uploading', since: now };
    return {
      record: { ...record, move: next },
      changed: true,
      event: {
        type: 'dataupload.created',
        data: { dataUpload: record.name, snapshot: record.name, node: move.node, volume: record.volume },
      },
    };
  }
  if (move.stage === 'uploading') {
    const client = createDataUploadClient(deps.kube, { namespace: ns });
    const upload = await client.get(record.name);
    if (!upload) return toCleanup(record, move, now, `DataUpload ${ns}/${record.name} does not exist (deleted?)`);
    if (isVolumeOperationTerminal(upload)) {
      const phase = upload.status?.phase;
      const done: MoveState =
        phase === 'Completed' && upload.status?.snapshotID
          ? { ...move, stage: 'cleanup', since: now, snapshotId: upload.status.snapshotID, bytes: upload.status.progress?.totalBytes ?? 0 }
          : {
              ...move,
              stage: 'cleanup',
              since: now,
              failed: `DataUpload ${ns}/${record.name} ended ${phase}: ${upload.status?.message ?? 'no message'}`,
            };
      return {
        record: { ...record, move: done },
        changed: true,
        event: {
          type: 'dataupload.done',
          data: {
            dataUpload: record.name,
            phase,
            bytes: done.bytes ?? 0,
            ...(done.snapshotId ? { repositorySnapshotId: done.snapshotId } : {}),
          },
        },
      };
    }
    if (opts.canceled && move.cancelAskedAt === undefined) {
      if (!upload.spec.cancel) await client.requestCancel(record.name);
      return { record: { ...record, move: { ...move, cancelAskedAt: now } }, changed: true };
    }
    if (move.cancelAskedAt !== undefined && now - move.cancelAskedAt >= deps.config.pvbCancelWaitMs) {
      return toCleanup(
        record,
        move,
        now,
        `DataUpload ${ns}/${record.name} did not stop within ${deps.config.pvbCancelWaitMs} ms of the cancel`,
      );
    }
    return { record, changed: false };
  }
  return end(deps, record, move, now, where);
}

function toCleanup(record: SnapshotStateRecord, move: MoveState, now: number, why: string): SnapshotLook {
  return { record: { ...record, move: { ...move, stage: 'cleanup', since: now, failed: why } }, changed: true };
}

/** Deletes the temporary pod, claim and snapshot; the record ends Completed (data moved) or Failed. */
async function end(
  deps: MoverDeps,
  record: SnapshotStateRecord & { move?: MoveState },
  move: MoveState,
  now: number,
  where = `pods/${record.namespace}/${record.pod} volume ${record.volume}`,
): Promise<SnapshotLook> {
  await cleanUpMover(deps.kube, deps.config.namespace, record);
  if (move.snapshotId && !move.failed) {
    return {
      record: {
        ...record,
        move,
        phase: 'Completed',
        repositorySnapshotId: move.snapshotId,
        bytes: move.bytes ?? 0,
        completedAt: now,
        deleted: true,
      },
      changed: true,
      event: {
        type: 'snapshot.moved',
        data: { snapshot: record.name, volume: record.volume, bytes: move.bytes ?? 0, repositorySnapshotId: move.snapshotId },
      },
    };
  }
  const msg = `its snapshot's data was not moved: ${move.failed ?? 'unknown'}; the snapshot was deleted`;
  return {
    record: { ...record, move, phase: 'Failed', message: msg, completedAt: now, deleted: true },
    changed: true,
    event: { type: 'snapshot.failed', data: { snapshot: record.name, volume: record.volume, message: msg } },
    problem: { onceKey: `snapshot-failed:${record.name}`, msg: `${where} not backed up: ${msg}` },
  };
}

/** Everything the move made or took over: the pod, the claim, both snapshots (a content under Delete takes the data). */
export async function cleanUpMover(kube: KubeClients, ns: string, record: SnapshotStateRecord): Promise<void> {
  const name = record.name;
  await ignoring(GONE, () => kube.requestJson({ method: 'DELETE', path: `/api/v1/namespaces/${enc(ns)}/pods/${enc(name)}` }));
  await ignoring(GONE, () =>
    kube.requestJson({ method: 'DELETE', path: `/api/v1/namespaces/${enc(ns)}/persistentvolumeclaims/${enc(name)}` }),
  );
  await deleteVolumeSnapshot(kube, ns, name);
  // The user's snapshot, if the expose never got as far as handing it over (its content goes too, under Delete).
  if (record.contentName) {
    const old = await getVolumeSnapshotContent(kube, record.contentName);
    if (old) await ignoring(GONE, () => setSnapshotContentDeletionPolicy(kube, record.contentName!, 'Delete'));
  }
  await deleteVolumeSnapshot(kube, record.namespace, name);
  if (record.contentName) {
    await ignoring(GONE, () =>
      kube.requestJson({ method: 'DELETE', path: `/apis/${snapshotGroup}/v1/volumesnapshotcontents/${enc(record.contentName!)}` }),
    );
  }
}

/**
 * The expose step, as far as it gets in one look: undefined podUid while something is not ready
 * yet (the new snapshot, the claim, the pod), `failed` when it cannot be done.
 */
async function expose(deps: MoverDeps, record: SnapshotStateRecord, move: MoveState): Promise<{ podUid?: string; failed?: string }> {
  const { kube } = deps;
  const ns = deps.config.namespace;
  const name = record.name;
  const handle = record.snapshotHandle;
  if (!handle) return { failed: `VolumeSnapshot ${record.namespace}/${name} has no snapshot handle` };
  const contentName = `stowage-${name}`;
  // 1. The user's snapshot handed over: its content Retain, ours naming the same handle.
  if (record.contentName) await ignoring(GONE, () => setSnapshotContentDeletionPolicy(kube, record.contentName!, 'Retain'));
  await createVolumeSnapshotContent(kube, {
    metadata: { name: contentName },
    spec: {
      deletionPolicy: 'Delete',
      driver: record.driver,
      volumeSnapshotClassName: record.className,
      source: { snapshotHandle: handle },
      volumeSnapshotRef: { name, namespace: ns },
    },
  });
  await createVolumeSnapshot(kube, {
    metadata: { name, namespace: ns },
    spec: { volumeSnapshotClassName: record.className, source: { volumeSnapshotContentName: contentName } },
  });
  const ours = await getVolumeSnapshot(kube, ns, name);
  if (ours?.status?.error?.message)
    return { failed: `VolumeSnapshot ${ns}/${name} (the exposed snapshot) failed: ${ours.status.error.message}` };
  if (ours?.status?.readyToUse !== true) return {};
  // The user's snapshot and its old content go; the data stays (Retain), owned by ours now.
  await deleteVolumeSnapshot(kube, record.namespace, name);
  if (record.contentName) {
    await ignoring(GONE, () =>
      kube.requestJson({ method: 'DELETE', path: `/apis/${snapshotGroup}/v1/volumesnapshotcontents/${enc(record.contentName!)}` }),
    );
  }
  // 2. The temporary claim from it, in the class of the original volume.
  const pv = await ignoring(GONE, () =>
    kube.requestJson<{ spec?: { storageClassName?: string } }>({ path: `/api/v1/persistentvolumes/${enc(record.pvName)}` }),
  );
  const block = record.volumeMode === 'Block';
  await ignoring(EXISTS, () =>
    kube.requestJson({
      method: 'POST',
      path: `/api/v1/namespaces/${enc(ns)}/persistentvolumeclaims`,
      body: {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name, namespace: ns, labels: { 'stowage.dev/data-mover': 'backup' } },
        spec: {
          accessModes: ['ReadOnlyMany'],
          volumeMode: record.volumeMode,
          ...(pv?.spec?.storageClassName ? { storageClassName: pv.spec.storageClassName } : {}),
          resources: { requests: { storage: String(Math.max(1, record.restoreSizeBytes ?? 1)) } },
          dataSource: { apiGroup: snapshotGroup, kind: 'VolumeSnapshot', name },
        },
      },
    }),
  );
  // 3. The temporary pod that mounts it, on the chosen node (restricted Pod Security).
  await ignoring(EXISTS, () =>
    kube.requestJson({
      method: 'POST',
      path: `/api/v1/namespaces/${enc(ns)}/pods`,
      body: moverPod({
        name,
        namespace: ns,
        node: move.node,
        image: deps.config.restoreWaitImage,
        block,
        claim: name,
        readOnly: true,
        role: 'backup',
      }),
    }),
  );
  const pod = await getPod(kube, ns, name);
  if (!pod?.metadata?.uid) return {};
  if (pod.status?.phase === 'Failed') return { failed: `temporary pod ${ns}/${name} failed: ${pod.status.message ?? 'no message'}` };
  if (pod.status?.phase !== 'Running') return {};
  return { podUid: pod.metadata.uid };
}

/** The temporary pod that exposes a claim to a node agent (a backup reads it; a restore writes it). */
export function moverPod(input: {
  name: string;
  namespace: string;
  node: string;
  image: string;
  block: boolean;
  claim: string;
  readOnly: boolean;
  role: 'backup' | 'restore';
}): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: input.name, namespace: input.namespace, labels: { 'stowage.dev/data-mover': input.role } },
    spec: {
      nodeName: input.node,
      restartPolicy: 'Never',
      securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'hold',
          image: input.image,
          command: ['/bin/sh', '-c', 'sleep 86400'],
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
          ...(input.block
            ? { volumeDevices: [{ name: MOVER_VOLUME, devicePath: '/dev/stowage-data' }] }
            : { volumeMounts: [{ name: MOVER_VOLUME, mountPath: '/data', readOnly: input.readOnly }] }),
        },
      ],
      volumes: [{ name: MOVER_VOLUME, persistentVolumeClaim: { claimName: input.claim, readOnly: input.readOnly } }],
    },
  };
}
