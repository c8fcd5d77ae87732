import { JobName, parseRestoreRunJobData, QueueName, qualifiedQueueName, restoreJobIds } from '@stowage/queue';
import type { Job } from 'bullmq';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { restoreDepsOf } from '../restore/restore-runtime.js';
import type { RestoreRecord } from '../restore/restore-state.js';
import { ENDED_RESTORE_PHASES } from '../restore/restore-state.js';
import { type RestoreResultSet, writeRestoreArchive, writeRestoreSidecars } from '../restore/restore-storage.js';
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
 * never attempted are an error; final phase by decideRestorePhase; `<restore>-results.gz`, the
 * log and per-item results written to backup storage; batches dropped from Redis; the final phase
 * recorded; then the archive (events, `restore.json` last) written and the record marked archived.
 * A run that finds the phase ended but the restore not archived (cut off in between) archives it.
 */
export async function processRestoreFinalize(rt: PipelineRuntime, job: Job): Promise<RestoreFinalizeResult> {
  const { deps } = rt;
  const { restores } = restoreDepsOf(deps);
  const data = parseRestoreRunJobData(job.data, JobName.restoreFinalize);
  const name = data.restoreName;
  const record = await restores.getRestore(name);
  if (!record) throw new UnrecoverablePipelineError(PipelineErrorCode.backupMissing, `restore ${name} has no record`);
  if ((ENDED_RESTORE_PHASES as readonly string[]).includes(record.phase)) {
    if (record.archivedAt === undefined) await archiveEndedRestore(rt, record);
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
  const [logLines, items] = await Promise.all([restores.readLogs(name), restores.itemResults(name)]);
  const results = { errors: emptySet(), warnings: emptySet() };
  for (const line of logLines) {
    if (line.level !== 'error' && line.level !== 'warn') continue;
    const set = line.level === 'error' ? results.errors : results.warnings;
    const ns = typeof line.namespace === 'string' ? line.namespace : undefined;
    if (ns) set.namespaces[ns] = [...(set.namespaces[ns] ?? []), line.msg];
    else set.velero.push(line.msg);
  }
  await writeRestoreSidecars(deps.storage, name, { results, logLines, items });
  await restores.dropBatches(name);
  await restores.transitionPhase(name, ['Finalizing'], decision.phase, { completedAt: deps.clock.now() });
  const ended = await restores.getRestore(name);
  if (ended && (ENDED_RESTORE_PHASES as readonly string[]).includes(ended.phase) && ended.archivedAt === undefined)
    await archiveEndedRestore(rt, ended);
  return { phase: ended?.phase ?? decision.phase };
}

/** Writes the ended restore's archive (its terminal phase event is in the stream by now), then marks the record archived. */
async function archiveEndedRestore(rt: PipelineRuntime, record: RestoreRecord): Promise<void> {
  const { restores } = restoreDepsOf(rt.deps);
  await writeRestoreArchive(rt.deps.storage, restores, record);
  await restores.updateRun(record.name, { archivedAt: rt.deps.clock.now() });
}

function emptySet(): RestoreResultSet {
  return { velero: [], cluster: [], namespaces: {} };
}
