import { type BackupSpec, blockJobId, ENDED_BACKUP_PHASES, planJobId, RUN_NAMESPACE_LABEL } from '@stowage/core';
import { pvbLabels } from '@stowage/kube';
import { backupHooksJobKey, parseFinalizeJobData, QueueName, qualifiedQueueName } from '@stowage/queue';
import {
  type AssembleResult,
  assembleTarball,
  type BackupItem,
  restageItems,
  StorageError,
  StorageErrorCode,
  writePodVolumeBackupsSidecar,
  writeResourceListSidecar,
} from '@stowage/storage';
import { type Job, WaitingChildrenError } from 'bullmq';
import { PipelineError, PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import type { BackupHooksRecord } from '../hooks/backup-hooks.js';
import { NO_PIPELINE_METRICS, scheduleOf } from '../metrics.js';
import { decideBackupPhase } from '../phase.js';
import { type BlockPlan, podKey } from '../plan/block-plan.js';
import type { PipelineRuntime } from '../runtime.js';
import { writeBackupArchive } from '../state/backup-archive.js';
import type { BackupRecord } from '../state/backup-state.js';
import { awaitBackupHooks } from './backup-hooks.processor.js';
import { addClaimedBlocks } from './window-refill.js';

export { resultsFromLogs } from '../state/backup-archive.js';

export interface FinalizeResult {
  phase: string;
  items: number;
  pvbs: number;
}

/**
 * finalize: runs after plan and every block's post-hooks job. Assembles the Velero layout —
 * tarball, -podvolumebackups.json.gz, -resource-list.json.gz — decides the final phase from the
 * counters and records it; then writes what the backup's views show to storage (the Stowage
 * sidecars, -logs.gz, -results.gz), velero-backup.json last (the final marker), and only then
 * drops everything but the catalogue entry from Redis (docs/architecture.md#where-a-backup-lives-once-it-has-ended).
 *
 * Safe to run twice, and to be cut off anywhere: every write replaces the same key, phases move by
 * CAS. A run that finds the phase ended but the backup not archived (cut off after the phase moved)
 * writes the archive and the marker again from Redis; one that finds it archived finishes the drop.
 */
export async function processFinalize(rt: PipelineRuntime, job: Job, token: string | undefined): Promise<FinalizeResult> {
  const { deps } = rt;
  const { state, storage, clock } = deps;
  const data = parseFinalizeJobData(job.data);
  const { backupName } = data;
  const record = await state.getBackup(backupName);
  if (!record) throw new UnrecoverablePipelineError(PipelineErrorCode.backupMissing, `backup ${backupName} has no record`);
  if (record.archivedAt !== undefined || (ENDED_BACKUP_PHASES as readonly string[]).includes(record.phase)) {
    await archiveEnded(rt, record);
    return { phase: record.phase, items: 0, pvbs: 0 };
  }

  const failures = await job.getIgnoredChildrenFailures();
  const planKey = `${qualifiedQueueName(deps.queuePrefix, QueueName.backups)}:${planJobId(backupName)}`;
  const planFailure = failures[planKey];
  // The backup post hooks' job (a child added below) that failed for good: awaitBackupHooks records it.
  const postHooksKey = backupHooksJobKey(deps.queuePrefix, backupName, 'post');
  const itemBlockKeyPrefix = `${qualifiedQueueName(deps.queuePrefix, QueueName.itemBlocks)}:`;
  for (const [key, reason] of Object.entries(failures)) {
    if (key === planKey || key === postHooksKey) continue;
    // A solo block's item-block job (no post-hooks parent) that failed for good: end the block
    // here as its post-hooks job would have (PartiallyFailed, counted done, one error).
    const soloBlock = key.startsWith(itemBlockKeyPrefix) ? soloBlockIdOf(backupName, key.slice(itemBlockKeyPrefix.length)) : undefined;
    if (soloBlock !== undefined) {
      await state.recordProblem(backupName, {
        level: 'error',
        onceKey: `block-failed:${soloBlock}`,
        msg: `item-block job of ${soloBlock} failed: ${reason}`,
        blockId: soloBlock,
      });
      await state.blockStep(backupName, soloBlock, {
        set: { state: 'PartiallyFailed', completedAt: clock.now(), error: reason },
        once: [{ onceKey: `block-done:${soloBlock}`, field: 'blocksDone' }],
        event: { type: 'block.done', data: { blockId: soloBlock, state: 'PartiallyFailed', pvbs: 0, postHookPods: 0 }, ifCounted: 0 },
      });
      continue;
    }
    await state.recordProblem(backupName, { level: 'error', onceKey: `child-failed:${key}`, msg: `job ${key} failed: ${reason}` });
  }
  if (planFailure !== undefined) {
    await state.recordProblem(backupName, { level: 'error', onceKey: 'plan-failed', msg: `planning failed: ${planFailure}` });
  }
  // A windowed backup whose refills did not all happen (a job that ended a block failed for good
  // before it could add the next ones): add what nobody added, and wait for it.
  const missed = (await rt.window.status(backupName)) ? await rt.window.backstop<BlockPlan>(backupName) : [];
  if (missed.length > 0) {
    await state.log(backupName, { level: 'warn', msg: `finalize found ${missed.length} block(s) not yet dispatched; adding them now` });
    await addClaimedBlocks(rt, { ...data, finalizeJobId: job.id ?? '' }, missed);
    if (token && (await job.moveToWaitingChildren(token))) throw new WaitingChildrenError();
  }
  if (record.phase !== 'FailedValidation') {
    await state.transitionPhase(backupName, ['New', 'InProgress', 'Finalizing'], 'Finalizing');
  }
  // Backup-level post hooks (e.g. resume a paused GitOps controller): this job runs after every
  // block's post hooks, whatever happened to them (failed, deadline, cancel). Only for a backup
  // that started (its pre hooks may have run); their failures count in hookStatus. A backup
  // worker runs them (the api may not exec) while this job is parked; it then runs again from the
  // top and finds them done.
  if (record.phase !== 'FailedValidation' && record.startedAt !== undefined && record.spec) {
    await awaitBackupHooks(rt, job, token, data, record.spec as BackupSpec, 'post');
  }

  // The tarball and the PVB list are independent; so are the sidecars written from them (each a
  // durable write: running them side by side overlaps their fsyncs).
  const listPvbs = async (): Promise<unknown[]> => {
    try {
      return await deps.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${backupName}` });
    } catch (err) {
      // The sidecar must still list every PVB: fall back to what state knows.
      await state.recordProblem(backupName, {
        level: 'warn',
        onceKey: 'pvb-list-failed',
        msg: `could not list PVBs, using recorded state: ${(err as Error).message}`,
      });
      return (await state.getPvbs(backupName, await state.allPvbNames(backupName))).filter((p) => p !== undefined);
    }
  };
  const [assembled, pvbObjects] = await Promise.all([
    assembleValidated(rt, backupName, new Date(record.startedAt ?? record.createdAt)),
    listPvbs().then(async (pvbs) => {
      await writePodVolumeBackupsSidecar(storage, backupName, pvbs);
      return pvbs;
    }),
  ]);

  const counters = await state.counters(backupName);
  const latest = (await state.getBackup(backupName)) ?? record;
  const backupPreFailed = (latest.backupHooks as BackupHooksRecord | undefined)?.pre?.failed;
  const decision =
    record.phase === 'FailedValidation'
      ? { phase: 'FailedValidation', reasons: [record.failureReason ?? 'the backup spec is invalid'] }
      : backupPreFailed !== undefined && latest.cancelRequestedAt === undefined
        ? { phase: 'Failed', reasons: [`${backupPreFailed}: no block was run`] }
        : decideBackupPhase({ counters, planFailed: planFailure !== undefined, canceled: latest.cancelRequestedAt !== undefined });
  const phase = decision.phase;
  if (decision.reasons.length > 0) await state.log(backupName, { level: 'info', msg: `phase ${phase}: ${decision.reasons.join('; ')}` });
  if (phase === 'Canceled') {
    // What the cancel kept of the hook contract, in one line the user can read.
    const started = counters.blocksStarted ?? 0;
    const post = (latest.backupHooks as BackupHooksRecord | undefined)?.post;
    await state.log(backupName, {
      level: 'info',
      msg: `backup canceled: ${started} of ${counters.blocksPlanned ?? started} planned block(s) had started and ran their post hooks once their PVBs stopped; the others never started${post ? `; the backup post hooks ran (${post.hooksRun} run, ${post.hooksFailed} failed)` : ''}`,
    });
  }
  const completedAt = clock.now();

  await writeResourceListSidecar(storage, backupName, assembled.resourceList);

  const moved = await state.transitionPhase(backupName, ['Finalizing', 'New', 'InProgress'], phase, {
    completedAt,
    ...(phase !== 'Completed' && phase !== 'FailedValidation' ? { failureReason: decision.reasons.join('; ') } : {}),
  });
  const ended = await state.getBackup(backupName);
  if (!ended) throw new UnrecoverablePipelineError(PipelineErrorCode.backupMissing, `backup ${backupName} has no record`);
  // Counted by the one run of finalize whose compare-and-set moved the phase.
  if (moved.moved)
    (deps.metrics ?? NO_PIPELINE_METRICS).backupEnded({
      schedule: scheduleOf(ended),
      phase,
      durationMs: ended.startedAt !== undefined ? completedAt - ended.startedAt : undefined,
      items: counters.itemsBackedUp,
    });
  await archiveEnded(rt, ended);
  deps.logger.info({ backup: backupName, phase: moved.phase, items: assembled.items, pvbs: pvbObjects.length }, 'backup finished');
  return { phase: moved.phase ?? phase, items: assembled.items, pvbs: pvbObjects.length };
}

/**
 * An ended backup into storage, then out of Redis: the Stowage sidecars and logs/results (from the
 * state in Redis, the terminal event included), velero-backup.json last — a backup without it is
 * being written, never finished — and only then the record marked archived and the rest dropped.
 */
async function archiveEnded(rt: PipelineRuntime, record: BackupRecord): Promise<void> {
  const { state, storage, clock } = rt.deps;
  await state.archiveAndDrop(
    record,
    async () => {
      // velero-backup.json last, from the same counters as the manifest (finalize's own writes included).
      const manifest = await writeBackupArchive(storage, state, record, (counters) =>
        veleroBackupJson(record, counters, rt.deps.config.namespace),
      );
      // undefined: another run of this finalize archived it meanwhile (and wrote the marker before that).
      if (!manifest) return undefined;
      return { pvbPhases: manifest.pvbPhases };
    },
    () => clock.now(),
  );
}

/**
 * The tarball, from staged items that are known whole. Item-block jobs stage items without fsync
 * (`durable: false`, one fsync pair per item was most of their cost), so after a machine crash a
 * staged item may be missing, empty or truncated although its job completed. This is where that
 * is caught: assembleTarball parses every item it packs (an empty or cut JSON object does not
 * parse: STORAGE_CORRUPT_ITEM), and the number packed must reach the items counted as backed up.
 * If either fails, every item is staged again — durably — from the manifests still held in Redis
 * (they are dropped only after finalize), and the tarball assembled again. The tarball itself is
 * fsynced before the backup may end, so nothing shipped depends on an unflushed item.
 */
async function assembleValidated(rt: PipelineRuntime, backupName: string, mtime: Date): Promise<AssembleResult> {
  const { state, storage } = rt.deps;
  const expected = (await state.counters(backupName)).itemsBackedUp ?? 0;
  let problem: string;
  try {
    const assembled = await assembleTarball(storage, backupName, { mtime });
    if (assembled.items >= expected) return assembled;
    problem = `${expected - assembled.items} of ${expected} staged items are missing`;
  } catch (err) {
    if (!(err instanceof StorageError && err.code === StorageErrorCode.corruptItem)) throw err;
    problem = err.message;
  }
  await state.log(backupName, { level: 'warn', msg: `staged items not whole (${problem}): staging them again from the plan` });
  rt.deps.logger.warn({ backup: backupName, problem }, 'staged items not whole: staging them again from the plan');
  const restaged = await restageFromPlan(rt, backupName);
  const assembled = await assembleTarball(storage, backupName, { mtime });
  if (assembled.items < expected) {
    throw new PipelineError(
      PipelineErrorCode.itemsMissing,
      `backup ${backupName}: ${assembled.items} items staged after restaging ${restaged}, ${expected} counted as backed up`,
    );
  }
  return assembled;
}

/** Stages every item of every block again, durably, from the manifests in Redis (pods failed by a pre hook excluded), replacing the staged segments. */
async function restageFromPlan(rt: PipelineRuntime, backupName: string): Promise<number> {
  const { state, storage } = rt.deps;
  async function* fromPlan(): AsyncGenerator<BackupItem> {
    for (const blockId of await state.blockIds(backupName)) {
      const { plan, block, items } = await state.readBlockContext<BlockPlan, Array<Record<string, unknown> | null>>(backupName, blockId);
      if (!plan || !items) continue;
      const failedPods = new Set(block?.failedPods ?? []);
      const skipped = new Set(plan.pods.filter((p) => failedPods.has(podKey(p))).map((p) => p.itemKey));
      for (const [i, item] of plan.items.entries()) {
        const object = items[i];
        if (!object || skipped.has(item.key)) continue;
        yield { groupResource: item.groupResource, namespace: item.namespace, name: item.name, object };
      }
    }
  }
  return await restageItems(storage, backupName, fromPlan());
}

/** The block id of an item-block job id `<backup>.<blockId>` of this backup, else undefined. */
function soloBlockIdOf(backupName: string, jobId: string): string | undefined {
  const head = `${backupName}.`;
  if (!jobId.startsWith(head)) return undefined;
  const blockId = jobId.slice(head.length);
  return blockId !== '' && blockJobId(backupName, blockId) === jobId ? blockId : undefined;
}

function iso(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString();
}

/** The Backup object as Velero writes it to `velero-backup.json` (spec and status), from the ended record. */
function veleroBackupJson(record: BackupRecord, counters: Record<string, number>, namespace: string): unknown {
  const spec = (record.spec ?? {}) as { ttlMs?: number };
  const { phase } = record;
  const completedAt = record.completedAt ?? record.createdAt;
  return {
    apiVersion: 'velero.io/v1',
    kind: 'Backup',
    metadata: {
      name: record.name,
      namespace,
      uid: record.uid,
      creationTimestamp: iso(record.createdAt),
      // A namespaced backup's own namespace (`namespace` above is Stowage's, where Velero keeps its Backups).
      ...(record.namespace ? { labels: { [RUN_NAMESPACE_LABEL]: record.namespace } } : {}),
    },
    spec: record.spec,
    status: {
      version: 1,
      formatVersion: '1.1.0',
      phase,
      startTimestamp: iso(record.startedAt),
      completionTimestamp: iso(completedAt),
      // When its delete-backup job runs (created + ttl, as Velero's start + ttl).
      expiration: spec.ttlMs ? iso(record.createdAt + spec.ttlMs) : undefined,
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
      ...(record.failureReason && phase !== 'Completed' ? { failureReason: record.failureReason } : {}),
    },
  };
}
