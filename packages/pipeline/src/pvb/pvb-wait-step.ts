import { isPvbTerminal, type PodVolumeBackup } from '@stowage/kube';
import type { PipelineDeps } from '../deps.js';
import { PipelineError, PipelineErrorCode } from '../errors.js';
import type { PvbStateRecord } from '../state/backup-state.js';
import { stepVolumeOpWait, type VolumeOpTracker, type WatchProgress } from '../volume-ops/volume-op-wait-step.js';
import type { PvbInformerHub } from './pvb-informer-hub.js';
import { isPvbSettled, type PvbWatchResult, recordPvbGaveUp, recordPvbMissing, recordPvbObservation } from './pvb-observation.js';

export { type WatchProgress, watchProgressSchema } from '../volume-ops/volume-op-wait-step.js';

export interface PvbWaitInput {
  backupName: string;
  pvbName: string;
  /** The backup's fs-backup deadline (epoch ms). */
  deadlineAt: number;
  /**
   * Why nobody watches this PVB any more (its item-block or pvb-watch job failed for good): it is
   * wound down at once, like at the deadline — asked to cancel, waited for at most `pvbCancelWaitMs`.
   */
  orphanedBecause?: string | undefined;
}

export type PvbWaitStep = { kind: 'done'; result: PvbWatchResult } | { kind: 'wait'; delayMs: number; progress: WatchProgress };

type PvbDeps = Pick<PipelineDeps, 'state' | 'pvbs' | 'clock' | 'config' | 'logger'>;

/** How a backup follows its PVBs (the PVB side of stepVolumeOpWait). */
export function pvbTracker(deps: PvbDeps): VolumeOpTracker<PodVolumeBackup, PvbStateRecord> {
  const { state, config } = deps;
  return {
    label: 'PodVolumeBackup',
    async readContext(backupName, pvbName) {
      const [record, previous] = await Promise.all([state.getBackup(backupName), state.getPvb(backupName, pvbName)]);
      if (!record) throw new PipelineError(PipelineErrorCode.backupMissing, `backup ${backupName} has no record`);
      return { cancelRequested: record.cancelRequestedAt !== undefined, previous };
    },
    isSettled: isPvbSettled,
    get: (name) => deps.pvbs.getPvb(name),
    isTerminal: isPvbTerminal,
    phaseOf: (pvb) => pvb.status?.phase ?? 'New',
    cancelAsked: (pvb) => pvb.spec.cancel === true,
    requestCancel: (name) => deps.pvbs.requestCancel(name),
    async recordSeen(backupName, pvb, previous) {
      await recordPvbObservation(deps, backupName, pvb, previous);
    },
    recordMissing: (backupName, pvbName, previous, why) => recordPvbMissing(deps, backupName, pvbName, previous, why),
    recordGaveUp: (backupName, pvbName, previous, reason, waitedMs) =>
      recordPvbGaveUp(deps, backupName, pvbName, previous, reason, waitedMs),
    async recordCancelAsked(backupName, pvbName, previous, reason, phase, at, orphanedBecause) {
      await state.updatePvb(backupName, pvbName, { cancelRequested: true, cancelAskedAt: at });
      const msg =
        reason === 'deadline'
          ? `fs-backup deadline passed with PVB ${pvbName} in phase ${phase}; asked it to cancel`
          : reason === 'orphaned'
            ? `PVB ${pvbName} (phase ${phase}) has no watcher any more (${orphanedBecause}); asked it to cancel, post hooks wait up to ${config.pvbCancelWaitMs} ms for it to stop`
            : `backup canceled; asked PVB ${pvbName} (phase ${phase}) to cancel`;
      if (reason === 'deadline') {
        await state.recordProblem(backupName, {
          level: 'error',
          onceKey: `pvb-deadline:${pvbName}`,
          msg,
          pvb: pvbName,
          blockId: previous?.blockId,
          namespace: previous?.podNamespace,
        });
      } else {
        await state.log(backupName, { level: reason === 'orphaned' ? 'warn' : 'info', msg, pvb: pvbName, blockId: previous?.blockId });
      }
    },
  };
}

/**
 * One look at a PVB (stepVolumeOpWait with the PVB tracker). Shared by the pvb-watch job, the
 * post-hooks job (orphans) and waitForPvbEnd.
 */
export async function stepPvbWait(
  deps: PvbDeps,
  hub: PvbInformerHub | undefined,
  input: PvbWaitInput,
  progressIn: WatchProgress,
): Promise<PvbWaitStep> {
  const step = await stepVolumeOpWait(
    deps,
    pvbTracker(deps),
    hub,
    { runName: input.backupName, opName: input.pvbName, deadlineAt: input.deadlineAt, orphanedBecause: input.orphanedBecause },
    progressIn,
  );
  return step.kind === 'done' ? { kind: 'done', result: { pvb: input.pvbName, ...step.result } } : step;
}

/**
 * Looks at a PVB until it has ended (its end recorded, as the post-hooks job's watch records it)
 * or the deadline has passed, holding the caller: for a BlockWait (deps.ts), not the pipeline's
 * own jobs, which park instead.
 */
export async function waitForPvbEnd(
  deps: PvbDeps,
  hub: PvbInformerHub | undefined,
  input: Omit<PvbWaitInput, 'orphanedBecause'>,
): Promise<void> {
  let progress: WatchProgress = { polls: 0, lastGetAt: 0 };
  for (;;) {
    const step = await stepPvbWait(deps, hub, input, progress);
    if (step.kind === 'done') return;
    progress = step.progress;
    if (!hub) {
      await new Promise((r) => setTimeout(r, step.delayMs));
      continue;
    }
    // Register first, then look again: an event that arrived while the step above was recording
    // what it saw has no waiter to wake, and would cost the whole delay.
    const changed = hub.waitForChange(input.pvbName, step.delayMs);
    const current = hub.cached(input.pvbName);
    if (!(current && isPvbTerminal(current))) await changed;
  }
}
