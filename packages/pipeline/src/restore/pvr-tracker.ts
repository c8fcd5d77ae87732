import { isVolumeOperationTerminal, type PodVolumeRestore, type PvrClient, pvrLabels } from '@stowage/kube';
import { JobName, restoreJobIds } from '@stowage/queue';
import { parseStorageCost } from '@stowage/storage';
import type { Queue } from 'bullmq';
import type { PipelineDeps, PipelineLogger } from '../deps.js';
import { PipelineError, PipelineErrorCode } from '../errors.js';
import { groupPromotion, PromotingInformerHub } from '../informers/promoting-informer-hub.js';
import { NO_PIPELINE_METRICS } from '../metrics.js';
import { storageCountEntries } from '../state/storage-cost.js';
import type { VolumeOpTracker } from '../volume-ops/volume-op-wait-step.js';
import type { PvrStateRecord, RestoreState } from './restore-state.js';

export function isPvrSettled(record: PvrStateRecord | undefined): boolean {
  if (!record) return false;
  return record.timedOut === true || record.phase === 'Completed' || record.phase === 'Failed' || record.phase === 'Canceled';
}

/** How a restore follows its PVRs (the PVR side of stepVolumeOpWait); counters `pvrs<Phase>` once per PVR. */
export function pvrTracker(
  deps: Pick<PipelineDeps, 'config' | 'metrics'> & { restores: RestoreState; pvrs: PvrClient },
): VolumeOpTracker<PodVolumeRestore, PvrStateRecord> {
  const { restores: state } = deps;
  const where = (name: string, previous: PvrStateRecord | undefined) => ({
    pvr: name,
    pod: previous ? `${previous.podNamespace}/${previous.podName}` : undefined,
    volume: previous?.volume,
    namespace: previous?.podNamespace,
  });
  const terminal = async (restoreName: string, name: string, previous: PvrStateRecord | undefined, phase: string, message: string) => {
    const counted = await state.countOnce(restoreName, `pvr:${name}`, `pvrs${phase}`);
    if (counted) (deps.metrics ?? NO_PIPELINE_METRICS).podVolumeRestoreEnded({ phase });
    if (counted && phase !== 'Completed') {
      await state.recordProblem(restoreName, { level: 'error', onceKey: `pvr:${name}`, msg: message, ...where(name, previous) });
    }
  };
  return {
    label: 'PodVolumeRestore',
    async readContext(restoreName, pvrName) {
      const [record, previous] = await Promise.all([state.getRestore(restoreName), state.getPvr(restoreName, pvrName)]);
      if (!record) throw new PipelineError(PipelineErrorCode.backupMissing, `restore ${restoreName} has no record`);
      return { cancelRequested: record.cancelRequestedAt !== undefined, previous };
    },
    isSettled: isPvrSettled,
    get: (name) => deps.pvrs.get(name),
    isTerminal: isVolumeOperationTerminal,
    phaseOf: (pvr) => pvr.status?.phase ?? 'New',
    cancelAsked: (pvr) => pvr.spec.cancel === true,
    requestCancel: (name) => deps.pvrs.requestCancel(name),
    async recordSeen(restoreName, pvr, previous) {
      const status = pvr.status ?? {};
      const phase = status.phase ?? 'New';
      const name = pvr.metadata.name;
      const changedPhase = previous?.phase !== phase;
      const writes: Promise<unknown>[] = [];
      if (changedPhase || previous?.bytesDone !== status.progress?.bytesDone || previous?.message !== status.message) {
        writes.push(
          state.updatePvr(
            restoreName,
            name,
            {
              phase,
              message: status.message,
              node: status.node,
              totalBytes: status.progress?.totalBytes,
              bytesDone: status.progress?.bytesDone,
              startTimestamp: status.startTimestamp,
              completionTimestamp: status.completionTimestamp,
            },
            { registered: previous !== undefined },
          ),
        );
      }
      if (changedPhase) {
        // A PVR that ended otherwise than Completed says why on its event (what progress lines show).
        const why = phase !== 'Completed' && isVolumeOperationTerminal(pvr) && status.message ? { message: status.message } : {};
        writes.push(
          state.appendEvent(restoreName, 'pvr.phase', { ...where(name, previous), from: previous?.phase ?? null, to: phase, ...why }),
        );
      }
      if (isVolumeOperationTerminal(pvr)) {
        const what = phase === 'Completed' ? 'completed' : phase === 'Failed' ? 'failed' : 'canceled';
        // Independent of the record's update: one round trip's wait (the hook lag is a chain of such waits).
        writes.push(terminal(restoreName, name, previous, phase, `pod volume restore ${what}: ${status.message ?? 'no message'}`));
        // What the node agent asked of storage for it, added to the restore's once.
        const cost = parseStorageCost(status.storage);
        if (cost) writes.push(state.countOnceMany(restoreName, storageCountEntries(`storage:pvr:${name}`, cost)));
      }
      await Promise.all(writes);
    },
    async recordMissing(restoreName, pvrName, previous, why) {
      await state.updatePvr(restoreName, pvrName, { phase: 'Failed', message: why });
      await terminal(restoreName, pvrName, previous, 'Failed', `pod volume restore failed: ${why}`);
      await state.appendEvent(restoreName, 'pvr.phase', {
        ...where(pvrName, previous),
        from: previous?.phase ?? null,
        to: 'Failed',
        message: why,
      });
    },
    async recordCancelAsked(restoreName, pvrName, previous, reason, phase, at, orphanedBecause) {
      await state.updatePvr(restoreName, pvrName, { cancelRequested: true, cancelAskedAt: at });
      const why = {
        deadline: 'itemOperationTimeout passed',
        canceled: 'restore canceled',
        orphaned: `no watcher any more (${orphanedBecause})`,
      }[reason];
      const msg = `${why}; asked PVR ${pvrName} (phase ${phase}) to cancel`;
      if (reason === 'canceled') await state.log(restoreName, { level: 'info', msg, pvr: pvrName });
      else
        await state.recordProblem(restoreName, { level: 'error', onceKey: `pvr-wind-down:${pvrName}`, msg, ...where(pvrName, previous) });
    },
    async recordGaveUp(restoreName, pvrName, previous, reason, waitedMs) {
      const msg = `PVR ${pvrName} was asked to cancel (${reason}) and did not stop within ${waitedMs} ms`;
      await state.updatePvr(restoreName, pvrName, { timedOut: true, message: msg });
      await terminal(restoreName, pvrName, previous, 'TimedOut', msg);
    },
  };
}

/** The id of the restore-hooks job of the restored pod a PVR writes to, or undefined. */
function restoreHooksJobIdOf(pvr: PodVolumeRestore): string | undefined {
  const restoreName = pvr.metadata.labels?.[pvrLabels.restoreName];
  const pod = pvr.spec?.pod;
  if (!restoreName || !pod?.namespace || !pod.name) return undefined;
  try {
    return restoreJobIds.hooks(restoreName, pod.namespace, pod.name);
  } catch {
    return undefined; // a name no restore-hooks job id can hold: no job to promote
  }
}

/**
 * The process's PVR informer: a restored pod's restore-hooks job waits for all of the pod's PVRs,
 * so it is promoted when a PVR ends and every PVR of the same pod in the cache has ended too (the
 * PVB hub's promotion by block, by pod). Restores started by older versions watch each PVR in a
 * pvr-watch job: those are not promoted (they poll), and promoting their restore-hooks job, which
 * waits for its children, is a no-op.
 */
export class PvrInformerHub extends PromotingInformerHub<PodVolumeRestore> {
  constructor(opts: { pvrs: PvrClient; jobQueue?: Queue | undefined; logger: PipelineLogger }) {
    const { pvrs, ...rest } = opts;
    const nameOf = (pvr: PodVolumeRestore) => pvr.metadata.name;
    super({
      ...rest,
      source: {
        label: 'PVR',
        namespace: pvrs.namespace,
        watch: (options) => pvrs.watch(options),
        nameOf,
        ...groupPromotion({ nameOf, groupOf: restoreHooksJobIdOf, hasEnded: isVolumeOperationTerminal }),
        jobIdOf: restoreHooksJobIdOf,
        jobName: JobName.runRestoreHooks,
      },
    });
  }
}
