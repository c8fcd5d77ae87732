import { StorageMeter } from '@stowage/storage';
import type { Job } from 'bullmq';
import { type PruneRunSummary, PruneStatusStore, requestPrune } from '../deletion/repository-gc.js';
import { statePrefixFor } from '../deps.js';
import type { PipelineRuntime } from '../runtime.js';

export type PruneRepositoryResult = { outcome: 'pruned'; summary: PruneRunSummary } | { outcome: 'no-repository' };

/**
 * prune-repository (repository queue, in the backup workers): one prune run of the volume repository, after deletions. A run
 * that retired data asks for the run after its grace period, which deletes it. The outcome goes to
 * Redis for /metrics. A failure (another prune holds the repository lock, storage unreachable) is
 * retried with backoff by BullMQ; the repository's crash safety makes a retry after a crash safe.
 */
export async function processPruneRepository(rt: PipelineRuntime, job: Job): Promise<PruneRepositoryResult> {
  const { repository, clock, logger, connection, queuePrefix } = rt.deps;
  if (!repository) return { outcome: 'no-repository' };
  const status = new PruneStatusStore(connection, statePrefixFor(queuePrefix));
  let summary: PruneRunSummary;
  // What this run asks of storage (logged; the process's stowage_storage_*{work="prune"} counters).
  const meter = new StorageMeter('prune');
  try {
    summary = await meter.run(() => repository.prune());
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    await status.recordFailure(message, clock.now());
    logger.warn({ err: message, attempt: job.attemptsMade + 1 }, 'repository prune failed');
    throw error;
  }
  await status.recordSuccess(summary, clock.now());
  if (summary.batchesPending > 0) await requestPrune(rt.repositoryQueue(), clock.now(), clock.now() + repository.graceMs + 60_000);
  logger.info({ ...summary, storage: meter.total() }, 'repository pruned');
  return { outcome: 'pruned', summary };
}
