import { type BackedUpPodVolume, ENDED_RESTORE_PHASES, type RestoreSpec } from '@stowage/core';
import { addRestoreTier, JobName, parseRestoreRunJobData } from '@stowage/queue';
import { backupLayout, openBackupTarball, readGzipJson } from '@stowage/storage';
import type { Job } from 'bullmq';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { NO_PIPELINE_METRICS } from '../metrics.js';
import type { RestorePlanInput } from '../restore/restore-plan-compute.js';
import { type RestorePlanStore, runRestorePlanProcess } from '../restore/restore-plan-process.js';
import { restoreDepsOf } from '../restore/restore-runtime.js';
import { completedSnapshotsOf, provideRestoreSnapshot } from '../restore/restore-snapshots.js';
import type { PipelineRuntime } from '../runtime.js';

export type RestorePlanResult =
  | { skipped: 'ended' | 'canceled' }
  | {
      tiers: number;
      items: number;
      skipped: number;
      /** The plan process's peak resident memory (absent when the plan was stored by an earlier run). */
      planPeakRssBytes?: number;
    };

interface StoredPvb {
  spec?: { pod?: { namespace?: string; name?: string }; volume?: string };
  status?: { phase?: string; snapshotID?: string };
}

/**
 * restore-plan: New → InProgress; reads the backup's PVBs and completed CSI snapshots from backup
 * storage, then streams its tarball into the plan's own process (restore-plan-process.ts), which
 * selects, orders into tiers and transforms (restore-plan-compute.ts) while this process stores
 * the batches and the pods that get PVRs or post-restore hooks as they come, makes the
 * VolumeSnapshots kept snapshots restore from, and logs every skip; then the tiers, and tier 0 is
 * added under finalize. A re-run after the plan was stored only re-adds tier 0 (a no-op while its
 * jobs exist).
 */
export async function processRestorePlan(rt: PipelineRuntime, job: Job): Promise<RestorePlanResult> {
  const { deps } = rt;
  const { restores } = restoreDepsOf(deps);
  const data = parseRestoreRunJobData(job.data, JobName.restorePlan);
  const name = data.restoreName;
  const base = { restoreName: name, restoreUid: data.restoreUid, ...(data.requestId ? { requestId: data.requestId } : {}) };
  let record = await restores.getRestore(name);
  if (!record) throw new UnrecoverablePipelineError(PipelineErrorCode.backupMissing, `restore ${name} has no record`);
  if ((ENDED_RESTORE_PHASES as readonly string[]).includes(record.phase)) return { skipped: 'ended' };
  if (record.cancelRequestedAt !== undefined) return { skipped: 'canceled' };
  const spec = record.spec as RestoreSpec;
  const now = deps.clock.now();
  const started = await restores.transitionPhase(name, ['New'], 'InProgress', {
    startedAt: now,
    deadlineAt: now + spec.itemOperationTimeoutMs,
  });
  if (started.moved) (deps.metrics ?? NO_PIPELINE_METRICS).restoreStarted();
  record = (await restores.getRestore(name)) ?? record;
  if (record.planCompletedAt !== undefined) {
    const tier0 = await restores.getTier(name, 0);
    if (tier0) await addRestoreTier(rt.flowProducer, base, 0, tier0.batches);
    return { tiers: record.tiers ?? 0, items: 0, skipped: 0 };
  }

  const storedPvbs = ((await readGzipJson(deps.storage, backupLayout(spec.backupName).podVolumeBackups)) ?? []) as StoredPvb[];
  const volumeBackups: BackedUpPodVolume[] = storedPvbs.flatMap((pvb) =>
    pvb.spec?.pod?.namespace && pvb.spec.pod.name && pvb.spec.volume
      ? [
          {
            podNamespace: pvb.spec.pod.namespace,
            podName: pvb.spec.pod.name,
            volume: pvb.spec.volume,
            phase: pvb.status?.phase ?? 'New',
            ...(pvb.status?.snapshotID ? { snapshotID: pvb.status.snapshotID } : {}),
          },
        ]
      : [],
  );
  const input: RestorePlanInput = {
    restoreName: name,
    restoreUid: record.uid,
    spec,
    volumeBackups,
    snapshots: await completedSnapshotsOf(deps.storage, spec.backupName),
    config: {
      restoreBatchSize: deps.config.restoreBatchSize,
      restoreWaitImage: deps.config.restoreWaitImage,
      restoreWaitCommand: deps.config.restoreWaitCommand,
      maxHookTimeoutMs: deps.config.maxHookTimeoutMs,
    },
  };
  const tarball = await openBackupTarball(deps.storage, spec.backupName);
  const writer = restores.planWriter(name);
  const store: RestorePlanStore = {
    log: (lines) => restores.logMany(name, lines),
    problem: async (problem) => {
      await restores.recordProblem(name, problem);
    },
    provideSnapshot: async ({ targetNamespace, record: snapshot }) => {
      await provideRestoreSnapshot(deps.kube, { restoreName: name, targetNamespace, record: snapshot });
    },
    batch: (id, itemsJson) => writer.batchJson(id, itemsJson),
    pod: (pod) => writer.pod(pod),
  };
  const plan = await runRestorePlanProcess(input, tarball, store, { heapMb: deps.config.restorePlanHeapMb });
  for (const tier of plan.tiers) await writer.tier(tier);
  await writer.flush();
  const { tiers, totalItems, summary: planSummary } = plan;
  await restores.setCounter(name, 'totalItems', totalItems);
  await restores.setCounter(name, 'itemsNotSelected', planSummary.skipped);
  await restores.updateRun(name, { tiers: tiers.length, planSummary });
  deps.logger.info({ restoreName: name, items: totalItems, planPeakRssBytes: plan.peakRssBytes }, 'restore planned');
  const first = tiers[0];
  if (first) await addRestoreTier(rt.flowProducer, base, 0, first.batches);
  await restores.updateRun(name, { planCompletedAt: deps.clock.now() });
  await restores.appendEvent(name, 'plan.done', { tiers: tiers.length, totalItems, skipped: planSummary.skipped, pods: planSummary.pods });
  return { tiers: tiers.length, items: totalItems, skipped: planSummary.skipped, planPeakRssBytes: plan.peakRssBytes };
}
