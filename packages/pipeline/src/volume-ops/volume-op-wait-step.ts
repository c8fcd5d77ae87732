import { cappedBackoffMs } from '@stowage/queue';
import { z } from 'zod';
import type { PipelineDeps } from '../deps.js';
import type { PromotingInformerHub } from '../informers/promoting-informer-hub.js';

/** Poll state kept between re-parks (in a watch job's data under `watch`). */
export const watchProgressSchema = z.object({
  polls: z.number().int().nonnegative().default(0),
  lastGetAt: z.number().default(0),
  cancelAskedAt: z.number().optional(),
  cancelReason: z.enum(['deadline', 'canceled', 'orphaned']).optional(),
});
export type WatchProgress = z.infer<typeof watchProgressSchema>;

/**
 * Whether a look changed the poll state of an operation still open (`after`) from what the job's
 * data holds (`before`): a re-park rewrites the job's data only then (an informer-paced wait leaves
 * it as it was). Entries of operations that settled meanwhile are never read again.
 */
export function watchProgressChanged(
  before: Readonly<Record<string, WatchProgress>>,
  after: Readonly<Record<string, WatchProgress>>,
): boolean {
  return Object.entries(after).some(([name, p]) => {
    const b = before[name];
    return (
      b === undefined ||
      b.polls !== p.polls ||
      b.lastGetAt !== p.lastGetAt ||
      b.cancelAskedAt !== p.cancelAskedAt ||
      b.cancelReason !== p.cancelReason
    );
  });
}
export type WindDownReason = NonNullable<WatchProgress['cancelReason']>;

/** What a watch job returns (kept small: it lives in its parent's hash). */
export interface VolumeOpWatchResult {
  phase: string;
  /** We stopped waiting (deadline, cancel or orphan) before the operation stopped. */
  timedOut?: boolean;
  /** The object vanished. */
  missing?: boolean;
}

/** What the run remembers of one operation (PVB or PVR record in its run state). */
export interface VolumeOpPrevious {
  phase?: string | undefined;
  timedOut?: boolean | undefined;
}

/**
 * What differs between watching a PodVolumeBackup and a PodVolumeRestore: how to read and
 * cancel the object, and how the run records what was seen. The waiting itself — cache or GET,
 * deadline, cancel wind-down, backoff — is stepVolumeOpWait, one implementation for both.
 */
export interface VolumeOpTracker<T, P extends VolumeOpPrevious> {
  /** For messages: `PVB`, `PVR`. */
  label: string;
  /**
   * The run's state of the operation, and whether the run asked to cancel (throws when the run is
   * gone) — or how to ask, when that costs a read only a look at a running operation needs.
   */
  readContext(runName: string, opName: string): Promise<{ cancelRequested: boolean | (() => Promise<boolean>); previous: P | undefined }>;
  isSettled(previous: P | undefined): boolean;
  get(opName: string): Promise<T | undefined>;
  isTerminal(object: T): boolean;
  phaseOf(object: T): string;
  cancelAsked(object: T): boolean;
  requestCancel(opName: string): Promise<unknown>;
  /** Records what was seen (phase, progress, events, once-counters); returns the phase. */
  recordSeen(runName: string, object: T, previous: P | undefined): Promise<void>;
  recordMissing(runName: string, opName: string, previous: P | undefined, why: string): Promise<void>;
  recordCancelAsked(
    runName: string,
    opName: string,
    previous: P | undefined,
    reason: WindDownReason,
    phase: string,
    at: number,
    orphanedBecause?: string,
  ): Promise<void>;
  recordGaveUp(runName: string, opName: string, previous: P | undefined, reason: WindDownReason, waitedMs: number): Promise<void>;
}

export interface VolumeOpWaitInput {
  runName: string;
  opName: string;
  /** When the run stops waiting for volume data (epoch ms). */
  deadlineAt: number;
  /**
   * Why nobody watches this operation any more (its creating or watching job failed for good): it
   * is wound down at once, like at the deadline — asked to cancel, waited for at most `pvbCancelWaitMs`.
   */
  orphanedBecause?: string | undefined;
  /**
   * The hub promotes the watching job when the operation ends (a post-hooks or restore-hooks job,
   * by its group): with a healthy cache it may then sleep until its next real GET is due. A legacy
   * pvb-watch or pvr-watch job is promoted by nobody and polls at the cap.
   */
  promotedByHub?: boolean | undefined;
  /**
   * A look that finds the operation terminal returns the record of it sent but not confirmed
   * (`recording`), for the caller to await before its job ends: what the caller writes next (the
   * hooks' own records) follows it on the same connection, so the two share one round trip.
   */
  recordEndLater?: boolean | undefined;
}

export type VolumeOpWaitStep =
  | { kind: 'done'; result: VolumeOpWatchResult; recording?: Promise<void> }
  | { kind: 'wait'; delayMs: number; progress: WatchProgress };

/**
 * One look at a volume operation: read it (the informer cache when healthy, a real GET at least
 * every `pvbRealReadEveryMs` and always before giving up), record what changed, and decide: done
 * (terminal, missing, or given up after cancel) or wait `delayMs` more (capped backoff). At the
 * deadline, on a run cancel, or for an orphan it asks the operation to cancel once, then waits
 * at most `pvbCancelWaitMs` for it to stop. Shared by the post-hooks and restore-hooks jobs
 * (watchVolumeOps), the legacy pvb-watch and pvr-watch jobs, and inline mode.
 */
export async function stepVolumeOpWait<T, P extends VolumeOpPrevious>(
  deps: Pick<PipelineDeps, 'clock' | 'config'>,
  tracker: VolumeOpTracker<T, P>,
  hub: PromotingInformerHub<T> | undefined,
  input: VolumeOpWaitInput,
  progressIn: WatchProgress,
): Promise<VolumeOpWaitStep> {
  const { config } = deps;
  const progress: WatchProgress = { ...progressIn };
  const now = deps.clock.now();
  const { cancelRequested, previous } = await tracker.readContext(input.runName, input.opName);
  if (previous && tracker.isSettled(previous)) return { kind: 'done', result: resultOf(previous) };

  const cancelWaitOver = progress.cancelAskedAt !== undefined && now - progress.cancelAskedAt >= config.pvbCancelWaitMs;
  const cached = hub?.cached(input.opName);
  // The GETs guard against a cache that missed a change; an operation it shows terminal has none
  // left to miss (terminal is final), so its end is taken from the cache: no API round trip
  // between an operation's end and the hooks that wait for it.
  const mustGet =
    cached === undefined ||
    (!tracker.isTerminal(cached) && (now - progress.lastGetAt >= config.pvbRealReadEveryMs || cancelWaitOver || now >= input.deadlineAt));
  let object = cached;
  if (mustGet) {
    object = await tracker.get(input.opName);
    progress.lastGetAt = now;
  }
  if (!object) {
    const why = input.orphanedBecause
      ? `never created or deleted (${input.orphanedBecause})`
      : `the ${tracker.label} object does not exist (deleted?)`;
    await tracker.recordMissing(input.runName, input.opName, previous, why);
    return { kind: 'done', result: { phase: 'Failed', missing: true } };
  }
  const recording = tracker.recordSeen(input.runName, object, previous);
  const phase = tracker.phaseOf(object);
  if (tracker.isTerminal(object)) {
    if (!input.recordEndLater) {
      await recording;
      return { kind: 'done', result: { phase } };
    }
    recording.catch(() => {}); // the caller awaits it (its failure fails the job); not unhandled meanwhile
    return { kind: 'done', result: { phase }, recording };
  }
  await recording;

  const canceled = typeof cancelRequested === 'function' ? await cancelRequested() : cancelRequested;
  const windDown: WindDownReason | undefined = canceled
    ? 'canceled'
    : now >= input.deadlineAt
      ? 'deadline'
      : input.orphanedBecause !== undefined
        ? 'orphaned'
        : undefined;
  if (windDown && progress.cancelAskedAt === undefined) {
    if (!tracker.cancelAsked(object)) await tracker.requestCancel(input.opName);
    progress.cancelAskedAt = now;
    progress.cancelReason = windDown;
    await tracker.recordCancelAsked(input.runName, input.opName, previous, windDown, phase, now, input.orphanedBecause);
  } else if (progress.cancelAskedAt !== undefined && cancelWaitOver) {
    await tracker.recordGaveUp(input.runName, input.opName, previous, progress.cancelReason ?? 'deadline', now - progress.cancelAskedAt);
    return { kind: 'done', result: { phase, timedOut: true } };
  }

  // With a healthy informer cache a promoting hub wakes this job the moment the operation turns
  // terminal, and a wake before the next real GET is due would only re-read that same cache and
  // re-park (~40 Redis commands for a post-hooks job): wait until the GET is due (at least the
  // poll cap) — also right after a GET that was merely due, which changes nothing about who wakes
  // the job. The poll count, which only paces polling without a cache, stays as it was. Without a
  // usable cache (unhealthy, or not holding the operation yet) polling backs off from the base.
  const informerWillPromote = input.promotedByHub === true && cached !== undefined && hub?.healthy() === true;
  let delayMs = informerWillPromote
    ? Math.max(config.pvbPollMaxMs, progress.lastGetAt + config.pvbRealReadEveryMs - now)
    : cappedBackoffMs(progress.polls, { baseMs: config.pvbPollBaseMs, maxMs: config.pvbPollMaxMs });
  // Wake up exactly at the deadline, and when the cancel wait ends, to act on time.
  if (now < input.deadlineAt) delayMs = Math.min(delayMs, input.deadlineAt - now);
  if (progress.cancelAskedAt !== undefined) delayMs = Math.min(delayMs, Math.max(0, progress.cancelAskedAt + config.pvbCancelWaitMs - now));
  if (!informerWillPromote) progress.polls++;
  return { kind: 'wait', delayMs: Math.max(delayMs, 1), progress };
}

function resultOf(rec: VolumeOpPrevious): VolumeOpWatchResult {
  const phase = rec.phase ?? 'Unknown';
  return rec.timedOut ? { phase, timedOut: true } : { phase };
}
