import { cappedBackoffMs } from '@stowage/queue';
import { z } from 'zod';
import type { PipelineDeps } from '../deps.js';
import { PipelineError, PipelineErrorCode } from '../errors.js';
import type { PvbInformerHub } from './pvb-informer-hub.js';
import { isPvbSettled, type PvbWatchResult, recordPvbGaveUp, recordPvbMissing, recordPvbObservation } from './pvb-observation.js';

/** Poll state kept between re-parks (in the pvb-watch job's data under `watch`). */
export const watchProgressSchema = z.object({
  polls: z.number().int().nonnegative().default(0),
  lastGetAt: z.number().default(0),
  cancelAskedAt: z.number().optional(),
  cancelReason: z.enum(['deadline', 'canceled', 'orphaned']).optional(),
});
export type WatchProgress = z.infer<typeof watchProgressSchema>;

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

/**
 * One look at a PVB: read it (the informer cache when healthy, a real GET at least every
 * `pvbRealReadEveryMs` and always before giving up), record what changed, and decide: done
 * (terminal, missing, or given up after cancel) or wait `delayMs` more (capped backoff). At the
 * deadline, on a backup cancel, or for an orphan (`orphanedBecause`) it asks the PVB to cancel
 * once, then waits at most `pvbCancelWaitMs` for it to stop. Shared by the pvb-watch job, the
 * post-hooks job (orphans) and inline mode.
 */
export async function stepPvbWait(
  deps: Pick<PipelineDeps, 'state' | 'pvbs' | 'clock' | 'config' | 'logger'>,
  hub: PvbInformerHub | undefined,
  input: PvbWaitInput,
  progressIn: WatchProgress,
): Promise<PvbWaitStep> {
  const { state, config } = deps;
  const progress: WatchProgress = { ...progressIn };
  const now = deps.clock.now();
  const [record, previous] = await Promise.all([state.getBackup(input.backupName), state.getPvb(input.backupName, input.pvbName)]);
  if (!record) throw new PipelineError(PipelineErrorCode.backupMissing, `backup ${input.backupName} has no record`);
  if (previous && isPvbSettled(previous)) return { kind: 'done', result: resultOf(input.pvbName, previous) };

  const cancelWaitOver = progress.cancelAskedAt !== undefined && now - progress.cancelAskedAt >= config.pvbCancelWaitMs;
  const cached = hub?.cached(input.pvbName);
  const mustGet =
    cached === undefined || now - progress.lastGetAt >= config.pvbRealReadEveryMs || cancelWaitOver || now >= input.deadlineAt;
  let pvb = cached;
  if (mustGet) {
    pvb = await deps.pvbs.getPvb(input.pvbName);
    progress.lastGetAt = now;
  }
  if (!pvb) {
    const why = input.orphanedBecause
      ? `never created or deleted (${input.orphanedBecause})`
      : 'the PodVolumeBackup object does not exist (deleted?)';
    await recordPvbMissing(deps, input.backupName, input.pvbName, previous, why);
    return { kind: 'done', result: { pvb: input.pvbName, phase: 'Failed', missing: true } };
  }
  const seen = await recordPvbObservation(deps, input.backupName, pvb, previous);
  if (seen.terminal) return { kind: 'done', result: { pvb: input.pvbName, phase: seen.phase } };

  const windDown: WatchProgress['cancelReason'] =
    record.cancelRequestedAt !== undefined
      ? 'canceled'
      : now >= input.deadlineAt
        ? 'deadline'
        : input.orphanedBecause !== undefined
          ? 'orphaned'
          : undefined;
  if (windDown && progress.cancelAskedAt === undefined) {
    if (pvb.spec.cancel !== true) await deps.pvbs.requestCancel(input.pvbName);
    progress.cancelAskedAt = now;
    progress.cancelReason = windDown;
    await state.updatePvb(input.backupName, input.pvbName, { cancelRequested: true, cancelAskedAt: now });
    const msg =
      windDown === 'deadline'
        ? `fs-backup deadline passed with PVB ${input.pvbName} in phase ${seen.phase}; asked it to cancel`
        : windDown === 'orphaned'
          ? `PVB ${input.pvbName} (phase ${seen.phase}) has no watcher any more (${input.orphanedBecause}); asked it to cancel, post hooks wait up to ${config.pvbCancelWaitMs} ms for it to stop`
          : `backup canceled; asked PVB ${input.pvbName} (phase ${seen.phase}) to cancel`;
    if (windDown === 'deadline') {
      await state.recordProblem(input.backupName, {
        level: 'error',
        onceKey: `pvb-deadline:${input.pvbName}`,
        msg,
        pvb: input.pvbName,
        blockId: previous?.blockId,
        namespace: previous?.podNamespace,
      });
    } else {
      const level = windDown === 'orphaned' ? 'warn' : 'info';
      await state.log(input.backupName, { level, msg, pvb: input.pvbName, blockId: previous?.blockId });
    }
  } else if (progress.cancelAskedAt !== undefined && cancelWaitOver) {
    await recordPvbGaveUp(
      deps,
      input.backupName,
      input.pvbName,
      previous,
      progress.cancelReason ?? 'deadline',
      now - progress.cancelAskedAt,
    );
    return { kind: 'done', result: { pvb: input.pvbName, phase: seen.phase, timedOut: true } };
  }

  // With a healthy informer cache the hub promotes this job the moment the PVB turns terminal, so
  // early short polls only re-read the cache and re-park (~20 Redis commands each): wait the cap.
  // Without a usable cache (or a watch that stays quiet) polling backs off from the base as before.
  const informerWillPromote = !mustGet && hub?.healthy() === true;
  let delayMs = informerWillPromote
    ? config.pvbPollMaxMs
    : cappedBackoffMs(progress.polls, { baseMs: config.pvbPollBaseMs, maxMs: config.pvbPollMaxMs });
  // Wake up exactly at the deadline, and when the cancel wait ends, to act on time.
  if (now < input.deadlineAt) delayMs = Math.min(delayMs, input.deadlineAt - now);
  if (progress.cancelAskedAt !== undefined) delayMs = Math.min(delayMs, Math.max(0, progress.cancelAskedAt + config.pvbCancelWaitMs - now));
  progress.polls++;
  return { kind: 'wait', delayMs: Math.max(delayMs, 1), progress };
}

function resultOf(pvbName: string, rec: { phase: string; timedOut?: boolean | undefined }): PvbWatchResult {
  return rec.timedOut ? { pvb: pvbName, phase: rec.phase, timedOut: true } : { pvb: pvbName, phase: rec.phase };
}
