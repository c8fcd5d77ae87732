import { randomUUID } from 'node:crypto';
import { ENDED_RESTORE_PHASES, type Requester } from '@stowage/core';
import type { RedisClient } from '@stowage/queue';
import { addRestoreFlow, createFlowProducer, promoteParkedWhere, restoreJobIds } from '@stowage/queue';
import type { FlowProducer, Queue } from 'bullmq';
import { PipelineError, PipelineErrorCode } from '../errors.js';
import { applyRestoreApiCap } from './restore-api-cap.js';
import type { RestoreRecord, RestoreState } from './restore-state.js';

export interface SubmitRestoreDeps {
  restores: RestoreState;
  flowProducer?: FlowProducer;
  connection?: RedisClient;
  queuePrefix: string;
  now?: () => number;
  /** The restore's API cap (restoreMaxInFlight): stored as restore-items' global concurrency before the flow is added. */
  maxInFlight?: number;
}

export interface SubmitRestoreInput {
  name: string;
  /** Core's validated RestoreSpec (with defaults). */
  spec: { backupName: string };
  requestId?: string | undefined;
  /** A namespaced restore's namespace; absent: cluster-scoped. */
  namespace?: string | undefined;
  /** Whose rights were checked for its mapped namespaces (core's Requester). */
  requester?: Requester | undefined;
}

export type SubmitRestoreResult = { created: boolean; restore: RestoreRecord };

/**
 * Records a restore (phase New) and adds its `restore-finalize ← restore-plan` flow. Idempotent by
 * name like submitBackup: a retried call re-adds the same job ids (a no-op while they exist).
 */
export async function submitRestore(deps: SubmitRestoreDeps, input: SubmitRestoreInput): Promise<SubmitRestoreResult> {
  if (!input.name) throw new PipelineError(PipelineErrorCode.badArgument, 'submitRestore: name is required');
  const now = deps.now ?? Date.now;
  const fresh: RestoreRecord = {
    name: input.name,
    uid: randomUUID(),
    spec: input.spec,
    backupName: input.spec.backupName,
    phase: 'New',
    createdAt: now(),
    ...(input.requestId ? { requestId: input.requestId } : {}),
    ...(input.namespace ? { namespace: input.namespace } : {}),
    ...(input.requester ? { requester: input.requester } : {}),
  };
  const { created } = await deps.restores.createRestore(fresh);
  const restore = created ? fresh : await deps.restores.getRestore(input.name);
  if (!restore) throw new PipelineError(PipelineErrorCode.backupMissing, `restore ${input.name} vanished while being submitted`);
  if (!(ENDED_RESTORE_PHASES as readonly string[]).includes(restore.phase)) {
    if (deps.maxInFlight !== undefined && deps.connection)
      await applyRestoreApiCap({ connection: deps.connection, queuePrefix: deps.queuePrefix, cap: deps.maxInFlight });
    const own = deps.flowProducer ? undefined : makeProducer(deps);
    try {
      await addRestoreFlow(deps.flowProducer ?? (own as FlowProducer), {
        restoreName: restore.name,
        restoreUid: restore.uid,
        ...(restore.requestId ? { requestId: restore.requestId } : {}),
      });
    } finally {
      await own?.close();
    }
  }
  return { created, restore };
}

function makeProducer(deps: SubmitRestoreDeps): FlowProducer {
  if (!deps.connection) throw new PipelineError(PipelineErrorCode.badArgument, 'submitRestore needs a flowProducer or a connection');
  return createFlowProducer({ connection: deps.connection, prefix: deps.queuePrefix });
}

export type CancelRestoreResult =
  | { outcome: 'requested'; phase: string }
  | { outcome: 'already-requested'; phase: string }
  | { outcome: 'already-ended'; phase: string }
  | { outcome: 'not-found' };

/**
 * Asks a running restore to stop: batches not started create nothing, no further tier is added,
 * outstanding PVRs get `spec.cancel` from their pod's restore-hooks job (woken now through
 * `hooksQueue` when given, if parked), hooks not run are skipped; finalize ends it Canceled.
 * Objects already created stay (as in Velero).
 */
export async function cancelRestore(
  deps: { restores: RestoreState; hooksQueue?: Queue | undefined },
  name: string,
): Promise<CancelRestoreResult> {
  const record = await deps.restores.getRestore(name);
  if (!record) return { outcome: 'not-found' };
  const res = await deps.restores.requestCancel(name);
  const phase = res.phase ?? record.phase;
  if (res.requested) {
    const prefix = restoreJobIds.hooksPrefix(name);
    if (deps.hooksQueue) await promoteParkedWhere(deps.hooksQueue, (id) => id.startsWith(prefix));
    return { outcome: 'requested', phase };
  }
  if ((ENDED_RESTORE_PHASES as readonly string[]).includes(phase)) return { outcome: 'already-ended', phase };
  return { outcome: 'already-requested', phase };
}
