import { describe, expect, it } from 'vitest';
import {
  type BackupOutcomeCounters,
  canTransition,
  decideFinalPhase,
  ENDED_BACKUP_PHASES,
  ENDED_RESTORE_PHASES,
  isTerminalPvbPhase,
  PVB_PHASES,
  phasesThatMayMoveTo,
} from './phases.js';

describe('phase machines', () => {
  it.each<['backup' | 'block' | 'pvb', string, string, boolean]>([
    ['backup', 'New', 'InProgress', true],
    ['backup', 'New', 'FailedValidation', true],
    ['backup', 'InProgress', 'Finalizing', true],
    ['backup', 'Finalizing', 'PartiallyFailed', true],
    ['backup', 'InProgress', 'Completed', false],
    ['backup', 'Completed', 'InProgress', false],
    ['backup', 'Canceled', 'Completed', false],
    ['backup', 'InProgress', 'InProgress', false],
    ['block', 'InProgress', 'WaitingForPvbs', true],
    ['block', 'InProgress', 'RunningPostHooks', true],
    ['block', 'WaitingForPvbs', 'RunningPostHooks', true],
    ['block', 'WaitingForPvbs', 'Canceled', false],
    ['block', 'Completed', 'Pending', false],
    ['pvb', 'New', 'InProgress', true],
    ['pvb', 'New', 'Canceled', true],
    ['pvb', 'InProgress', 'Completed', true],
    ['pvb', 'InProgress', 'Canceling', true],
    ['pvb', 'Canceling', 'Canceled', true],
    ['pvb', 'InProgress', 'New', false],
    ['pvb', 'Completed', 'Failed', false],
    ['pvb', 'Canceled', 'InProgress', false],
  ])('%s: %s → %s is %s', (machine, from, to, legal) => {
    expect(canTransition(machine, from as never, to as never)).toBe(legal);
  });

  it('terminal PVB phases are exactly Completed, Failed, Canceled', () => {
    expect(PVB_PHASES.filter(isTerminalPvbPhase)).toEqual(['Completed', 'Failed', 'Canceled']);
  });

  it('backups and restores end in Completed, PartiallyFailed, Failed, FailedValidation or Canceled', () => {
    const ended = ['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled'];
    expect(ENDED_BACKUP_PHASES).toEqual(ended);
    expect(ENDED_RESTORE_PHASES).toEqual(ended);
  });

  it('lists the phases a compare-and-set may move from', () => {
    expect(phasesThatMayMoveTo('backup', 'Finalizing')).toEqual(['InProgress']);
    expect(phasesThatMayMoveTo('pvb', 'Canceled')).toEqual(['New', 'Canceling']);
  });
});

describe('decideFinalPhase', () => {
  const clean: BackupOutcomeCounters = {
    canceled: false,
    fatalErrors: 0,
    totalItems: 10,
    itemsBackedUp: 10,
    itemWriteFailures: 0,
    hooksFailed: 0,
    pvbsFailed: 0,
    pvbsCanceled: 0,
    podsSkippedByHooks: 0,
    otherErrors: 0,
    typesNotRead: 0,
  };

  it.each<[string, Partial<BackupOutcomeCounters>, string, RegExp | null]>([
    ['all fine', {}, 'Completed', null],
    ['an empty backup', { totalItems: 0, itemsBackedUp: 0 }, 'Completed', null],
    ['a hook failed (Continue)', { hooksFailed: 1 }, 'PartiallyFailed', /1 hook\(s\) failed/],
    [
      'a pre hook with onError Fail skipped a pod',
      { hooksFailed: 1, podsSkippedByHooks: 1, itemsBackedUp: 9 },
      'PartiallyFailed',
      /skipped because a pre hook/,
    ],
    ['a PVB failed', { pvbsFailed: 2 }, 'PartiallyFailed', /2 pod volume backup\(s\) failed/],
    ['the fs-backup deadline canceled PVBs', { pvbsCanceled: 1 }, 'PartiallyFailed', /canceled/],
    ['an item write failed', { itemWriteFailures: 1, itemsBackedUp: 9 }, 'PartiallyFailed', /could not be written/],
    ['another error', { otherErrors: 1 }, 'PartiallyFailed', /other error/],
    [
      'a type could not be listed (403): only warnings, yet not Completed',
      { typesNotRead: 1 },
      'PartiallyFailed',
      /1 resource type\(s\) could not be read/,
    ],
    ['a fatal error', { fatalErrors: 1, hooksFailed: 3 }, 'Failed', /fatal/],
    ['nothing could be backed up', { itemsBackedUp: 0, itemWriteFailures: 10 }, 'Failed', /none of the 10/],
    ['canceled by the user, whatever else happened', { canceled: true, fatalErrors: 1, pvbsCanceled: 3 }, 'Canceled', /canceled/],
  ])('%s → %s', (_case, counters, phase, reason) => {
    const decision = decideFinalPhase({ ...clean, ...counters });
    expect(decision.phase).toBe(phase);
    if (reason) expect(decision.reasons.join('; ')).toMatch(reason);
    else expect(decision.reasons).toEqual([]);
  });
});
