import { ENDED_RESTORE_PHASES } from '@stowage/core';
import { JobName, parseRestoreRunJobData, QueueName, qualifiedQueueName, restoreJobIds } from '@stowage/queue';
import type { Job } from 'bullmq';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { NO_PIPELINE_METRICS } from '../metrics.js';
import { restoreDepsOf } from '../restore/restore-runtime.js';
import type { RestoreRecord } from '../restore/restore-state.js';
import { writeRestoreArchive } from '../restore/restore-storage.js';
import type { PipelineRuntime } from '../runtime.js';

export type RestoreFinalizeResult = { phase: string; skipped?: 'ended' };

/** The final phase of a restore from its counters (nothing half-restored is Completed). */
export function decideRestorePhase(input: { counters: Record<string, number>; planFailed: boolean; canceled: boolean }): {
  phase: 'Completed' | 'PartiallyFailed' | 'Failed' | 'Canceled';
  unattempted: number;
} {
  const c = (k: string) => input.counters[k] ?? 0;
  const unattempted = Math.max(0, c('totalItems') - c('itemsRestored') - c('itemsFailed'));
  if (input.canceled) return { phase: 'Canceled', unattempted };
  if (input.planFailed) return { phase: 'Failed', unattempted };
  const trouble = c('errors') + c('itemsFailed') + c('pvrsFailed') + c('pvrsCanceled') + c('pvrsTimedOut') + c('hooksFailed') + unattempted;
  return { phase: trouble > 0 ? 'PartiallyFailed' : 'Completed', unattempted };
}

/**
 * restore-finalize: runs last (after plan, every tier, every pod's hooks). → Finalizing; items
 * never attempted are an error; final phase by decideRestorePhase; batches dropped from Redis; the
 * final phase recorded; then the archive written to backup storage (events, `<restore>-results.gz`,
 * the log, per-item results, `restore.json` last), the record marked archived, and everything but
 * the catalogue entry (record and counters) dropped from Redis.
 * Safe to run twice and to be cut off anywhere: a run that finds the phase ended but the restore
 * not archived archives it from Redis (nothing is dropped before `archivedAt`); one that finds it
 * archived only finishes the drop — it never archives again from the dropped state.
 */
export async function processRestoreFinalize(rt: PipelineRuntime, job: Job): Promise<RestoreFinalizeResult> {
  const { deps } = rt;
  const { restores } = restoreDepsOf(deps);
  const data = parseRestoreRunJobData(job.data, JobName.restoreFinalize);
  const name = data.restoreName;
  const record = await restores.getRestore(name);
  if (!record) throw new UnrecoverablePipelineError(PipelineErrorCode.backupMissing, `restore ${name} has no record`);
  if (record.archivedAt !== undefined || (ENDED_RESTORE_PHASES as readonly string[]).includes(record.phase)) {
    await archiveEndedRestore(rt, record);
    return { phase: record.phase, skipped: 'ended' };
  }
  const failures = await job.getIgnoredChildrenFailures();
  const planKey = `${qualifiedQueueName(deps.queuePrefix, QueueName.restores)}:${restoreJobIds.plan(name)}`;
  const planFailure = failures[planKey];
  if (planFailure !== undefined) {
    await restores.recordProblem(name, { level: 'error', onceKey: 'plan-failed', msg: `restore plan failed: ${planFailure}` });
    await restores.updateRun(name, { failureReason: planFailure });
  }
  for (const [key, reason] of Object.entries(failures)) {
    if (key === planKey) continue;
    await restores.recordProblem(name, {
      level: 'error',
      onceKey: `child-failed:${key}`,
      msg: `restore job ${key.split(':').at(-1)} failed: ${reason}`,
    });
  }
  await restores.transitionPhase(name, ['New', 'InProgress'], 'Finalizing');
  const canceled = record.cancelRequestedAt !== undefined;
  const decision = decideRestorePhase({ counters: await restores.counters(name), planFailed: planFailure !== undefined, canceled });
  if (decision.unattempted > 0 && !canceled && planFailure === undefined) {
    await restores.recordProblem(name, {
      level: 'error',
      onceKey: 'unattempted',
      msg: `${decision.unattempted} items of the plan were never attempted`,
    });
  }
  await restores.dropBatches(name);
  const completedAt = deps.clock.now();
  const moved = await restores.transitionPhase(name, ['Finalizing'], decision.phase, { completedAt });
  const ended = await restores.getRestore(name);
  if (moved.moved)
    (deps.metrics ?? NO_PIPELINE_METRICS).restoreEnded({
      phase: decision.phase,
      durationMs: ended?.startedAt !== undefined ? completedAt - ended.startedAt : undefined,
    });
  if (ended && (ENDED_RESTORE_PHASES as readonly string[]).includes(ended.phase)) await archiveEndedRestore(rt, ended);
  return { phase: ended?.phase ?? decision.phase };
}

/**
 * The ended restore into storage, then out of Redis, as backups do (RunState.archiveAndDrop): the
 * archive (its terminal phase event is in the stream by now), the record marked archived, then
 * everything but the catalogue entry dropped. An archived record is only dropped again.
 */
async function archiveEndedRestore(rt: PipelineRuntime, record: RestoreRecord): Promise<void> {
  const { restores } = restoreDepsOf(rt.deps);
  await restores.archiveAndDrop(
    record,
    async () => ((await writeRestoreArchive(rt.deps.storage, restores, record)) ? {} : undefined),
    () => rt.deps.clock.now(),
  );
}
