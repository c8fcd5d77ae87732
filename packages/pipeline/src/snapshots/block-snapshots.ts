/*
 * A block's CSI snapshots (docs/architecture.md#csi-snapshots-and-the-data-mover): the item-block job
 * creates one VolumeSnapshot per snapshotted volume once every pre hook has run (like PVBs); the
 * post-hooks job looks at them until each is **cut** (`status.creationTime`) or failed — the
 * consistency point, after which the block's post hooks may run — and then, with the hooks done,
 * until each is ready to use (a kept snapshot) or its data is in the repository (a moved one).
 *
 * Each snapshot's live state is one field of the block's hash, `snap:<name>` (a JSON record
 * written only by the block's own jobs, one at a time), named by the block's `snapshots` list.
 */
import {
  createVolumeSnapshot,
  deleteVolumeSnapshot,
  getVolumeSnapshot,
  getVolumeSnapshotContent,
  isKubeError,
  KubeErrorCodes,
  setSnapshotContentDeletionPolicy,
  snapshotCutAtMs,
  type VolumeSnapshot,
} from '@stowage/kube';
import { cappedBackoffMs } from '@stowage/queue';
import type { PipelineDeps } from '../deps.js';
import type { PlannedPod, PlannedSnapshot, PlannedVolume } from '../plan/block-plan.js';
import { type MoveState, moveSnapshotData } from './data-mover.js';

/** Labels every VolumeSnapshot a backup creates carries. */
export const SNAPSHOT_LABELS = Object.freeze({
  backupName: 'stowage.dev/backup-name',
  backupUid: 'stowage.dev/backup-uid',
});
/** The annotation naming the block whose post-hooks job waits for the snapshot (its informer promotes that job). */
export const SNAPSHOT_BLOCK_ANNOTATION = 'stowage.dev/block';

/**
 * - `Pending`: created, not cut yet;
 * - `Cut`: `creationTime` set (the point in time the snapshot holds); not ready to use yet;
 * - `Moving`: ready, its data being moved into the repository (a DataUpload);
 * - `Completed`: kept and ready to use, or its data moved (and the snapshot deleted);
 * - `Failed`, `Canceled`: never cut, or cut but not kept (message says why).
 */
export type SnapshotPhase = 'Pending' | 'Cut' | 'Moving' | 'Completed' | 'Failed' | 'Canceled';

export interface SnapshotStateRecord extends PlannedSnapshot {
  namespace: string;
  pod: string;
  podUid: string;
  /** The pod's node (where a moved snapshot's data is preferably read). */
  node?: string | undefined;
  volume: string;
  pvc: string;
  phase: SnapshotPhase;
  createdAt: number;
  /** When the cut was taken (the content's creationTime, ms). */
  cutAt?: number;
  /** When the pipeline first saw it cut (ms). */
  cutSeenAt?: number;
  readyAt?: number;
  contentName?: string;
  /** The content's deletionPolicy as its class made it, before a kept snapshot's was set to Retain (deleting the backup honours it). */
  classDeletionPolicy?: string;
  snapshotHandle?: string;
  restoreSizeBytes?: number;
  message?: string;
  /** The moved data: the repository snapshot and bytes (DataUpload's result). */
  repositorySnapshotId?: string;
  bytes?: number;
  completedAt?: number;
  /** The snapshot object itself was deleted (a moved or failed one): nothing left in the cluster. */
  deleted?: boolean;
  /** Polls of the snapshot so far (backoff between looks). */
  polls?: number;
  /** A moved snapshot: how far its data movement got (data-mover.ts). */
  move?: MoveState;
}

export const snapshotField = (name: string) => `snap:${name}`;

/** The snapshot records of a block, in the order of its `snapshots` list (undefined: no record). */
export function blockSnapshots(block: Readonly<Record<string, unknown>> | undefined): SnapshotStateRecord[] {
  const names = Array.isArray(block?.snapshots) ? (block.snapshots as string[]) : [];
  return names.flatMap((name) => {
    const rec = block?.[snapshotField(name)];
    return rec && typeof rec === 'object' ? [rec as SnapshotStateRecord] : [];
  });
}

/** Cut or failed: the post hooks need wait no longer for it. */
export function isSnapshotCutOrFailed(rec: Pick<SnapshotStateRecord, 'phase'>): boolean {
  return rec.phase !== 'Pending';
}

export function isSnapshotSettled(rec: Pick<SnapshotStateRecord, 'phase'>): boolean {
  return rec.phase === 'Completed' || rec.phase === 'Failed' || rec.phase === 'Canceled';
}

export type WantedSnapshot = { pod: PlannedPod; volume: PlannedVolume & { snapshot: PlannedSnapshot } };

/** The record a snapshot starts with (registered before it is created, like a PVB). */
export function pendingSnapshotRecord(w: WantedSnapshot, now: number): SnapshotStateRecord {
  return {
    ...w.volume.snapshot,
    namespace: w.pod.namespace,
    pod: w.pod.name,
    podUid: w.pod.uid,
    ...(w.pod.node ? { node: w.pod.node } : {}),
    volume: w.volume.name,
    pvc: w.volume.claimName ?? '',
    phase: 'Pending',
    createdAt: now,
  };
}

/** Creates the VolumeSnapshot of one volume (409: it exists, from an earlier run). */
export async function createSnapshot(
  deps: Pick<PipelineDeps, 'kube'>,
  input: { backupName: string; backupUid: string; blockId?: string; record: SnapshotStateRecord },
): Promise<{ created: boolean }> {
  const { record } = input;
  const res = await createVolumeSnapshot(deps.kube, {
    metadata: {
      name: record.name,
      namespace: record.namespace,
      labels: { [SNAPSHOT_LABELS.backupName]: input.backupName, [SNAPSHOT_LABELS.backupUid]: input.backupUid },
      annotations: {
        'stowage.dev/pod': `${record.namespace}/${record.pod}`,
        'stowage.dev/volume': record.volume,
        ...(input.blockId ? { [SNAPSHOT_BLOCK_ANNOTATION]: input.blockId } : {}),
      },
    },
    spec: { volumeSnapshotClassName: record.className, source: { persistentVolumeClaimName: record.pvc } },
  });
  return { created: res.created };
}

export interface SnapshotLook {
  /** The record as it is now (changed or not). */
  record: SnapshotStateRecord;
  changed: boolean;
  /** Event to append when it changed phase (`snapshot.cut`, `snapshot.failed`, ...). */
  event?: { type: string; data: Record<string, unknown> };
  /** An error to record (counted once per key). */
  problem?: { onceKey: string; msg: string };
}

/**
 * One look at a Pending snapshot: cut (creationTime) → `Cut` (or straight to `Completed` when it is
 * kept and already ready to use), `status.error` → `Failed`, gone → `Failed`; not cut by
 * `timeoutAt` → `Failed` and deleted; a canceled backup → `Canceled` and deleted. A `Cut` one
 * is looked at for readiness the same way (`lookAtReadiness`).
 */
export async function lookAtCut(
  deps: Pick<PipelineDeps, 'kube' | 'clock'>,
  record: SnapshotStateRecord,
  opts: { canceled: boolean; timeoutAt: number },
): Promise<SnapshotLook> {
  const now = deps.clock.now();
  const where = `VolumeSnapshot ${record.namespace}/${record.name} (pod ${record.namespace}/${record.pod} volume ${record.volume})`;
  const snapshot = await getVolumeSnapshot(deps.kube, record.namespace, record.name);
  if (!snapshot) return failed(record, now, `${where} does not exist (deleted?)`, false);
  const error = snapshot.status?.error?.message;
  if (error) return failed(await dropSnapshot(deps, record), now, `${where} failed: ${error}`, true);
  const content = snapshot.status?.boundVolumeSnapshotContentName
    ? await getVolumeSnapshotContent(deps.kube, snapshot.status.boundVolumeSnapshotContentName)
    : undefined;
  const cutAt = snapshotCutAtMs(snapshot, content);
  if (cutAt !== undefined) {
    const cut: SnapshotStateRecord = {
      ...record,
      phase: 'Cut',
      cutAt,
      cutSeenAt: now,
      polls: 0,
      ...(content ? { contentName: content.metadata.name } : {}),
    };
    const look: SnapshotLook = {
      record: cut,
      changed: true,
      event: {
        type: 'snapshot.cut',
        data: { snapshot: record.name, pod: `${record.namespace}/${record.pod}`, volume: record.volume, cutAt },
      },
    };
    return look;
  }
  if (opts.canceled) {
    const dropped = await dropSnapshot(deps, record);
    return {
      record: { ...dropped, phase: 'Canceled', message: 'backup canceled before the snapshot was cut; it was deleted', completedAt: now },
      changed: true,
      event: { type: 'snapshot.canceled', data: { snapshot: record.name } },
    };
  }
  if (now >= opts.timeoutAt) {
    return failed(
      await dropSnapshot(deps, record),
      now,
      `${where} was not cut within csiSnapshotTimeout (${Math.round((opts.timeoutAt - record.createdAt) / 1000)} s); it was deleted`,
      true,
    );
  }
  return { record: { ...record, polls: (record.polls ?? 0) + 1 }, changed: false };
}

/**
 * One look at a `Cut` snapshot: ready to use → its handle and size recorded; kept → `Completed`
 * (its content's deletionPolicy is left as its class says); moved → stays `Cut` with `readyAt`
 * set, for the data mover. An error → `Failed`; not ready by `timeoutAt` → `Failed`.
 */
export async function lookAtReadiness(
  deps: Pick<PipelineDeps, 'kube' | 'clock'>,
  record: SnapshotStateRecord,
  opts: { timeoutAt: number },
): Promise<SnapshotLook> {
  const now = deps.clock.now();
  const where = `VolumeSnapshot ${record.namespace}/${record.name} (pod ${record.namespace}/${record.pod} volume ${record.volume})`;
  const snapshot = await getVolumeSnapshot(deps.kube, record.namespace, record.name);
  if (!snapshot) return failed(record, now, `${where} does not exist any more (deleted?)`, false);
  const error = snapshot.status?.error?.message;
  if (error) return failed(await dropSnapshot(deps, record), now, `${where} failed: ${error}`, true);
  if (snapshot.status?.readyToUse === true) {
    const content = snapshot.status.boundVolumeSnapshotContentName
      ? await getVolumeSnapshotContent(deps.kube, snapshot.status.boundVolumeSnapshotContentName)
      : undefined;
    const ready: SnapshotStateRecord = {
      ...record,
      readyAt: now,
      polls: 0,
      ...(content ? { contentName: content.metadata.name } : {}),
      ...(content?.status?.snapshotHandle ? { snapshotHandle: content.status.snapshotHandle } : {}),
      ...restoreSizeOf(snapshot, content?.status?.restoreSize),
    };
    if (record.moveData) return { record: ready, changed: true };
    // A kept snapshot outlives its VolumeSnapshot (a deleted namespace takes that with it), as
    // Velero keeps it: its content is set to Retain, and a restore binds a new snapshot to it.
    if (content) await setSnapshotContentDeletionPolicy(deps.kube, content.metadata.name, 'Retain');
    const classPolicy = content?.spec.deletionPolicy;
    return {
      record: {
        ...ready,
        phase: 'Completed',
        completedAt: now,
        ...(classPolicy ? { classDeletionPolicy: classPolicy } : {}),
      },
      changed: true,
      event: { type: 'snapshot.ready', data: { snapshot: record.name, volume: record.volume, pod: `${record.namespace}/${record.pod}` } },
    };
  }
  if (now >= opts.timeoutAt) {
    return failed(
      await dropSnapshot(deps, record),
      now,
      `${where} was cut but not ready to use within csiSnapshotTimeout (${Math.round((opts.timeoutAt - record.createdAt) / 1000)} s); it was deleted`,
      true,
    );
  }
  return { record: { ...record, polls: (record.polls ?? 0) + 1 }, changed: false };
}

function restoreSizeOf(snapshot: VolumeSnapshot, contentSize: number | undefined): { restoreSizeBytes?: number } {
  if (typeof contentSize === 'number') return { restoreSizeBytes: contentSize };
  const raw = snapshot.status?.restoreSize;
  const n = typeof raw === 'number' ? raw : Number(raw);
  return Number.isFinite(n) && n > 0 ? { restoreSizeBytes: n } : {};
}

function failed(record: SnapshotStateRecord, now: number, msg: string, _deleted: boolean): SnapshotLook {
  return {
    record: { ...record, phase: 'Failed', message: msg, completedAt: now },
    changed: true,
    event: {
      type: 'snapshot.failed',
      data: { snapshot: record.name, volume: record.volume, pod: `${record.namespace}/${record.pod}`, message: msg },
    },
    problem: {
      onceKey: `snapshot-failed:${record.name}`,
      msg: `pods/${record.namespace}/${record.pod} volume ${record.volume} not backed up: ${msg}`,
    },
  };
}

/** Deletes the snapshot object (a failed, canceled or moved one leaves nothing behind). */
export async function dropSnapshot<R extends SnapshotStateRecord>(deps: Pick<PipelineDeps, 'kube'>, record: R): Promise<R> {
  try {
    await deleteVolumeSnapshot(deps.kube, record.namespace, record.name);
  } catch (err) {
    if (!isKubeError(err, KubeErrorCodes.notFound)) throw err;
  }
  return { ...record, deleted: true };
}

/** How long until the next look at a snapshot with `polls` looks so far (a cut is usually quick). */
export function snapshotRecheckMs(deps: Pick<PipelineDeps, 'config'>, polls: number): number {
  return Math.max(1, cappedBackoffMs(polls, { baseMs: deps.config.pvbPollBaseMs, maxMs: Math.min(1_000, deps.config.pvbPollMaxMs) }));
}

export interface BlockSnapshotsInput {
  backupName: string;
  blockId: string;
  records: readonly SnapshotStateRecord[];
  /** Read only if a snapshot is still open when looked at. */
  cancelRequested: () => Promise<boolean>;
  /** The backup's csiSnapshotTimeout (ms), counted from each snapshot's creation. */
  timeoutMs: number;
}

export type BlockSnapshotsLook =
  | { settled: true; records: SnapshotStateRecord[] }
  | { settled: false; records: SnapshotStateRecord[]; recheckInMs: number };

/** Writes what looks found: the changed records (one HSET), their events and problems. */
async function recordLooks(deps: Pick<PipelineDeps, 'state'>, input: BlockSnapshotsInput, looks: readonly SnapshotLook[]): Promise<void> {
  const { state } = deps;
  const changed = looks.filter((l) => l.changed);
  if (changed.length === 0) return;
  await state.updateBlock(
    input.backupName,
    input.blockId,
    Object.fromEntries(changed.map((l) => [snapshotField(l.record.name), l.record])),
  );
  for (const look of changed) {
    if (look.event) await state.appendEvent(input.backupName, look.event.type, { blockId: input.blockId, ...look.event.data });
    if (look.record.phase === 'Cut' && look.record.cutAt !== undefined)
      await state.countOnce(input.backupName, `snapshot-cut:${look.record.name}`, 'snapshotsCut');
    if (look.record.phase === 'Completed')
      await state.countOnce(input.backupName, `snapshot-done:${look.record.name}`, 'snapshotsCompleted');
    if (look.record.phase === 'Failed') await state.countOnce(input.backupName, `snapshot-done:${look.record.name}`, 'snapshotsFailed');
    if (look.problem) {
      await state.recordProblem(input.backupName, {
        level: 'error',
        onceKey: look.problem.onceKey,
        msg: look.problem.msg,
        namespace: look.record.namespace,
        blockId: input.blockId,
      });
    }
  }
}

/**
 * The first half of a block's snapshots, before its post hooks: one look at each snapshot not cut
 * yet (lookAtCut). Settled when every one is cut or failed (or canceled).
 */
export async function lookAtBlockCuts(
  deps: Pick<PipelineDeps, 'kube' | 'clock' | 'state' | 'config'>,
  input: BlockSnapshotsInput,
): Promise<BlockSnapshotsLook> {
  const open = input.records.filter((r) => !isSnapshotCutOrFailed(r));
  if (open.length === 0) return { settled: true, records: [...input.records] };
  const canceled = await input.cancelRequested();
  const looks = await Promise.all(open.map((r) => lookAtCut(deps, r, { canceled, timeoutAt: r.createdAt + input.timeoutMs })));
  await recordLooks(deps, input, looks);
  const byName = new Map(looks.map((l) => [l.record.name, l.record]));
  const records = input.records.map((r) => byName.get(r.name) ?? r);
  const still = records.filter((r) => !isSnapshotCutOrFailed(r));
  if (still.length === 0) return { settled: true, records };
  return { settled: false, records, recheckInMs: Math.min(...still.map((r) => snapshotRecheckMs(deps, r.polls ?? 0))) };
}

/**
 * The second half, after the post hooks: each cut snapshot until it is ready to use (kept) or its
 * data moved (moved), or failed. A canceled backup deletes what is not settled yet.
 */
export async function settleBlockSnapshots(
  deps: Pick<PipelineDeps, 'kube' | 'clock' | 'state' | 'config' | 'agents'>,
  input: BlockSnapshotsInput,
): Promise<BlockSnapshotsLook> {
  const open = input.records.filter((r) => !isSnapshotSettled(r));
  if (open.length === 0) return { settled: true, records: [...input.records] };
  const canceled = await input.cancelRequested();
  const looks = await Promise.all(
    open.map(async (r): Promise<SnapshotLook> => {
      // A ready snapshot whose data is to be moved: the data mover's next step (it winds down on a cancel).
      if (r.moveData && (r.phase === 'Moving' || r.readyAt !== undefined)) {
        return moveSnapshotData(deps, r, { backupName: input.backupName, canceled });
      }
      if (canceled) {
        const dropped = await dropSnapshot(deps, r);
        return {
          record: {
            ...dropped,
            phase: 'Canceled',
            message: 'backup canceled before the snapshot was settled; it was deleted',
            completedAt: deps.clock.now(),
          },
          changed: true,
          event: { type: 'snapshot.canceled', data: { snapshot: r.name } },
        };
      }
      return lookAtReadiness(deps, r, { timeoutAt: r.createdAt + input.timeoutMs });
    }),
  );
  await recordLooks(deps, input, looks);
  const byName = new Map(looks.map((l) => [l.record.name, l.record]));
  const records = input.records.map((r) => byName.get(r.name) ?? r);
  const still = records.filter((r) => !isSnapshotSettled(r));
  if (still.length === 0) return { settled: true, records };
  // A step that moved a snapshot on is followed at once; otherwise the looks back off with the
  // time the snapshot has been in its state (a long upload is looked at every few seconds).
  const moved = new Set(looks.filter((l) => l.changed).map((l) => l.record.name));
  const now = deps.clock.now();
  return {
    settled: false,
    records,
    recheckInMs: Math.min(...still.map((r) => (moved.has(r.name) ? 1 : backoffSince(deps, now - sinceOf(r))))),
  };
}

/** When a snapshot entered the state it waits in. */
function sinceOf(r: SnapshotStateRecord): number {
  return r.move?.since ?? r.cutSeenAt ?? r.createdAt;
}

/** A quarter of the time waited so far, between the poll base and 2 s. */
function backoffSince(deps: Pick<PipelineDeps, 'config'>, waitedMs: number): number {
  return Math.max(deps.config.pvbPollBaseMs, Math.min(2_000, Math.floor(waitedMs / 4)));
}

/** A snapshot whose next step is the snapshot controller's (cut, or ready to use): what the VolumeSnapshot informer sees. */
export function waitsOnSnapshotObject(r: SnapshotStateRecord): boolean {
  return r.phase === 'Pending' || (r.phase === 'Cut' && r.readyAt === undefined);
}

/** What the snapshot informer offers a parked post-hooks job: its cache and its promotions. */
export interface SnapshotWatch {
  healthy(): boolean;
  promoteIfDue(name: string, namespace?: string, isDue?: (object: VolumeSnapshot) => boolean): Promise<void>;
}

/**
 * How long a post-hooks job waiting on `records` parks: with a healthy snapshot informer (which
 * promotes it the moment one is cut, ready or failed) until a real read is due, never past the
 * first csiSnapshotTimeout; without one, or with a snapshot waiting on something else (its data
 * moving), `recheckInMs` as the looks computed it.
 */
export function snapshotParkMs(
  watch: SnapshotWatch | undefined,
  records: readonly SnapshotStateRecord[],
  input: { recheckInMs: number; now: number; realReadEveryMs: number; timeoutMs: number },
): number {
  const open = records.filter((r) => !isSnapshotSettled(r));
  if (!watch?.healthy() || open.length === 0 || !open.every(waitsOnSnapshotObject)) return input.recheckInMs;
  const untilTimeout = Math.min(...open.map((r) => r.createdAt + input.timeoutMs - input.now));
  return Math.max(input.recheckInMs, Math.min(input.realReadEveryMs, Math.max(1, untilTimeout)));
}

/** Once parked: promotes the job at once if the informer already saw one of its snapshots move on (a change while it ran). */
export function recheckSnapshots(
  watch: SnapshotWatch | undefined,
  records: readonly SnapshotStateRecord[],
): () => Promise<void> | undefined {
  return () => {
    if (!watch) return undefined;
    const open = records.filter((r) => !isSnapshotSettled(r) && waitsOnSnapshotObject(r));
    return Promise.all(
      open.map((r) =>
        watch.promoteIfDue(r.name, r.namespace, (s) =>
          r.phase === 'Pending'
            ? Boolean(s.status?.creationTime || s.status?.error?.message)
            : s.status?.readyToUse === true || Boolean(s.status?.error?.message),
        ),
      ),
    ).then(() => undefined);
  };
}
