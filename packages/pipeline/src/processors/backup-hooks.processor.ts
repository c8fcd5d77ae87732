/*
 * Backup-level hooks as a job of their own (docs/architecture.md#backup-level-hooks). Their execs
 * need `pods/exec`, which only the backup workers hold (the internet-facing api, which runs plan
 * and finalize, must not be able to exec): so `run-backup-hooks` (queue hooks) runs them, and the
 * job that needs them done — plan for `pre`, finalize for `post` — adds it as its child and is
 * parked in waiting-children until it ends, holding no worker slot. BullMQ then runs the parent
 * again from the top; it finds the phase on the backup record (`backupHooks`) and goes on from
 * there. Both sides are safe to run twice: the record makes the phase run once, the job id is
 * deterministic, and a job that failed for good is read, never added again.
 */
import { type BackupSpec, ENDED_BACKUP_PHASES } from '@stowage/core';
import { addBackupHooksJob, backupHooksJobKey, parseBackupHooksJobData } from '@stowage/queue';
import { type Job, WaitingChildrenError } from 'bullmq';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { BACKUP_HOOK_SCOPE, type BackupHooksOutcome, type BackupHooksRecord, runBackupHooks } from '../hooks/backup-hooks.js';
import type { HookPhase } from '../plan/block-plan.js';
import type { PipelineRuntime } from '../runtime.js';

export type BackupHooksJobResult = BackupHooksOutcome | { skipped: string };

/** run-backup-hooks, in a backup worker: the backup's `phase` hooks, once (runBackupHooks). */
export async function processBackupHooks(rt: PipelineRuntime, job: Job): Promise<BackupHooksJobResult> {
  const { deps } = rt;
  const { backupName, backupUid, phase } = parseBackupHooksJobData(job.data);
  const record = await deps.state.getBackup(backupName);
  // Its parent finds no phase record and fails the backup's hooks (never runs on without them).
  if (!record || record.uid !== backupUid) return { skipped: `backup ${backupName} (uid ${backupUid}) has no record` };
  if (record.archivedAt !== undefined || (ENDED_BACKUP_PHASES as readonly string[]).includes(record.phase)) {
    return { skipped: `backup already ${record.phase}` };
  }
  const spec = record.spec as BackupSpec | undefined;
  if (!spec?.hooks)
    throw new UnrecoverablePipelineError(PipelineErrorCode.specInvalid, `backup ${backupName} has no stored spec with hooks`);
  // A cancel stops the pre hooks between two hooks; the post hooks always run (they undo what pre did).
  const canceled = async () => (await deps.state.cancelRequestedAt(backupName)) !== undefined;
  return runBackupHooks(deps, backupName, spec, phase, phase === 'pre' ? { canceled } : {});
}

export interface AwaitedBackup {
  backupName: string;
  backupUid: string;
  requestId?: string | undefined;
}

/** Set in the parent's job data once it has added the phase's job (it is then only waited for, never added again). */
const ADDED_FIELD = 'backupHooksJobAdded';

/**
 * The backup's `phase` hooks, as a backup worker ran them: what they did once the phase is on the
 * record. Before that, `job` (plan for pre, finalize for post) adds their run-backup-hooks job
 * as its child and parks until it ends: this throws WaitingChildrenError, and BullMQ runs `job`
 * again from the top once the child is done. A spec without hooks for the phase adds nothing.
 */
export async function awaitBackupHooks(
  rt: PipelineRuntime,
  job: Job,
  token: string | undefined,
  backup: AwaitedBackup,
  spec: BackupSpec,
  phase: HookPhase,
): Promise<BackupHooksOutcome> {
  if ((spec.hooks.backup?.[phase] ?? []).length === 0) return { failed: undefined };
  const { backupName } = backup;
  const key = backupHooksJobKey(rt.deps.queuePrefix, backupName, phase);
  const ended = async (): Promise<BackupHooksOutcome | undefined> => {
    const done = await phaseRecord(rt, backupName, phase);
    if (done) return { failed: done.failed, ...(done.canceled ? { canceled: true } : {}) };
    const failure = (await job.getIgnoredChildrenFailures())[key];
    return failure === undefined ? undefined : jobFailed(rt, backupName, phase, `failed for good: ${failure}`);
  };
  const before = await ended();
  if (before) return before;
  if (!token) throw new UnrecoverablePipelineError(PipelineErrorCode.badArgument, `job ${job.id} has no lock token to wait with`);
  // Added once: a completed job re-added would count done again (fine), but one BullMQ removed
  // since would run again, and one that failed for good would be waited for forever.
  if ((job.data as Record<string, unknown>)[ADDED_FIELD] !== true) {
    await addBackupHooksJob(
      rt.hooksQueue(),
      { id: job.id ?? '', queue: job.queueQualifiedName },
      { backupName, backupUid: backup.backupUid, phase, ...(backup.requestId ? { requestId: backup.requestId } : {}) },
    );
    await job.updateData({ ...(job.data as object), [ADDED_FIELD]: true });
  }
  if (await job.moveToWaitingChildren(token)) throw new WaitingChildrenError();
  // Not parked: the job had ended already. It left the phase on the record, or failed for good;
  // else it ran nothing (the backup was gone or ended when it ran).
  return (await ended()) ?? jobFailed(rt, backupName, phase, 'ended without running them');
}

async function phaseRecord(rt: PipelineRuntime, backupName: string, phase: HookPhase) {
  const record = await rt.deps.state.getBackup(backupName);
  return (record?.backupHooks as BackupHooksRecord | undefined)?.[phase];
}

/**
 * The phase's job failed for good or ran nothing: the phase is recorded failed (an error naming
 * it), so the parent goes on as after a hook that failed with onError: Fail, never as if it ran.
 */
async function jobFailed(rt: PipelineRuntime, backupName: string, phase: HookPhase, why: string): Promise<BackupHooksOutcome> {
  const { state, clock } = rt.deps;
  const failed = `the job running the backup ${phase} hooks ${why}`;
  await state.recordProblem(backupName, { level: 'error', onceKey: `backup-hooks-job:${phase}`, msg: failed });
  const runs = (await state.hookRuns(backupName)).filter((r) => r.blockId === BACKUP_HOOK_SCOPE && r.phase === phase);
  const latest = ((await state.getBackup(backupName))?.backupHooks as BackupHooksRecord | undefined) ?? {};
  const hooksFailed = runs.filter((r) => r.outcome !== 'exited' || r.exitCode !== 0).length;
  await state.updateBackup(backupName, {
    backupHooks: { ...latest, [phase]: { doneAt: clock.now(), hooksRun: runs.length, hooksFailed, runs, failed } },
  });
  return { failed };
}
