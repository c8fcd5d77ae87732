import { randomUUID } from 'node:crypto';
import { ENDED_BACKUP_PHASES, isPostHooksJobIdOf, type Requester } from '@stowage/core';
import type { RedisClient } from '@stowage/queue';
import { addBackupFlow, addDeleteBackupJob, createFlowProducer, promoteParkedWhere } from '@stowage/queue';
import type { FlowProducer, Queue } from 'bullmq';
import { PipelineError, PipelineErrorCode } from './errors.js';
import type { BackupRecord, BackupState } from './state/backup-state.js';

export interface SubmitBackupDeps {
  state: BackupState;
  /** Adds `finalize ← plan`; pass one (the API keeps it open) or a connection to make a short-lived one. */
  flowProducer?: FlowProducer;
  connection?: RedisClient;
  queuePrefix: string;
  now?: () => number;
}

export interface SubmitBackupInput {
  name: string;
  /** The validated spec with defaults (core's validateBackupRequest value). */
  spec: unknown;
  requestId?: string | undefined;
  /** The backup's labels and annotations (empty maps are not stored). */
  labels?: Record<string, string> | undefined;
  annotations?: Record<string, string> | undefined;
  /** A namespaced backup's namespace (its name is then core's runKey of both); absent: cluster-scoped. */
  namespace?: string | undefined;
  /** Whose rights its spec hooks' execs are checked against (core's Requester). */
  requester?: Requester | undefined;
}

export type SubmitBackupResult = { created: true; backup: BackupRecord } | { created: false; backup: BackupRecord };

/**
 * Records a backup (phase New) and adds its `finalize ← plan` flow. Idempotent by name: a
 * retried call finds the record and re-adds the flow with the same job ids (a no-op while the
 * jobs exist), so a crash between the two steps heals on retry. `created: false` tells the caller
 * the name was taken (same request retried, or a conflict it must judge by requestId/spec).
 */
export async function submitBackup(deps: SubmitBackupDeps, input: SubmitBackupInput): Promise<SubmitBackupResult> {
  if (!input.name) throw new PipelineError(PipelineErrorCode.badArgument, 'submitBackup: name is required');
  const now = deps.now ?? Date.now;
  const fresh: BackupRecord = {
    name: input.name,
    uid: randomUUID(),
    spec: input.spec,
    phase: 'New',
    createdAt: now(),
    ...(input.requestId ? { requestId: input.requestId } : {}),
    ...(input.namespace ? { namespace: input.namespace } : {}),
    ...(input.requester ? { requester: input.requester } : {}),
    ...(input.labels && Object.keys(input.labels).length > 0 ? { labels: input.labels } : {}),
    ...(input.annotations && Object.keys(input.annotations).length > 0 ? { annotations: input.annotations } : {}),
  };
  const { created } = await deps.state.createBackup(fresh);
  const backup = created ? fresh : await deps.state.getBackup(input.name);
  if (!backup) throw new PipelineError(PipelineErrorCode.backupMissing, `backup ${input.name} vanished while being submitted`);
  // Re-add on every call unless the backup has ended (its jobs may be removed by then).
  if (!(ENDED_BACKUP_PHASES as readonly string[]).includes(backup.phase)) {
    const ownProducer = deps.flowProducer ? undefined : makeProducer(deps);
    try {
      const producer = deps.flowProducer ?? (ownProducer as FlowProducer);
      await addBackupFlow(producer, { backupName: backup.name, backupUid: backup.uid, requestId: backup.requestId });
      const ttlMs = ttlOf(backup.spec);
      if (ttlMs !== undefined) {
        const delayMs = backup.createdAt + ttlMs - now();
        await addDeleteBackupJob(producer, { backupName: backup.name, backupUid: backup.uid, reason: 'ttl', delayMs });
      }
    } finally {
      await ownProducer?.close();
    }
  }
  return { created, backup } as SubmitBackupResult;
}

/** The validated spec's TTL; a backup with none (or 0) never expires. */
function ttlOf(spec: unknown): number | undefined {
  const ttlMs = (spec as { ttlMs?: unknown } | undefined)?.ttlMs;
  return typeof ttlMs === 'number' && ttlMs > 0 ? ttlMs : undefined;
}

function makeProducer(deps: SubmitBackupDeps): FlowProducer {
  if (!deps.connection) throw new PipelineError(PipelineErrorCode.badArgument, 'submitBackup needs a flowProducer or a connection');
  return createFlowProducer({ connection: deps.connection, prefix: deps.queuePrefix });
}

export type CancelBackupResult =
  | { outcome: 'requested'; phase: string }
  | { outcome: 'already-requested'; phase: string }
  | { outcome: 'already-ended'; phase: string }
  | { outcome: 'not-found' };

/**
 * Asks a running backup to stop: records `cancelRequestedAt`. Blocks not yet started skip their
 * work; started blocks finish and still run their post hooks; every outstanding PVB gets
 * `spec.cancel` from the block's post-hooks job, which `hooksQueue` (when given) wakes now if it is
 * parked (else it sees the cancel at its own timer); finalize ends the backup `Canceled`.
 */
export async function cancelBackup(deps: CancelDeps, name: string): Promise<CancelBackupResult> {
  const record = await deps.state.getBackup(name);
  if (!record) return { outcome: 'not-found' };
  const res = await requestCancelAndWake(deps, name);
  const phase = res.phase ?? record.phase;
  if (res.requested) return { outcome: 'requested', phase };
  if ((ENDED_BACKUP_PHASES as readonly string[]).includes(phase)) return { outcome: 'already-ended', phase };
  return { outcome: 'already-requested', phase };
}

interface CancelDeps {
  state: BackupState;
  /**
   * The hooks queue, through which a cancel wakes the backup's parked post-hooks jobs. Without it
   * they notice the cancel at their timer: up to pvbRealReadEveryMs (30 s) later.
   */
  hooksQueue?: Queue | undefined;
}

/** Records the cancel and, the first time, wakes the backup's parked post-hooks jobs (they ask its PVBs to stop). */
async function requestCancelAndWake(deps: CancelDeps, name: string): Promise<{ requested: boolean; phase: string | undefined }> {
  const res = await deps.state.requestCancel(name);
  if (res.requested && deps.hooksQueue) await promoteParkedWhere(deps.hooksQueue, (id) => isPostHooksJobIdOf(name, id));
  return res;
}

export type RequestDeletionResult =
  | { outcome: 'deleted' }
  /** Still being deleted (a running backup is canceled first, or no backups worker has run the job yet). */
  | { outcome: 'deleting'; phase: string }
  | { outcome: 'not-found' };

/**
 * Deletes a backup through its `delete-backup` job, so a crash of whoever runs it is healed by
 * BullMQ (the job is retried elsewhere) and the deletion always also removes the PVB objects. A
 * running backup is asked to cancel first. Waits up to `waitMs` for the record to go, so an ended
 * backup's deletion normally answers as done.
 */
export async function requestBackupDeletion(
  deps: CancelDeps & { flowProducer: FlowProducer; waitMs?: number; pollMs?: number },
  name: string,
): Promise<RequestDeletionResult> {
  const record = await deps.state.getBackup(name);
  if (!record) return { outcome: 'not-found' };
  const running = !(ENDED_BACKUP_PHASES as readonly string[]).includes(record.phase);
  if (running) await requestCancelAndWake(deps, name);
  await addDeleteBackupJob(deps.flowProducer, { backupName: name, backupUid: record.uid, reason: 'requested' });
  const until = Date.now() + (running ? 0 : (deps.waitMs ?? 15_000));
  for (;;) {
    const now = await deps.state.getBackup(name);
    if (!now || now.uid !== record.uid) return { outcome: 'deleted' };
    if (Date.now() >= until) return { outcome: 'deleting', phase: now.phase };
    await new Promise((resolve) => setTimeout(resolve, deps.pollMs ?? 100));
  }
}
