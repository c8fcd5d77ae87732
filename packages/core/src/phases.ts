/*
 * Phase machines for backups, ItemBlocks and PVBs, and the final backup phase from counters.
 */
export const BACKUP_PHASES = [
  'New',
  'InProgress',
  'Finalizing',
  'Completed',
  'PartiallyFailed',
  'Failed',
  'FailedValidation',
  'Canceled',
] as const;
export type BackupPhase = (typeof BACKUP_PHASES)[number];

/**
 * Block states: Pending (queued) → InProgress (pre hooks, items, PVB creation) → WaitingForPvbs
 * (its PVBs run; no worker slot held) → RunningPostHooks → Completed | PartiallyFailed. Failed
 * when the block could not be processed at all; Canceled when the backup was canceled first.
 */
export const BLOCK_STATES = [
  'Pending',
  'InProgress',
  'WaitingForPvbs',
  'RunningPostHooks',
  'Completed',
  'PartiallyFailed',
  'Failed',
  'Canceled',
] as const;
export type BlockState = (typeof BLOCK_STATES)[number];

export const PVB_PHASES = ['New', 'InProgress', 'Completed', 'Failed', 'Canceling', 'Canceled'] as const;
export type PvbPhase = (typeof PVB_PHASES)[number];

const BACKUP_TRANSITIONS: Record<BackupPhase, readonly BackupPhase[]> = {
  New: ['InProgress', 'FailedValidation', 'Failed', 'Canceled'],
  InProgress: ['Finalizing', 'Failed', 'Canceled'],
  Finalizing: ['Completed', 'PartiallyFailed', 'Failed', 'Canceled'],
  Completed: [],
  PartiallyFailed: [],
  Failed: [],
  FailedValidation: [],
  Canceled: [],
};

const BLOCK_TRANSITIONS: Record<BlockState, readonly BlockState[]> = {
  Pending: ['InProgress', 'Failed', 'Canceled'],
  // no PVBs → straight to post hooks
  InProgress: ['WaitingForPvbs', 'RunningPostHooks', 'Completed', 'PartiallyFailed', 'Failed', 'Canceled'],
  // post hooks still run after a cancel/deadline (docs/architecture.md#the-hook-ordering-contract), so no direct cancel from here
  WaitingForPvbs: ['RunningPostHooks'],
  RunningPostHooks: ['Completed', 'PartiallyFailed', 'Failed', 'Canceled'],
  Completed: [],
  PartiallyFailed: [],
  Failed: [],
  Canceled: [],
};

const PVB_TRANSITIONS: Record<PvbPhase, readonly PvbPhase[]> = {
  New: ['InProgress', 'Failed', 'Canceling', 'Canceled'],
  InProgress: ['Completed', 'Failed', 'Canceling'],
  // the copy may finish or fail before the node agent notices the cancel: report what happened
  Canceling: ['Canceled', 'Completed', 'Failed'],
  Completed: [],
  Failed: [],
  Canceled: [],
};

/** Backup phases after which nothing changes any more: the machine's ends. */
export const ENDED_BACKUP_PHASES: readonly BackupPhase[] = BACKUP_PHASES.filter((phase) => BACKUP_TRANSITIONS[phase].length === 0);

/** A restore moves through the backup's phases (Velero's Restore uses the same names). */
export const RESTORE_PHASES = BACKUP_PHASES;
export const ENDED_RESTORE_PHASES = ENDED_BACKUP_PHASES;

export type PhaseMachine = 'backup' | 'block' | 'pvb';
type PhaseOf<M extends PhaseMachine> = M extends 'backup' ? BackupPhase : M extends 'block' ? BlockState : PvbPhase;

const MACHINES: { [M in PhaseMachine]: Record<string, readonly string[]> } = {
  backup: BACKUP_TRANSITIONS,
  block: BLOCK_TRANSITIONS,
  pvb: PVB_TRANSITIONS,
};

/**
 * Is `from → to` a legal move? Staying in the same phase is not a transition (false): callers
 * compare first, which is what makes at-least-once jobs safe to re-run.
 */
export function canTransition<M extends PhaseMachine>(machine: M, from: PhaseOf<M>, to: PhaseOf<M>): boolean {
  const targets: readonly string[] = MACHINES[machine][from] ?? [];
  return targets.includes(to);
}

/** Every phase that may move to `to` (for a compare-and-set of the phase in storage). */
export function phasesThatMayMoveTo<M extends PhaseMachine>(machine: M, to: PhaseOf<M>): PhaseOf<M>[] {
  return Object.entries(MACHINES[machine])
    .filter(([, targets]) => (targets as readonly string[]).includes(to))
    .map(([from]) => from as PhaseOf<M>);
}

export function isTerminalBackupPhase(phase: BackupPhase): boolean {
  return BACKUP_TRANSITIONS[phase].length === 0;
}

export function isTerminalBlockState(state: BlockState): boolean {
  return BLOCK_TRANSITIONS[state].length === 0;
}

/** Completed, Failed or Canceled: what releases a block's post hooks. */
export function isTerminalPvbPhase(phase: PvbPhase): boolean {
  return PVB_TRANSITIONS[phase].length === 0;
}

export function isBackupPhase(value: string): value is BackupPhase {
  return (BACKUP_PHASES as readonly string[]).includes(value);
}

export function isPvbPhase(value: string): value is PvbPhase {
  return (PVB_PHASES as readonly string[]).includes(value);
}

export interface BackupOutcomeCounters {
  /** The user canceled the backup and the cancel took effect. */
  canceled: boolean;
  /** Errors that stop the backup as a whole (plan failed, storage unwritable, tarball not assembled). */
  fatalErrors: number;
  totalItems: number;
  itemsBackedUp: number;
  itemWriteFailures: number;
  hooksFailed: number;
  pvbsFailed: number;
  /** Canceled PVBs that the user did not ask for (e.g. the fs-backup deadline expired). */
  pvbsCanceled: number;
  /** Pods skipped because a pre hook with onError: Fail failed. */
  podsSkippedByHooks: number;
  /** Any other error recorded in the backup's results (e.g. a PVB that could not be created). */
  otherErrors: number;
  /**
   * Resource types the API server would not let the plan read (403): each is a warning naming the
   * type and the permission, and their items are missing, so the backup is not Completed.
   */
  typesNotRead: number;
}

export type FinalBackupPhase = Extract<BackupPhase, 'Completed' | 'PartiallyFailed' | 'Failed' | 'Canceled'>;

export interface FinalPhaseDecision {
  phase: FinalBackupPhase;
  /** Why, one sentence each; empty for Completed. */
  reasons: string[];
}

/**
 * The final phase (docs/architecture.md#backup-phases): canceled → Canceled; a fatal error, or items to back up and none
 * written, → Failed; any hook failure, failed or deadline-canceled PVB, failed item write, pod
 * skipped by a failing pre hook, other error or resource type the API server would not let it read → PartiallyFailed; otherwise Completed.
 */
export function decideFinalPhase(counters: BackupOutcomeCounters): FinalPhaseDecision {
  if (counters.canceled) return { phase: 'Canceled', reasons: ['the backup was canceled'] };
  const failed: string[] = [];
  if (counters.fatalErrors > 0) failed.push(`${counters.fatalErrors} fatal error(s) stopped the backup`);
  if (counters.totalItems > 0 && counters.itemsBackedUp === 0) failed.push(`none of the ${counters.totalItems} item(s) could be backed up`);
  if (failed.length > 0) return { phase: 'Failed', reasons: failed };
  const partial: string[] = [];
  if (counters.hooksFailed > 0) partial.push(`${counters.hooksFailed} hook(s) failed`);
  if (counters.podsSkippedByHooks > 0)
    partial.push(`${counters.podsSkippedByHooks} pod(s) were skipped because a pre hook with onError: Fail failed`);
  if (counters.itemWriteFailures > 0) partial.push(`${counters.itemWriteFailures} item(s) could not be written`);
  if (counters.pvbsFailed > 0) partial.push(`${counters.pvbsFailed} pod volume backup(s) failed`);
  if (counters.pvbsCanceled > 0) partial.push(`${counters.pvbsCanceled} pod volume backup(s) were canceled`);
  if (counters.otherErrors > 0) partial.push(`${counters.otherErrors} other error(s) were recorded`);
  if (counters.typesNotRead > 0)
    partial.push(`${counters.typesNotRead} resource type(s) could not be read (forbidden: see the warnings for the types and permissions)`);
  if (partial.length > 0) return { phase: 'PartiallyFailed', reasons: partial };
  return { phase: 'Completed', reasons: [] };
}
