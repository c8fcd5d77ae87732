import { decideFinalPhase, type FinalPhaseDecision } from '@stowage/core';

/**
 * The final phase from the backup's counters, by core's `decideFinalPhase`. Every category of
 * error is also counted in `errors` (recordProblem); what no category claims is `otherErrors`.
 */
export function decideBackupPhase(input: { counters: Record<string, number>; planFailed: boolean; canceled: boolean }): FinalPhaseDecision {
  const c = (name: string) => input.counters[name] ?? 0;
  const pvbsCanceled = c('pvbsCanceled') + c('pvbsTimedOut');
  const categorized = c('hooksFailed') + c('pvbsFailed') + pvbsCanceled + c('podsSkippedByHooks') + c('itemWriteFailures');
  return decideFinalPhase({
    canceled: input.canceled,
    fatalErrors: input.planFailed ? 1 : 0,
    totalItems: c('totalItems'),
    itemsBackedUp: c('itemsBackedUp'),
    itemWriteFailures: c('itemWriteFailures'),
    hooksFailed: c('hooksFailed'),
    pvbsFailed: c('pvbsFailed'),
    pvbsCanceled,
    podsSkippedByHooks: c('podsSkippedByHooks'),
    otherErrors: Math.max(0, c('errors') - categorized),
    typesNotRead: c('typesNotRead'),
  });
}
