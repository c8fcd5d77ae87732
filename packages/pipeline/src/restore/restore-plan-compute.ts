/*
 * A restore's plan, computed from the backup's tarball bytes and what the parent read for it: no
 * Redis, no Kubernetes client, no storage credentials. It runs in a process of its own
 * (restore-plan-child.ts, started by restore-plan-process.ts), so the archive is parsed where its
 * memory is capped and cannot stall or take down the process that hosts the restores queue
 * (issue #45). Everything the plan decides leaves through the sink, in order.
 */
import {
  type BackedUpItem,
  type BackedUpPodVolume,
  objectKey,
  type RestoreSpec,
  type RestoreTransformContext,
  resolveRestoreHooks,
  restoreTiers,
  splitGroupResource,
  streamRestoreSelection,
  transformForRestore,
} from '@stowage/core';
import { readTarballItems, type TarballItemRef } from '@stowage/storage/tarball-reader';
import type { PipelineConfig } from '../deps.js';
import { itemKeyOf } from '../plan/block-plan.js';
import type { SnapshotStateRecord } from '../snapshots/block-snapshots.js';
import type { RunProblem } from '../state/run-state.js';
import { claimForDownload, planBlockDownloads } from './block-download-plan.js';
import type { PlannedRestoreHook, PlannedRestoreItem, RestorePodPlan, RestoreTierPlan } from './restore-plan-types.js';
import {
  claimFromSnapshot,
  dropSnapshottedVolumes,
  keptByClaim,
  movedAsPodVolumes,
  movedBlockByClaim,
  restoredSnapshotName,
} from './snapshot-claims.js';

/** What the plan is computed from, besides the tarball: all of it JSON, sent to the plan's process. */
export interface RestorePlanInput {
  restoreName: string;
  restoreUid: string;
  spec: RestoreSpec;
  /** The backup's PodVolumeBackups as the restore sees them. */
  volumeBackups: BackedUpPodVolume[];
  /** The backup's completed CSI snapshots (restore-snapshots.ts completedSnapshotsOf). */
  snapshots: SnapshotStateRecord[];
  config: Pick<PipelineConfig, 'restoreBatchSize' | 'restoreWaitImage' | 'restoreWaitCommand' | 'maxHookTimeoutMs'>;
}

/** A restore log line as RunState.log takes it. */
export interface RestorePlanLogLine {
  level: 'info' | 'warn';
  msg: string;
  [field: string]: unknown;
}

/** Where the plan goes, call by call, each awaited: the restore's state in Redis (restore-plan.processor.ts). */
export interface RestorePlanSink {
  log(lines: RestorePlanLogLine[]): Promise<void>;
  problem(problem: RunProblem): Promise<void>;
  /** A kept CSI snapshot the claim `targetNamespace`/… is restored from, as the VolumeSnapshot `name`: made before the plan is stored. */
  provideSnapshot(request: { targetNamespace: string; record: SnapshotStateRecord; name: string }): Promise<void>;
  batch(id: string, items: PlannedRestoreItem[]): Promise<void>;
  pod(pod: RestorePodPlan): Promise<void>;
}

export interface RestorePlanSummary {
  tiers: Array<Pick<RestoreTierPlan, 'index' | 'groupResources' | 'items' | 'batches' | 'waitUntil'>>;
  pods: number;
  podVolumes: number;
  blockVolumes: number;
  skipped: number;
}

export interface RestorePlanOutcome {
  tiers: RestoreTierPlan[];
  totalItems: number;
  summary: RestorePlanSummary;
}

/**
 * Selects (filters, namespace mapping, never-restored kinds, every skip logged with its reason),
 * orders into tiers and transforms each item (core's rules); the tarball is read as a stream and
 * only the items the selection can need are parsed (core's streamRestoreSelection). Batches and
 * pods go to the sink as each tier is planned; the tiers are returned.
 */
export async function computeRestorePlan(
  input: RestorePlanInput,
  tarball: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  sink: RestorePlanSink,
): Promise<RestorePlanOutcome> {
  const { spec, restoreName: name, config } = input;
  const volumeBackups = [...input.volumeBackups, ...movedAsPodVolumes(input.snapshots)];
  // CSI snapshots: moved ones restore like fs-backup volumes; kept ones fill their claim from a snapshot.
  const kept = keptByClaim(input.snapshots);
  const movedBlock = spec.restorePVs ? movedBlockByClaim(input.snapshots) : new Map<string, SnapshotStateRecord>();
  // An item whose path alone says it is not restored is counted, never parsed (issue #45).
  const streamed = streamRestoreSelection(spec, volumeBackups);
  // Fields named, not spread: a spread copy per entry was promoted garbage (~150 B each, 300k entries).
  const select = (entry: TarballItemRef): boolean => {
    const { group, resource } = splitGroupResource(entry.groupResource);
    return !streamed.passOver({ group, resource, namespace: entry.namespace, name: entry.name });
  };
  const label = `backup ${spec.backupName}`;
  for await (const entry of readTarballItems(tarball, label, `${label}'s tarball`, { select })) {
    const { group, resource } = splitGroupResource(entry.groupResource);
    streamed.add({ group, resource, namespace: entry.namespace, name: entry.name, object: entry.object as BackedUpItem['object'] });
  }
  const selection = streamed.result();
  if ((kept.size > 0 || movedBlock.size > 0) && spec.restorePVs) {
    const { items: rest, dropped } = dropSnapshottedVolumes(selection.items, new Map([...kept, ...movedBlock]));
    selection.items = rest;
    await sink.log(
      dropped.map((pv) => ({
        level: 'info' as const,
        msg: `persistentvolume ${pv} is not restored: its claim is restored into a new volume, from its CSI snapshot or its moved data`,
      })),
    );
  }
  // Moved block volumes: written into a new volume by a DataDownload that the restored pod's
  // restore-hooks job drives; the restored claim waits for it with a selector.
  const blockDownloads = planBlockDownloads(name, selection.items, movedBlock);
  for (const claim of blockDownloads.unmounted) {
    await sink.problem({
      level: 'warn',
      onceKey: `block-unmounted:${claim}`,
      msg: `the moved block data of persistentvolumeclaim ${claim} is not restored: no restored pod mounts the claim (its data is written back through a pod's restore); it gets a new, empty volume`,
      namespace: claim.slice(0, claim.indexOf('/')),
    });
  }
  // Why each item is not restored; an excluded namespace or resource is one line with its count.
  await sink.log(
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
    restoreUid: input.restoreUid,
    spec,
    volumes: selection.volumes,
    restoreWait: { image: config.restoreWaitImage, command: config.restoreWaitCommand },
  };
  const tiers: RestoreTierPlan[] = [];
  const summary: RestorePlanSummary = { tiers: [], pods: 0, podVolumes: 0, blockVolumes: 0, skipped: selection.skippedCount };
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
        const snapshotName = restoredSnapshotName(name, fromSnapshot);
        await sink.provideSnapshot({ targetNamespace: item.targetNamespace, record: fromSnapshot, name: snapshotName });
        claimFromSnapshot(transformed.object as Record<string, unknown>, snapshotName);
      }
      const download =
        item.group === '' && item.resource === 'persistentvolumeclaims' && item.namespace !== null
          ? blockDownloads.byClaim.get(objectKey(item.namespace, item.name))
          : undefined;
      if (download) claimForDownload(transformed.object as Record<string, unknown>, download.selectorValue);
      for (const warning of transformed.warnings) {
        await sink.problem({
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
        const hooks: PlannedRestoreHook[] = resolveRestoreHooks(transformed.object, spec, config.maxHookTimeoutMs).execHooks.map(
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
          await sink.pod({
            namespace: item.targetNamespace,
            name: item.targetName,
            sourceNamespace: item.namespace,
            volumes,
            hooks,
            ...(blockVolumes.length > 0 ? { blockVolumes } : {}),
          });
          summary.pods++;
          summary.podVolumes += volumes.length;
          summary.blockVolumes += blockVolumes.length;
        }
      }
    }
    let batchCount = 0;
    for (let start = 0; start < planned.length; start += config.restoreBatchSize)
      await sink.batch(`${tier.index}.${batchCount++}`, planned.slice(start, start + config.restoreBatchSize));
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
    summary.tiers.push({
      index: tier.index,
      groupResources: tier.groupResources,
      items: planned.length,
      batches: batchCount,
      waitUntil: tier.waitUntil,
    });
  }
  return { tiers, totalItems: tiers.reduce((sum, t) => sum + t.items, 0), summary };
}
