import {
  type BackedUpItem,
  type BackedUpPodVolume,
  ENDED_RESTORE_PHASES,
  objectKey,
  type RestoreItem,
  type RestoreSpec,
  type RestoreTransformContext,
  resolveRestoreHooks,
  restoreTiers,
  splitGroupResource,
  streamRestoreSelection,
  transformForRestore,
} from '@stowage/core';
import { addRestoreTier, JobName, parseRestoreRunJobData } from '@stowage/queue';
import { backupLayout, readBackupTarball, readGzipJson, type TarballItemRef } from '@stowage/storage';
import type { Job } from 'bullmq';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { NO_PIPELINE_METRICS } from '../metrics.js';
import { itemKeyOf } from '../plan/block-plan.js';
import { blockDownloadNames, claimForDownload, type PlannedBlockDownload } from '../restore/block-downloads.js';
import type { PlannedRestoreHook, PlannedRestoreItem, RestorePodPlan, RestoreTierPlan } from '../restore/restore-plan-types.js';
import { restoreDepsOf } from '../restore/restore-runtime.js';
import {
  claimFromSnapshot,
  completedSnapshotsOf,
  dropSnapshottedVolumes,
  keptByClaim,
  movedAsPodVolumes,
  movedBlockByClaim,
  provideRestoreSnapshot,
} from '../restore/restore-snapshots.js';
import type { PipelineRuntime } from '../runtime.js';
import type { SnapshotStateRecord } from '../snapshots/block-snapshots.js';

export type RestorePlanResult = { skipped: 'ended' | 'canceled' } | { tiers: number; items: number; skipped: number };

interface StoredPvb {
  spec?: { pod?: { namespace?: string; name?: string }; volume?: string };
  status?: { phase?: string; snapshotID?: string };
}

/**
 * restore-plan: New → InProgress; reads the backup's PVBs and tarball from backup storage — the
 * tarball as a stream, parsing only the items the selection can need (core's streamRestoreSelection)
 * — selects (filters, namespace mapping, never-restored kinds, every skip logged with its reason),
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
  // CSI snapshots: moved ones restore like fs-backup volumes; kept ones fill their claim from a snapshot.
  const snapshots = await completedSnapshotsOf(deps.storage, spec.backupName);
  volumeBackups.push(...movedAsPodVolumes(snapshots));
  const kept = keptByClaim(snapshots);
  const movedBlock = spec.restorePVs ? movedBlockByClaim(snapshots) : new Map<string, SnapshotStateRecord>();
  // The tarball is streamed; an item whose path alone says it is not restored is counted, never parsed (issue #45).
  const streamed = streamRestoreSelection(spec, volumeBackups);
  // Fields named, not spread: a spread copy per entry was promoted garbage (~150 B each, 300k entries).
  const select = (entry: TarballItemRef): boolean => {
    const { group, resource } = splitGroupResource(entry.groupResource);
    return !streamed.passOver({ group, resource, namespace: entry.namespace, name: entry.name });
  };
  for await (const entry of readBackupTarball(deps.storage, spec.backupName, { select })) {
    const { group, resource } = splitGroupResource(entry.groupResource);
    streamed.add({ group, resource, namespace: entry.namespace, name: entry.name, object: entry.object as BackedUpItem['object'] });
  }
  const selection = streamed.result();
  if ((kept.size > 0 || movedBlock.size > 0) && spec.restorePVs) {
    const { items: rest, dropped } = dropSnapshottedVolumes(selection.items, new Map([...kept, ...movedBlock]));
    selection.items = rest;
    for (const pv of dropped) {
      await restores.log(name, {
        level: 'info',
        msg: `persistentvolume ${pv} is not restored: its claim is restored into a new volume, from its CSI snapshot or its moved data`,
      });
    }
  }
  // Moved block volumes: written into a new volume by a DataDownload that the restored pod's
  // restore-hooks job drives; the restored claim waits for it with a selector.
  const blockDownloads = planBlockDownloads(name, selection.items, movedBlock);
  for (const claim of blockDownloads.unmounted) {
    await restores.recordProblem(name, {
      level: 'warn',
      onceKey: `block-unmounted:${claim}`,
      msg: `the moved block data of persistentvolumeclaim ${claim} is not restored: no restored pod mounts the claim (its data is written back through a pod's restore); it gets a new, empty volume`,
      namespace: claim.slice(0, claim.indexOf('/')),
    });
  }
  // Why each item is not restored; an excluded namespace or resource is one line with its count.
  await restores.logMany(
    name,
    selection.skipped.map(({ reason, message, count, item }) => ({
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
      const fromSnapshot =
        spec.restorePVs &&
        item.group === '' &&
        item.resource === 'persistentvolumeclaims' &&
        item.namespace !== null &&
        item.targetNamespace !== null
          ? kept.get(objectKey(item.namespace, item.name))
          : undefined;
      if (fromSnapshot && item.targetNamespace !== null) {
        const snapshotName = await provideRestoreSnapshot(deps.kube, {
          restoreName: name,
          targetNamespace: item.targetNamespace,
          record: fromSnapshot,
        });
        claimFromSnapshot(transformed.object as Record<string, unknown>, snapshotName);
      }
      const download =
        item.group === '' && item.resource === 'persistentvolumeclaims' && item.namespace !== null
          ? blockDownloads.byClaim.get(objectKey(item.namespace, item.name))
          : undefined;
      if (download) claimForDownload(transformed.object as Record<string, unknown>, download.selectorValue);
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
        const hooks: PlannedRestoreHook[] = resolveRestoreHooks(transformed.object, spec, deps.config.maxHookTimeoutMs).execHooks.map(
          (hook) => ({
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
          }),
        );
        const blockVolumes = blockDownloads.byPod.get(objectKey(item.namespace, item.name)) ?? [];
        if (volumes.length > 0 || hooks.length > 0 || blockVolumes.length > 0) {
          pods.push({
            namespace: item.targetNamespace,
            name: item.targetName,
            sourceNamespace: item.namespace,
            volumes,
            hooks,
            ...(blockVolumes.length > 0 ? { blockVolumes } : {}),
          });
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
  await restores.setCounter(name, 'itemsNotSelected', selection.skippedCount);
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
    blockVolumes: pods.reduce((n, p) => n + (p.blockVolumes?.length ?? 0), 0),
    skipped: selection.skippedCount,
  };
  await restores.updateRun(name, { tiers: tiers.length, planSummary });
  const first = tiers[0];
  if (first) await addRestoreTier(rt.flowProducer, base, 0, first.batches);
  await restores.updateRun(name, { planCompletedAt: deps.clock.now() });
  await restores.appendEvent(name, 'plan.done', { tiers: tiers.length, totalItems, skipped: selection.skippedCount, pods: pods.length });
  return { tiers: tiers.length, items: totalItems, skipped: selection.skippedCount };
}

/**
 * The DataDownloads of moved block volumes: each claim (backed-up `<ns>/<name>`) that a restored
 * pod mounts, planned for the first such pod; the claims no restored pod mounts.
 */
function planBlockDownloads(
  restoreName: string,
  items: readonly RestoreItem[],
  movedBlock: ReadonlyMap<string, SnapshotStateRecord>,
): { byClaim: Map<string, PlannedBlockDownload>; byPod: Map<string, PlannedBlockDownload[]>; unmounted: string[] } {
  const byClaim = new Map<string, PlannedBlockDownload>();
  const byPod = new Map<string, PlannedBlockDownload[]>();
  if (movedBlock.size === 0) return { byClaim, byPod, unmounted: [] };
  const claims = new Map<string, RestoreItem>();
  for (const item of items) {
    if (item.group === '' && item.resource === 'persistentvolumeclaims' && item.namespace !== null)
      claims.set(objectKey(item.namespace, item.name), item);
  }
  for (const item of items) {
    if (item.group !== '' || item.resource !== 'pods' || item.namespace === null || item.targetNamespace === null) continue;
    const volumes = ((item.object.spec as { volumes?: unknown[] } | undefined)?.volumes ?? []) as Array<{
      name?: string;
      persistentVolumeClaim?: { claimName?: string };
    }>;
    for (const volume of volumes) {
      const claimName = volume.persistentVolumeClaim?.claimName;
      if (!volume.name || !claimName) continue;
      const key = objectKey(item.namespace, claimName);
      const record = movedBlock.get(key);
      const claim = claims.get(key);
      if (!record?.repositorySnapshotId || !claim || byClaim.has(key)) continue;
      const claimSpec = (claim.object.spec ?? {}) as { storageClassName?: string; resources?: { requests?: { storage?: string } } };
      const names = blockDownloadNames(restoreName, item.targetNamespace, claimName);
      const planned: PlannedBlockDownload = {
        ...names,
        volume: volume.name,
        claim: claimName,
        snapshotID: record.repositorySnapshotId,
        ...(claimSpec.storageClassName ? { storageClassName: claimSpec.storageClassName } : {}),
        storage: claimSpec.resources?.requests?.storage ?? String(Math.max(1, record.restoreSizeBytes ?? 1)),
      };
      byClaim.set(key, planned);
      const podKey = objectKey(item.namespace, item.name);
      byPod.set(podKey, [...(byPod.get(podKey) ?? []), planned]);
    }
  }
  const unmounted = [...claims.keys()].filter((key) => movedBlock.has(key) && !byClaim.has(key)).sort();
  return { byClaim, byPod, unmounted };
}
