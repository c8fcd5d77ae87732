/**
 * The final phase from what happened. Kept as one small function so finalize has a single
 * place to ask; it follows Velero: any error → PartiallyFailed, a failed plan → Failed.
 */
export function decideBackupPhase(input: { counters: Record<string, number>; planFailed: boolean; canceled: boolean }): string {
  if (input.canceled) return 'Canceled';
  if (input.planFailed) return 'Failed';
  if ((input.counters.errors ?? 0) > 0) return 'PartiallyFailed';
  return 'Completed';
}
