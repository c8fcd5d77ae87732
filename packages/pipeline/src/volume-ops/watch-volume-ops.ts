import { cappedBackoffMs, promoteParked, repark } from '@stowage/queue';
import type { Job } from 'bullmq';
import type { PipelineDeps } from '../deps.js';
import type { PromotingInformerHub } from '../informers/promoting-informer-hub.js';
import type { PipelineRuntime } from '../runtime.js';
import {
  stepVolumeOpWait,
  type VolumeOpPrevious,
  type VolumeOpTracker,
  type VolumeOpWaitStep,
  type VolumeOpWatchResult,
  type WatchProgress,
} from './volume-op-wait-step.js';

/** One volume operation of the group and what the run's state says of it (read by the caller). */
export interface WatchedOp<P> {
  name: string;
  previous: P | undefined;
  /** Why nobody else watches it any more (a job that should have failed for good): wound down at once. */
  orphanedBecause?: string | undefined;
}

export type VolumeOpsWatch =
  | {
      settled: true;
      ended: ReadonlyMap<string, VolumeOpWatchResult>;
      /**
       * The records of the operations seen ending: sent, not yet confirmed. The caller awaits it
       * before its job ends; what it writes meanwhile (the hooks' records before their exec)
       * follows on the same connection, so the hooks wait one round trip for both, not two.
       */
      recording: Promise<void>;
    }
  | {
      settled: false;
      recheckInMs: number;
      progress: Record<string, WatchProgress>;
      open: string;
      /** The look saw a cancel (and asked the open operations to stop): no cancel to look for after parking. */
      cancelSeen: boolean;
    };

/**
 * A job that waits for a group of volume operations (a block's PVBs for its post hooks, a restored
 * pod's PVRs for its restore hooks) watches them itself, one job instead of one watch job per
 * operation: one look (stepVolumeOpWait: the informer cache when healthy, a GET when due) at each
 * operation not settled in the state the caller read, recording what it saw. Settled: what each
 * looked-at operation ended as (`ended`; the settled ones it passed over are not in it). Else the
 * poll state of the open ones and the soonest re-check, for the caller to re-park with.
 */
export async function watchVolumeOps<T, P extends VolumeOpPrevious>(
  deps: Pick<PipelineDeps, 'clock' | 'config' | 'logger'>,
  tracker: VolumeOpTracker<T, P>,
  hub: PromotingInformerHub<T> | undefined,
  input: {
    runName: string;
    ops: ReadonlyArray<WatchedOp<P>>;
    /** Or how to read it: only a look at an operation still running asks (once for the group). */
    cancelRequested: boolean | (() => Promise<boolean>);
    deadlineAt: number;
    /** When the caller last read the operations from the API server (a first look may then use the cache). */
    readAt?: number | undefined;
    progress: Readonly<Record<string, WatchProgress>>;
  },
): Promise<VolumeOpsWatch> {
  const ended = new Map<string, VolumeOpWatchResult>();
  const progress: Record<string, WatchProgress> = {};
  const waits: Array<{ ms: number; open: string }> = [];
  const recordings: Promise<void>[] = [];
  const asked = input.cancelRequested;
  let read: Promise<boolean> | undefined;
  const cancelRequested = typeof asked === 'function' ? () => (read ??= asked()) : asked;
  await Promise.all(
    input.ops.map(async ({ name, previous, orphanedBecause }) => {
      if (tracker.isSettled(previous)) return;
      // The caller read the state just now: no read per operation.
      const looking = { ...tracker, readContext: async () => ({ cancelRequested, previous }) };
      const progressIn = input.progress[name] ?? { polls: 0, lastGetAt: input.readAt ?? 0 };
      const step = await stepVolumeOpWait(
        deps,
        looking,
        hub,
        // The hub promotes the group's job when its last operation ends.
        {
          runName: input.runName,
          opName: name,
          deadlineAt: input.deadlineAt,
          orphanedBecause,
          promotedByHub: hub !== undefined,
          recordEndLater: true,
        },
        progressIn,
      ).catch((err: unknown) =>
        lookFailed(deps, tracker, { runName: input.runName, name, previous, deadlineAt: input.deadlineAt, progress: progressIn, err }),
      );
      if (step.kind === 'done') {
        ended.set(name, step.result);
        if (step.recording) recordings.push(step.recording);
        return;
      }
      progress[name] = step.progress;
      waits.push({ ms: step.delayMs, open: name });
    }),
  );
  const recording = Promise.all(recordings).then(() => undefined);
  const soonest = waits.sort((a, b) => a.ms - b.ms)[0];
  if (!soonest) {
    recording.catch(() => {}); // awaited by the caller, as each look's (stepVolumeOpWait)
    return { settled: true, ended, recording };
  }
  // The job re-parks: an end whose record failed is looked at (and recorded) again at its next
  // wake, as a look that failed would be (lookFailed).
  await recording.catch((err: unknown) =>
    deps.logger.warn({ run: input.runName, err }, `${tracker.label} end not recorded; looking again later`),
  );
  const cancelSeen = typeof asked === 'boolean' ? asked : read !== undefined && (await read.catch(() => false));
  return { settled: false, recheckInMs: soonest.ms, progress, open: soonest.open, cancelSeen };
}

/** How a hooks job just parked looks again at what its wake-ups may have missed (lookAgainOnceParked). */
export interface ParkedJobWake {
  /** Promotes the job if the informer's cache already shows what it waits for. */
  recheck?: (() => Promise<void> | undefined) | undefined;
  /** The job saw the cancel already (and acted on it): no flag to read. */
  cancelSeen?: boolean | undefined;
  cancelRequested: () => Promise<boolean>;
}

/**
 * A hooks job parked just now looks once more at what a wake-up may have missed while it was
 * running or not added yet (a wake-up finds it not parked and does nothing): an end its informer
 * cached meanwhile (`recheck`), and a cancel asked meanwhile — then it is promoted at once, so it
 * asks its operations to stop now rather than at its timer (up to pvbRealReadEveryMs later). One
 * flag read, none when the job saw the cancel. A failed check leaves the job to its timer, with a
 * warning. Used after every re-park (reparkWatching) and after restore-items adds a parked
 * restore-hooks job.
 */
export async function lookAgainOnceParked(
  rt: Pick<PipelineRuntime, 'deps' | 'hooksQueue'>,
  job: { name: string; id: string },
  wake: ParkedJobWake,
): Promise<void> {
  const cancelAsked = async () => {
    if (wake.cancelSeen) return;
    try {
      if (await wake.cancelRequested()) await promoteParked(rt.hooksQueue(), job.name, job.id);
    } catch (err) {
      rt.deps.logger.warn({ jobId: job.id, err }, 'could not look for a cancel after parking; the job wakes at its timer');
    }
  };
  await Promise.all([wake.recheck?.(), cancelAsked()]);
}

/** Re-parks a hooks job whose look found its volume operations (or its container) still not ready, then lookAgainOnceParked. */
export function reparkWatching(
  rt: Pick<PipelineRuntime, 'deps' | 'hooksQueue'>,
  job: Job,
  token: string | undefined,
  delayMs: number,
  wake: ParkedJobWake,
): Promise<never> {
  return repark(job, token, delayMs, async () => {
    if (job.id) await lookAgainOnceParked(rt, { name: job.name, id: job.id }, wake);
  });
}

/**
 * A look at an operation failed (an API or Redis error): the job must not spend its few attempts
 * on blips over a long copy — a hooks job that fails for good runs no hook — so the look is
 * retried at the next wake (capped backoff). Past the deadline and the cancel wait, the operation
 * is given up on (recorded timed out, an error), so the hooks still run.
 */
async function lookFailed<T, P extends VolumeOpPrevious>(
  deps: Pick<PipelineDeps, 'clock' | 'config' | 'logger'>,
  tracker: VolumeOpTracker<T, P>,
  input: { runName: string; name: string; previous: P | undefined; deadlineAt: number; progress: WatchProgress; err: unknown },
): Promise<VolumeOpWaitStep> {
  const now = deps.clock.now();
  const message = (input.err as Error)?.message ?? String(input.err);
  if (now >= input.deadlineAt + deps.config.pvbCancelWaitMs) {
    await tracker.recordGaveUp(input.runName, input.name, input.previous, 'deadline', now - input.deadlineAt);
    return { kind: 'done', result: { phase: input.previous?.phase ?? 'Unknown', timedOut: true } };
  }
  deps.logger.warn({ run: input.runName, op: input.name, err: message }, `${tracker.label} look failed; looking again later`);
  const delayMs = cappedBackoffMs(input.progress.polls, { baseMs: deps.config.pvbPollBaseMs, maxMs: deps.config.pvbPollMaxMs });
  return { kind: 'wait', delayMs: Math.max(1, delayMs), progress: { ...input.progress, polls: input.progress.polls + 1 } };
}

/**
 * Runs `next` (the hooks) while a settled watch's end records are on their way, and returns once
 * those are confirmed too (a failed record fails the job, which looks again when it runs again).
 * When `next` throws — a failure, or a re-park's DelayedError — that error stands, not the record's.
 */
export async function afterEndRecords<R>(recording: Promise<void>, next: () => Promise<R>): Promise<R> {
  let result: R;
  try {
    result = await next();
  } catch (err) {
    await recording.catch(() => {});
    throw err;
  }
  await recording;
  return result;
}
