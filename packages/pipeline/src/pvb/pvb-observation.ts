import { isPvbTerminal, type PodVolumeBackup } from '@stowage/kube';
import { parseStorageCost } from '@stowage/storage';
import type { PipelineDeps } from '../deps.js';
import { NO_PIPELINE_METRICS } from '../metrics.js';
import type { PvbStateRecord } from '../state/backup-state.js';
import { storageCountEntries } from '../state/storage-cost.js';

export interface PvbObservation {
  phase: string;
  terminal: boolean;
  bytesDone?: number | undefined;
  message?: string | undefined;
}

/** What a pvb-watch job returns (kept small: it lives in the post-hooks parent's hash). */
export interface PvbWatchResult {
  pvb: string;
  phase: string;
  /** We stopped waiting (fs-backup deadline or backup cancel) before the PVB stopped. */
  timedOut?: boolean;
  /** The PVB object vanished. */
  missing?: boolean;
}

/**
 * Applies what we saw of a PVB to backup state: phase, bytes, timestamps, message, a
 * `pvb.phase` event on a phase change (to Failed or Canceled with the PVB's `message`) and
 * `pvb.progress` on byte progress. The first terminal
 * transition is counted once (`pvb:<name>` → `pvbs<Phase>`); Failed and Canceled are errors.
 */
export async function recordPvbObservation(
  deps: Pick<PipelineDeps, 'state' | 'metrics'>,
  backupName: string,
  pvb: PodVolumeBackup,
  previous: PvbStateRecord | undefined,
): Promise<PvbObservation> {
  const name = pvb.metadata.name;
  const status = pvb.status ?? {};
  const phase = status.phase ?? 'New';
  const terminal = isPvbTerminal(pvb);
  const patch: Partial<PvbStateRecord> = {
    phase,
    message: status.message,
    snapshotID: status.snapshotID,
    path: status.path,
    totalBytes: status.progress?.totalBytes,
    bytesDone: status.progress?.bytesDone,
    startTimestamp: status.startTimestamp,
    completionTimestamp: status.completionTimestamp,
    cancelRequested: pvb.spec.cancel === true ? true : undefined,
  };
  const changedPhase = previous?.phase !== phase;
  const changedBytes = previous?.bytesDone !== status.progress?.bytesDone;
  const where = {
    pvb: name,
    blockId: previous?.blockId,
    node: pvb.spec.node,
    pod: `${pvb.spec.pod.namespace}/${pvb.spec.pod.name}`,
    volume: pvb.spec.volume,
  };
  // The record, the event and the once-counter are independent writes: sent together, they cost
  // one round trip's wait on the way from a finished PVB to its post hooks, not three.
  const writes: Promise<unknown>[] = [];
  if (changedPhase || changedBytes || previous?.message !== status.message)
    writes.push(deps.state.updatePvb(backupName, name, patch, { registered: previous !== undefined }));
  if (changedPhase) {
    // A PVB that failed or was canceled says why (its status message), so a live event alone explains it.
    const why = (phase === 'Failed' || phase === 'Canceled') && status.message ? { message: status.message } : {};
    writes.push(deps.state.appendEvent(backupName, 'pvb.phase', { ...where, from: previous?.phase ?? null, to: phase, ...why }));
  } else if (changedBytes) {
    writes.push(
      deps.state.appendEvent(backupName, 'pvb.progress', {
        pvb: name,
        bytesDone: status.progress?.bytesDone ?? 0,
        totalBytes: status.progress?.totalBytes ?? 0,
      }),
    );
  }
  // A PVB that completed is counted and logged in one step (this is on the way to the post hooks);
  // a failed or canceled one is also an error, recorded once it counted.
  const counted = !terminal
    ? Promise.resolve(false)
    : phase === 'Completed'
      ? deps.state.countOnceAndLog(backupName, `pvb:${name}`, 'pvbsCompleted', {
          level: 'info',
          msg: 'pod volume backup completed',
          ...where,
        })
      : deps.state.countOnce(backupName, `pvb:${name}`, `pvbs${phase}`);
  // What the node agent asked of storage for it, added to the backup's once.
  const cost = terminal ? parseStorageCost(status.storage) : undefined;
  if (cost) writes.push(deps.state.countOnceMany(backupName, storageCountEntries(`storage:pvb:${name}`, cost)));
  const [firstTerminal] = await Promise.all([counted, ...writes]);
  if (firstTerminal) (deps.metrics ?? NO_PIPELINE_METRICS).podVolumeBackupEnded({ phase });
  if (firstTerminal && phase !== 'Completed') await reportTerminal(deps, backupName, name, phase, status.message, where);
  return { phase, terminal, bytesDone: status.progress?.bytesDone, message: status.message };
}

/** The first Failed or Canceled observation of a PVB (counted just now): an error. */
async function reportTerminal(
  deps: Pick<PipelineDeps, 'state' | 'metrics'>,
  backupName: string,
  name: string,
  phase: string,
  message: string | undefined,
  where: Record<string, unknown>,
): Promise<void> {
  const namespace = (where.pod as string).split('/')[0];
  const what = phase === 'Failed' ? 'failed' : 'canceled';
  await deps.state.recordProblem(backupName, {
    level: 'error',
    onceKey: `pvb:${name}`,
    msg: `pod volume backup ${what}: ${message ?? 'no message'}`,
    namespace,
    ...where,
  });
}

/**
 * We stop waiting for a PVB that did not stop after being asked to cancel: it is recorded as
 * timed out (an error), counted once as `pvbsTimedOut`, and the post hooks may run.
 */
export async function recordPvbGaveUp(
  deps: Pick<PipelineDeps, 'state' | 'metrics'>,
  backupName: string,
  pvbName: string,
  previous: PvbStateRecord | undefined,
  reason: 'deadline' | 'canceled' | 'orphaned',
  waitedMs: number,
): Promise<void> {
  const why = { deadline: 'fs-backup deadline passed', canceled: 'backup canceled', orphaned: 'its watcher was lost' }[reason];
  const msg = `${why}; PVB ${pvbName} was asked to cancel and did not stop within ${waitedMs} ms`;
  await deps.state.updatePvb(backupName, pvbName, { timedOut: true, message: msg });
  const counted = await deps.state.countOnce(backupName, `pvb:${pvbName}`, 'pvbsTimedOut');
  if (counted) {
    (deps.metrics ?? NO_PIPELINE_METRICS).podVolumeBackupEnded({ phase: 'TimedOut' });
    await deps.state.recordProblem(backupName, {
      level: 'error',
      onceKey: `pvb-gave-up:${pvbName}`,
      msg,
      pvb: pvbName,
      blockId: previous?.blockId,
      namespace: previous?.podNamespace,
      reason,
    });
    await deps.state.appendEvent(backupName, 'pvb.phase', {
      pvb: pvbName,
      blockId: previous?.blockId,
      from: previous?.phase ?? null,
      to: previous?.phase ?? 'Unknown',
      timedOut: true,
      message: msg,
    });
  }
}

/** A PVB we registered but that does not exist: recorded as Failed (counted once). */
export async function recordPvbMissing(
  deps: Pick<PipelineDeps, 'state' | 'metrics'>,
  backupName: string,
  pvbName: string,
  previous: PvbStateRecord | undefined,
  why: string,
): Promise<void> {
  await deps.state.updatePvb(backupName, pvbName, { phase: 'Failed', message: why });
  const counted = await deps.state.countOnce(backupName, `pvb:${pvbName}`, 'pvbsFailed');
  if (counted) {
    (deps.metrics ?? NO_PIPELINE_METRICS).podVolumeBackupEnded({ phase: 'Failed' });
    await deps.state.recordProblem(backupName, {
      level: 'error',
      onceKey: `pvb:${pvbName}`,
      msg: `pod volume backup failed: ${why}`,
      pvb: pvbName,
      blockId: previous?.blockId,
      namespace: previous?.podNamespace,
    });
    await deps.state.appendEvent(backupName, 'pvb.phase', {
      pvb: pvbName,
      blockId: previous?.blockId,
      from: previous?.phase ?? null,
      to: 'Failed',
      message: why,
    });
  }
}

/** A PVB is done for waiting purposes: terminal, or given up on. */
export function isPvbSettled(record: PvbStateRecord | undefined): boolean {
  if (!record) return false;
  return record.timedOut === true || record.phase === 'Completed' || record.phase === 'Failed' || record.phase === 'Canceled';
}
