import {
  type BackedUpItem,
  type BackedUpPodVolume,
  ENDED_RESTORE_PHASES,
  groupSkippedItems,
  objectKey,
  type RestoreSpec,
  type RestoreTransformContext,
  resolveRestoreHooks,
  restoreTiers,
  selectRestoreItems,
  splitGroupResource,
  transformForRestore,
} from '@stowage/core';
import { addRestoreTier, JobName, parseRestoreRunJobData } from '@stowage/queue';
import { backupLayout, readBackupTarball, readGzipJson } from '@stowage/storage';
import type { Job } from 'bullmq';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { itemKeyOf } from '../plan/block-plan.js';
import type { PlannedRestoreHook, PlannedRestoreItem, RestorePodPlan, RestoreTierPlan } from '../restore/restore-plan-types.js';
import { restoreDepsOf } from '../restore/restore-runtime.js';
import type { PipelineRuntime } from '../runtime.js';

export type RestorePlanResult = { skipped: 'ended' | 'canceled' } | { tiers: number; items: number; skipped: number };

interface StoredPvb {
  spec?: { pod?: { namespace?: string; name?: string }; volume?: string };
  status?: { phase?: string; snapshotID?: string };
}

/**
 * restore-plan: New → InProgress; reads the backup's tarball and its PVBs from backup storage,
 * selects (filters, namespace mapping, never-restored kinds, every skip logged with its reason),
 * orders into tiers and transforms each item (core's rules), stores tiers, batches and the pods
 * that get PVRs or post-restore hooks, and adds tier 0 under finalize. A re-run after the plan
 * was stored only re-adds tier 0 (a no-op while its jobs exist).
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
  await restores.transitionPhase(name, ['New'], 'InProgress', { startedAt: now, deadlineAt: now + spec.itemOperationTimeoutMs });
  record = (await restores.getRestore(name)) ?? record;
  if (record.planCompletedAt !== undefined) {
    const tier0 = await restores.getTier(name, 0);
    if (tier0) await addRestoreTier(rt.flowProducer, base, 0, tier0.batches);
    return { tiers: record.tiers ?? 0, items: 0, skipped: 0 };
  }

  const items: BackedUpItem[] = [];
  for await (const entry of readBackupTarball(deps.storage, spec.backupName)) {
    const { group, resource } = splitGroupResource(entry.groupResource);
    items.push({ group, resource, namespace: entry.namespace, name: entry.name, object: entry.object as BackedUpItem['object'] });
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
  const selection = selectRestoreItems(items, spec, volumeBackups);
  // Why each item is not restored; an excluded namespace or resource is one line with its count.
  await restores.logMany(
    name,
    groupSkippedItems(selection.skipped).map(({ reason, message, count, item }) => ({
      level: 'info' as const,
      msg: count === 1 ? message : `${message} (${count} items)`,
      reason,
      ...(item
        ? { item: itemKeyOf(item.group ? `${item.resource}.${item.group}` : item.resource, item.namespace ?? undefined, item.name) }
        : {}),
      ...(count === 1 ? {} : { items: count }),
    })),
  );

  const context: RestoreTransformContext = {
    backupName: spec.backupName,
    restoreName: name,
    restoreUid: record.uid,
    spec,
    volumes: selection.volumes,
    restoreWait: { image: deps.config.restoreWaitImage, command: deps.config.restoreWaitCommand },
  };
  const tiers: RestoreTierPlan[] = [];
  const batches = new Map<string, PlannedRestoreItem[]>();
  const pods: RestorePodPlan[] = [];
  const batchSize = deps.config.restoreBatchSize;
  for (const tier of restoreTiers(selection.items)) {
    const planned: PlannedRestoreItem[] = [];
    for (const item of tier.items) {
      const transformed = transformForRestore(item, context);
      for (const warning of transformed.warnings) {
        await restores.recordProblem(name, {
          level: 'warn',
          onceKey: `transform:${item.resource}:${item.namespace}:${item.name}:${warning.annotation}`,
          msg: warning.message,
          namespace: item.targetNamespace ?? undefined,
        });
      }
      const groupResource = item.group ? `${item.resource}.${item.group}` : item.resource;
      const apiVersion = String(transformed.object.apiVersion ?? 'v1');
      const version = apiVersion.includes('/') ? apiVersion.slice(apiVersion.indexOf('/') + 1) : apiVersion;
      planned.push({
        key: itemKeyOf(groupResource, item.targetNamespace ?? undefined, item.targetName),
        groupResource,
        group: item.group,
        version,
        resource: item.resource,
        kind: String(transformed.object.kind ?? ''),
        namespace: item.targetNamespace,
        name: item.targetName,
        sourceNamespace: item.namespace,
        object: transformed.object,
      });
      if (item.group === '' && item.resource === 'pods' && item.namespace !== null && item.targetNamespace !== null) {
        const volumes = selection.volumes.podVolumes[objectKey(item.namespace, item.name)] ?? [];
        const hooks: PlannedRestoreHook[] = resolveRestoreHooks(transformed.object, spec).execHooks.map((hook) => ({
          container: hook.container,
          command: hook.command,
          onError: hook.onError,
          timeoutMs: hook.execTimeoutMs,
          source: hook.source,
          hookName: hook.specName ?? '',
          index: hook.index,
          ...(hook.invalid ? { invalid: hook.invalid.message } : {}),
          waitTimeoutMs: hook.waitTimeoutMs,
          waitForReady: hook.waitForReady,
        }));
        if (volumes.length > 0 || hooks.length > 0) {
          pods.push({ namespace: item.targetNamespace, name: item.targetName, sourceNamespace: item.namespace, volumes, hooks });
        }
      }
    }
    let batchCount = 0;
    for (let start = 0; start < planned.length; start += batchSize)
      batches.set(`${tier.index}.${batchCount++}`, planned.slice(start, start + batchSize));
    const waitFor =
      tier.waitUntil === 'crds-established'
        ? planned.filter((p) => p.groupResource === 'customresourcedefinitions.apiextensions.k8s.io').map((p) => p.name)
        : tier.waitUntil === 'namespaces-active'
          ? planned.filter((p) => p.groupResource === 'namespaces').map((p) => p.name)
          : [];
    tiers.push({
      index: tier.index,
      groupResources: tier.groupResources,
      waitUntil: tier.waitUntil,
      batches: batchCount,
      items: planned.length,
      waitFor,
    });
  }

  await restores.putPlan(name, { tiers, batches, pods });
  const totalItems = tiers.reduce((sum, t) => sum + t.items, 0);
  await restores.setCounter(name, 'totalItems', totalItems);
  await restores.setCounter(name, 'itemsNotSelected', selection.skipped.length);
  const planSummary = {
    tiers: tiers.map(({ index, groupResources, items: n, batches: b, waitUntil }) => ({
      index,
      groupResources,
      items: n,
      batches: b,
      waitUntil,
    })),
    pods: pods.length,
    podVolumes: pods.reduce((n, p) => n + p.volumes.length, 0),
    skipped: selection.skipped.length,
  };
  await restores.updateRun(name, { tiers: tiers.length, planSummary });
  const first = tiers[0];
  if (first) await addRestoreTier(rt.flowProducer, base, 0, first.batches);
  await restores.updateRun(name, { planCompletedAt: deps.clock.now() });
  await restores.appendEvent(name, 'plan.done', { tiers: tiers.length, totalItems, skipped: selection.skipped.length, pods: pods.length });
  return { tiers: tiers.length, items: totalItems, skipped: selection.skipped.length };
}
