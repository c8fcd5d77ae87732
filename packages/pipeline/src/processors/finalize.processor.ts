import { planJobId } from '@stowage/core';
import { pvbLabels } from '@stowage/kube';
import { parseFinalizeJobData, QueueName, qualifiedQueueName } from '@stowage/queue';
import {
  assembleTarball,
  type BackupResults,
  type ResultSet,
  writeBackupMetadata,
  writeLogsSidecar,
  writePodVolumeBackupsSidecar,
  writeResourceListSidecar,
  writeResultsSidecar,
} from '@stowage/storage';
import type { Job } from 'bullmq';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { decideBackupPhase } from '../phase.js';
import type { PipelineRuntime } from '../runtime.js';
import { type BackupRecord, ENDED_BACKUP_PHASES, type LogLine } from '../state/backup-state.js';

export interface FinalizeResult {
  phase: string;
  items: number;
  pvbs: number;
}

/**
 * finalize: runs after plan and every block's post-hooks job. Assembles the Velero layout —
 * tarball, velero-backup.json, -podvolumebackups.json.gz, -resource-list.json.gz, -logs.gz,
 * -results.gz — decides the final phase from the counters, and drops the item manifests from
 * Redis. Safe to run twice: every write replaces the same key, phases move by CAS.
 */
export async function processFinalize(rt: PipelineRuntime, job: Job, _token: string | undefined): Promise<FinalizeResult> {
  const { deps } = rt;
  const { state, storage, clock } = deps;
  const data = parseFinalizeJobData(job.data);
  const { backupName } = data;
  const record = await state.getBackup(backupName);
  if (!record) throw new UnrecoverablePipelineError(PipelineErrorCode.backupMissing, `backup ${backupName} has no record`);
  if ((ENDED_BACKUP_PHASES as readonly string[]).includes(record.phase)) {
    return { phase: record.phase, items: 0, pvbs: 0 };
  }

  const failures = await job.getIgnoredChildrenFailures();
  const planKey = `${qualifiedQueueName(deps.queuePrefix, QueueName.backups)}:${planJobId(backupName)}`;
  const planFailure = failures[planKey];
  for (const [key, reason] of Object.entries(failures)) {
    if (key === planKey) continue;
    await state.recordProblem(backupName, { level: 'error', onceKey: `child-failed:${key}`, msg: `job ${key} failed: ${reason}` });
  }
  if (planFailure !== undefined) {
    await state.recordProblem(backupName, { level: 'error', onceKey: 'plan-failed', msg: `planning failed: ${planFailure}` });
  }
  if (record.phase !== 'FailedValidation') {
    await state.transitionPhase(backupName, ['New', 'InProgress', 'Finalizing'], 'Finalizing');
  }

  const assembled = await assembleTarball(storage, backupName, { mtime: new Date(record.startedAt ?? record.createdAt) });
  await writeResourceListSidecar(storage, backupName, assembled.resourceList);

  let pvbObjects: unknown[];
  try {
    pvbObjects = await deps.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${backupName}` });
  } catch (err) {
    // The sidecar must still list every PVB: fall back to what state knows.
    await state.recordProblem(backupName, {
      level: 'warn',
      onceKey: 'pvb-list-failed',
      msg: `could not list PVBs, using recorded state: ${(err as Error).message}`,
    });
    pvbObjects = (await state.getPvbs(backupName, await state.allPvbNames(backupName))).filter((p) => p !== undefined);
  }
  await writePodVolumeBackupsSidecar(storage, backupName, pvbObjects);

  const counters = await state.counters(backupName);
  const latest = (await state.getBackup(backupName)) ?? record;
  const decision =
    record.phase === 'FailedValidation'
      ? { phase: 'FailedValidation', reasons: [record.failureReason ?? 'the backup spec is invalid'] }
      : decideBackupPhase({ counters, planFailed: planFailure !== undefined, canceled: latest.cancelRequestedAt !== undefined });
  const phase = decision.phase;
  if (decision.reasons.length > 0) await state.log(backupName, { level: 'info', msg: `phase ${phase}: ${decision.reasons.join('; ')}` });
  const completedAt = clock.now();

  const logs = await state.readLogs(backupName);
  await writeLogsSidecar(
    storage,
    backupName,
    logs.map((l) => JSON.stringify(l)),
  );
  await writeResultsSidecar(storage, backupName, resultsFromLogs(logs));
  await writeBackupMetadata(
    storage,
    backupName,
    veleroBackupJson(latest, phase, decision.reasons, completedAt, counters, deps.config.namespace),
  );

  const moved = await state.transitionPhase(backupName, ['Finalizing', 'New', 'InProgress'], phase, {
    completedAt,
    ...(phase !== 'Completed' && phase !== 'FailedValidation' ? { failureReason: decision.reasons.join('; ') } : {}),
  });
  await state.dropItems(backupName);
  deps.logger.info({ backup: backupName, phase: moved.phase, items: assembled.items, pvbs: pvbObjects.length }, 'backup finished');
  return { phase: moved.phase ?? phase, items: assembled.items, pvbs: pvbObjects.length };
}

/** Velero's results file: errors and warnings for Velero itself, cluster-scoped items, and per namespace. */
export function resultsFromLogs(logs: readonly LogLine[]): BackupResults {
  const errors: ResultSet = {};
  const warnings: ResultSet = {};
  for (const line of logs) {
    const set = line.level === 'error' ? errors : line.level === 'warn' ? warnings : undefined;
    if (!set) continue;
    const ns = typeof line.namespace === 'string' && line.namespace ? line.namespace : undefined;
    if (ns) {
      const byNamespace = set.namespaces ?? {};
      set.namespaces = byNamespace;
      byNamespace[ns] = [...(byNamespace[ns] ?? []), line.msg];
    } else {
      set.velero = [...(set.velero ?? []), line.msg];
    }
  }
  return { errors, warnings };
}

function iso(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString();
}

/** The Backup object as Velero writes it to `velero-backup.json` (spec and status). */
function veleroBackupJson(
  record: BackupRecord,
  phase: string,
  reasons: readonly string[],
  completedAt: number,
  counters: Record<string, number>,
  namespace: string,
): unknown {
  const spec = (record.spec ?? {}) as { ttlMs?: number };
  return {
    apiVersion: 'velero.io/v1',
    kind: 'Backup',
    metadata: { name: record.name, namespace, uid: record.uid, creationTimestamp: iso(record.createdAt) },
    spec: record.spec,
    status: {
      version: 1,
      formatVersion: '1.1.0',
      phase,
      startTimestamp: iso(record.startedAt),
      completionTimestamp: iso(completedAt),
      expiration: spec.ttlMs !== undefined ? iso(completedAt + spec.ttlMs) : undefined,
      progress: { totalItems: counters.totalItems ?? 0, itemsBackedUp: counters.itemsBackedUp ?? 0 },
      hookStatus: { hooksAttempted: counters.hooksAttempted ?? 0, hooksFailed: counters.hooksFailed ?? 0 },
      podVolumeBackups: {
        completed: counters.pvbsCompleted ?? 0,
        failed: counters.pvbsFailed ?? 0,
        canceled: counters.pvbsCanceled ?? 0,
        timedOut: counters.pvbsTimedOut ?? 0,
      },
      errors: counters.errors ?? 0,
      warnings: counters.warnings ?? 0,
      ...(reasons.length > 0 && phase !== 'Completed' ? { failureReason: reasons.join('; ') } : {}),
    },
  };
}
