import { postHooksJobId } from '@stowage/core';
import { type Informer, type KubeClients, listSnapshotClasses, snapshotGroup, startInformer, type VolumeSnapshot } from '@stowage/kube';
import { JobName } from '@stowage/queue';
import type { Queue } from 'bullmq';
import type { PipelineLogger } from '../deps.js';
import { PromotingInformerHub } from '../informers/promoting-informer-hub.js';
import { SNAPSHOT_BLOCK_ANNOTATION, SNAPSHOT_LABELS } from './block-snapshots.js';

export interface SnapshotInformerHubOptions {
  kube: KubeClients;
  /** The hooks queue: a block's parked post-hooks job is promoted here. */
  jobQueue?: Queue | undefined;
  logger: PipelineLogger;
  quietAfterErrorMs?: number;
  now?: () => number;
}

/** A snapshot in a state its block's post-hooks job waits for: cut, ready to use, or failed. */
export function snapshotChanged(snapshot: VolumeSnapshot): boolean {
  const status = snapshot.status;
  return Boolean(status?.creationTime || status?.readyToUse === true || status?.error?.message);
}

/**
 * The process's VolumeSnapshot informer (docs/architecture.md#csi-snapshots-and-the-data-mover):
 * every snapshot a backup made (label `stowage.dev/backup-name`), cluster-wide. A block's
 * post-hooks job waits for its snapshots to be cut, then ready; it is promoted the moment one of
 * them is cut, ready or failed (annotation `stowage.dev/block` names the block), so it parks until
 * a real read is due rather than polling every second while the informer is healthy.
 */
export class SnapshotInformerHub extends PromotingInformerHub<VolumeSnapshot> {
  constructor(opts: SnapshotInformerHubOptions) {
    const { kube, ...rest } = opts;
    super({
      ...rest,
      source: {
        label: 'VolumeSnapshot',
        // The informer is generic over client-node's object type; a VolumeSnapshot is plain JSON.
        watch: (options) =>
          startInformer(kube, {
            ...(options as unknown as Omit<Parameters<typeof startInformer>[1], 'path'>),
            path: `/apis/${snapshotGroup}/v1/volumesnapshots`,
            labelSelector: SNAPSHOT_LABELS.backupName,
          }) as unknown as Informer<VolumeSnapshot>,
        nameOf: (snapshot) => snapshot.metadata.name,
        shouldPromote: snapshotChanged,
        jobIdOf: (snapshot) => {
          const backup = snapshot.metadata.labels?.[SNAPSHOT_LABELS.backupName];
          const block = snapshot.metadata.annotations?.[SNAPSHOT_BLOCK_ANNOTATION];
          return backup && block ? postHooksJobId(backup, block) : undefined;
        },
        jobName: JobName.runPostHooks,
      },
    });
  }
}

/** Starts the hub when the cluster serves the snapshot API (else nothing is watched, and parked jobs poll). */
export async function startSnapshotHubIfServed(opts: SnapshotInformerHubOptions): Promise<SnapshotInformerHub | undefined> {
  try {
    if ((await listSnapshotClasses(opts.kube)) === undefined) return undefined;
  } catch (err) {
    opts.logger.warn({ err }, 'could not tell whether the cluster serves CSI snapshots; snapshot waits poll');
    return undefined;
  }
  const hub = new SnapshotInformerHub(opts);
  hub.start();
  return hub;
}
