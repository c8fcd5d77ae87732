import { postHooksJobId } from '@stowage/core';
import { isPvbTerminal, type PodVolumeBackup, type PvbClient, pvbLabels } from '@stowage/kube';
import { JobName } from '@stowage/queue';
import type { Queue } from 'bullmq';
import type { PipelineLogger } from '../deps.js';
import { groupPromotion, PromotingInformerHub } from '../informers/promoting-informer-hub.js';

export interface PvbInformerHubOptions {
  pvbs: PvbClient;
  /** The hooks queue: a block's parked post-hooks job is promoted here. Omit to only cache. */
  jobQueue?: Queue | undefined;
  logger: PipelineLogger;
  /** The cache counts as healthy only if no watch error was reported for this long. Default 10 s. */
  quietAfterErrorMs?: number;
  now?: () => number;
}

/** The backup a PVB belongs to (its label, or the tag Velero's shape also carries). */
function backupOf(pvb: PodVolumeBackup): string | undefined {
  return pvb.metadata.labels?.[pvbLabels.backupName] ?? pvb.spec.tags?.backup;
}

/** `<backup>/<block>` of a PVB that names its block (tag `block`, set by item-block), else undefined. */
function blockKeyOf(pvb: PodVolumeBackup): string | undefined {
  const backup = backupOf(pvb);
  const block = pvb.spec.tags?.block;
  return backup && block ? `${backup}/${block}` : undefined;
}

/**
 * The process's PVB informer: the promoting hub over PodVolumeBackups. A block's post-hooks job
 * waits for all of the block's PVBs, so it is promoted when a PVB ends and every PVB of the same
 * block in the cache has ended too (one promotion per block, not one per PVB). PVBs are indexed
 * by the block they name; one not yet in the cache only makes the job look early, and re-park.
 * PVBs created by older versions name no block: nothing is promoted for them (their pvb-watch
 * jobs poll).
 */
export class PvbInformerHub extends PromotingInformerHub<PodVolumeBackup> {
  constructor(opts: PvbInformerHubOptions) {
    const { pvbs, ...rest } = opts;
    const nameOf = (pvb: PodVolumeBackup) => pvb.metadata.name;
    super({
      ...rest,
      source: {
        label: 'PVB',
        namespace: pvbs.namespace,
        watch: (options) => pvbs.watchPvbs(options),
        nameOf,
        ...groupPromotion({ nameOf, groupOf: blockKeyOf, hasEnded: isPvbTerminal }),
        jobIdOf: (pvb) => {
          const backup = backupOf(pvb);
          const block = pvb.spec.tags?.block;
          return backup && block ? postHooksJobId(backup, block) : undefined;
        },
        jobName: JobName.runPostHooks,
      },
    });
  }
}
