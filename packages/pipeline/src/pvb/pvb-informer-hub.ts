import { pvbWatchJobId } from '@stowage/core';
import { isPvbTerminal, type PodVolumeBackup, type PvbClient, pvbLabels } from '@stowage/kube';
import { JobName } from '@stowage/queue';
import type { Queue } from 'bullmq';
import type { PipelineLogger } from '../deps.js';
import { PromotingInformerHub } from '../informers/promoting-informer-hub.js';

export interface PvbInformerHubOptions {
  pvbs: PvbClient;
  /** The pvb-watch queue: delayed watch jobs are promoted here. Omit to only cache. */
  jobQueue?: Queue | undefined;
  logger: PipelineLogger;
  /** The cache counts as healthy only if no watch error was reported for this long. Default 10 s. */
  quietAfterErrorMs?: number;
  now?: () => number;
}

/** The process's PVB informer: the promoting hub over PodVolumeBackups, promoting pvb-watch jobs. */
export class PvbInformerHub extends PromotingInformerHub<PodVolumeBackup> {
  constructor(opts: PvbInformerHubOptions) {
    const { pvbs, ...rest } = opts;
    super({
      ...rest,
      source: {
        label: 'PVB',
        namespace: pvbs.namespace,
        watch: (options) => pvbs.watchPvbs(options),
        nameOf: (pvb) => pvb.metadata.name,
        shouldPromote: isPvbTerminal,
        jobIdOf: (pvb) => {
          const backupName = pvb.metadata.labels?.[pvbLabels.backupName] ?? pvb.spec.tags?.backup;
          return backupName ? pvbWatchJobId(backupName, pvb.metadata.name) : undefined;
        },
        jobName: JobName.watchPvb,
      },
    });
  }
}
