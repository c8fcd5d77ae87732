import { pvrName, type RestoreSpec } from '@stowage/core';
import { pvrLabels } from '@stowage/kube';
import { addRestoreHooksFlow, JobName, parseRestoreItemsJobData, restoreJobIds } from '@stowage/queue';
import type { Job } from 'bullmq';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { InFlightLimit } from '../restore/in-flight-limit.js';
import { type ItemWriteResult, writeRestoreItem } from '../restore/item-writer.js';
import { restoreApiShares } from '../restore/restore-api-cap.js';
import type { PlannedRestoreItem, RestorePodPlan } from '../restore/restore-plan-types.js';
import { restoreDepsOf } from '../restore/restore-runtime.js';
import type { ItemResult } from '../restore/restore-state.js';
import type { PipelineRuntime } from '../runtime.js';
import { lookAgainOnceParked } from '../volume-ops/watch-volume-ops.js';

export type RestoreItemsResult =
  | { canceled: true }
  | { created: number; updated: number; skipped: number; failed: number; already: number };

/**
 * restore-items: creates one batch of a tier's items at once, at most the job's share of the
 * restore's API cap in flight (restoreApiShares: with the queue's global concurrency, the cap holds
 * across every worker process). Items with a recorded result are passed over (a re-run creates
 * nothing twice); a 409 is compared and skipped or updated by `existingResourcePolicy`. A pod
 * this restore created that has volume data or post-restore hooks gets its PVRs (deterministic
 * names, 409 = exists) and its restore-hooks job under finalize. Per-item
 * refusals are recorded as failed with the API server's reason; an error worth retrying is
 * thrown after the rest of the batch was recorded.
 */
export async function processRestoreItems(rt: PipelineRuntime, job: Job): Promise<RestoreItemsResult> {
  const { deps } = rt;
  const { restores } = restoreDepsOf(deps);
  const data = parseRestoreItemsJobData(job.data);
  const name = data.restoreName;
  const record = await restores.getRestore(name);
  if (!record) throw new UnrecoverablePipelineError(PipelineErrorCode.backupMissing, `restore ${name} has no record`);
  if (record.cancelRequestedAt !== undefined) return { canceled: true };
  const items = await restores.getBatch(name, data.tier, data.batch);
  if (!items)
    throw new UnrecoverablePipelineError(PipelineErrorCode.blockMissing, `restore ${name} has no batch ${data.tier}.${data.batch}`);
  const spec = record.spec as RestoreSpec;
  const known = await restores.itemResultsOf(
    name,
    items.map((i) => i.key),
  );
  const todo = items.filter((_, i) => known[i] === undefined);
  const base = { restoreName: name, restoreUid: data.restoreUid, ...(data.requestId ? { requestId: data.requestId } : {}) };

  const limit = new InFlightLimit(restoreApiShares(deps.config.restoreMaxInFlight).perJob);
  let retryable: unknown;
  const results: Array<{ key: string; result: ItemResult }> = [];
  const counts = { created: 0, updated: 0, skipped: 0, failed: 0, already: items.length - todo.length };
  await Promise.all(
    todo.map(async (item) => {
      let written: ItemWriteResult;
      try {
        written = await writeRestoreItem(deps.kube, limit, { item, restoreName: name, policy: spec.existingResourcePolicy });
        if (item.groupResource === 'pods') {
          if (written.outcome === 'created') await startPodFollowUp(rt, limit, base, record.deadlineAt, item, written);
          else await warnPodNotOurs(rt, name, item, written.outcome);
        }
      } catch (err) {
        retryable ??= err;
        return;
      }
      const at = deps.clock.now();
      results.push({ key: item.key, result: { outcome: written.outcome, reason: written.reason ?? written.warning, at } });
      if (written.outcome === 'created') counts.created++;
      else if (written.outcome === 'updated') counts.updated++;
      else if (written.outcome === 'exists-skipped') counts.skipped++;
      else counts.failed++;
      const where = { item: item.key, namespace: item.namespace ?? undefined };
      if (written.outcome === 'failed') {
        await restores.recordProblem(name, {
          level: 'error',
          onceKey: `item:${item.key}`,
          msg: `could not restore ${item.key}: ${written.reason}`,
          ...where,
        });
      } else if (written.warning) {
        await restores.recordProblem(name, { level: 'warn', onceKey: `item:${item.key}`, msg: written.warning, ...where });
      }
    }),
  );
  await restores.recordItemResults(name, results);
  await restores.appendEvent(name, 'items.batch-done', { tier: data.tier, batch: data.batch, ...counts });
  if (retryable !== undefined) throw retryable;
  return counts;
}

/**
 * A pod this restore created: its PVRs (registered first, then created; 409 = exists) and its
 * restore-hooks job (which watches those PVRs), when it has volume data or post-restore hooks.
 */
async function startPodFollowUp(
  rt: PipelineRuntime,
  limit: InFlightLimit,
  base: { restoreName: string; restoreUid: string; requestId?: string },
  deadlineAt: number | undefined,
  item: PlannedRestoreItem,
  written: ItemWriteResult,
): Promise<void> {
  const { deps } = rt;
  const { restores } = restoreDepsOf(deps);
  const namespace = item.namespace as string;
  const plan = await restores.getPodPlan(base.restoreName, namespace, item.name);
  if (!plan) return;
  const uid = written.object?.metadata?.uid;
  if (!uid) throw new Error(`restored pod ${namespace}/${item.name} has no uid in the API server's answer`);
  // With moved block volumes the PVRs are made by the hooks job once those are written: the pod's
  // volumes exist only then, and a PVR waiting for them would hold a slot of the node's agent.
  const names = await createPodPvrs(
    rt,
    limit,
    base,
    { plan, podNamespace: namespace, podName: item.name, podUid: uid },
    {
      create: !plan.blockVolumes?.length,
    },
  );
  // The hooks job watches the pod's PVRs itself. While the informer is healthy it promotes the
  // job when the pod's last PVR ends, so the job is parked until a real read is due (as a watch
  // look parks), never past the restore's deadline; without one it polls from the start.
  const now = deps.clock.now();
  const hooksDeadlineAt = deadlineAt ?? now + 4 * 3_600_000;
  // A pod with moved block volumes: its job writes them back (DataDownloads) from the start.
  const parkMs =
    rt.pvrHub?.healthy() === true && !plan.blockVolumes?.length
      ? Math.max(1, Math.min(deps.config.pvbRealReadEveryMs, hooksDeadlineAt - now))
      : 0;
  await addRestoreHooksFlow(rt.flowProducer, {
    base,
    podNamespace: namespace,
    podName: item.name,
    podUid: uid,
    pvrs: names,
    deadlineAt: hooksDeadlineAt,
    parkMs,
  });
  const last = names.at(-1);
  if (last === undefined || parkMs === 0) return;
  // Nothing could wake the job before it was parked: a cancel asked meanwhile (cancelRestore wakes
  // the parked jobs), or PVRs that ended already — any one of the pod's stands for all of them
  // (the hub checks the whole pod).
  await lookAgainOnceParked(
    rt,
    { name: JobName.runRestoreHooks, id: restoreJobIds.hooks(base.restoreName, namespace, item.name) },
    {
      recheck: () => rt.pvrHub?.promoteIfDue(last),
      cancelRequested: async () => (await restores.cancelRequestedAt(base.restoreName)) !== undefined,
    },
  );
}

/** A pod that existed already (not this restore's) gets no volume data and no hooks (as in Velero): said once, not silently. */
async function warnPodNotOurs(rt: PipelineRuntime, restoreName: string, item: PlannedRestoreItem, outcome: string): Promise<void> {
  const { restores } = restoreDepsOf(rt.deps);
  const plan = await restores.getPodPlan(restoreName, item.namespace as string, item.name);
  if (!plan) return;
  await restores.recordProblem(restoreName, {
    level: 'warn',
    onceKey: `pod-not-ours:${item.key}`,
    msg: `pod ${item.namespace}/${item.name} ${outcome === 'failed' ? 'was not created' : 'existed already'}: its ${plan.volumes.length} volume(s) are not restored and its ${plan.hooks.length} post-restore hook(s) do not run`,
    namespace: item.namespace ?? undefined,
    item: item.key,
  });
}

/**
 * A restored pod's PVRs (deterministic names; each registered first, then created, 409 = exists);
 * with `create: false` only registered (the hooks job creates them later). Returns their names.
 */
export async function createPodPvrs(
  rt: PipelineRuntime,
  limit: InFlightLimit,
  base: { restoreName: string; restoreUid: string; requestId?: string },
  pod: { plan: RestorePodPlan; podNamespace: string; podName: string; podUid: string },
  opts: { create: boolean },
): Promise<string[]> {
  const { deps } = rt;
  const { restores, pvrs } = restoreDepsOf(deps);
  const { plan, podNamespace: namespace, podName, podUid: uid } = pod;
  const names: string[] = [];
  for (const volume of plan.volumes) {
    const pvr = pvrName(base.restoreName, uid, volume.volume);
    names.push(pvr);
    await restores.registerPvr(base.restoreName, {
      name: pvr,
      podNamespace: namespace,
      podName,
      podUid: uid,
      volume: volume.volume,
      snapshotID: volume.snapshotID,
      phase: 'New',
    });
    if (!opts.create) continue;
    const { created } = await limit.run(() =>
      pvrs.create({
        metadata: {
          name: pvr,
          labels: { [pvrLabels.restoreName]: base.restoreName, [pvrLabels.restoreUid]: base.restoreUid, [pvrLabels.podUid]: uid },
        },
        spec: {
          pod: { namespace, name: podName, uid },
          volume: volume.volume,
          snapshotID: volume.snapshotID,
          backupStorageLocation: deps.config.backupStorageLocation,
          repoIdentifier: 'repository',
          sourceNamespace: plan.sourceNamespace,
          uploaderType: 'stowage',
        },
      }),
    );
    if (created)
      await restores.appendEvent(base.restoreName, 'pvr.created', { pvr, pod: `${namespace}/${podName}`, volume: volume.volume });
  }
  return names;
}
