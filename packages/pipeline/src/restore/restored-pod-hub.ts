import { RESTORE_NAME_LABEL } from '@stowage/core';
import { type Informer, type KubeClients, type WatchPodsOptions, watchPods } from '@stowage/kube';
import { JobName, restoreJobIds } from '@stowage/queue';
import type { Queue } from 'bullmq';
import type { PipelineLogger } from '../deps.js';
import { PromotingInformerHub } from '../informers/promoting-informer-hub.js';

/** The part of a restored pod the restore-hooks job looks at. */
export interface RestoredPod {
  metadata: { name: string; namespace?: string | undefined; uid?: string | undefined; labels?: Record<string, string> | undefined };
  status?: { containerStatuses?: RestoredContainerStatus[] | undefined } | undefined;
}

export interface RestoredContainerStatus {
  name?: string;
  ready?: boolean;
  state?: { running?: unknown };
}

/** A container of the pod runs: a restore-hooks job parked for it may have a hook to run now. */
export function anyContainerRunning(pod: RestoredPod): boolean {
  return (pod.status?.containerStatuses ?? []).some((status) => status.state?.running !== undefined);
}

/**
 * The process's informer on restored pods (label `stowage.dev/restore-name`, every namespace):
 * the moment a container of one runs — and again when it turns ready — it promotes the pod's
 * parked restore-hooks job, so the post-restore hooks start without waiting for their next
 * poll. Its cache also answers the job's looks at the pod instead of a GET.
 */
export class RestoredPodHub extends PromotingInformerHub<RestoredPod> {
  constructor(opts: { kube: KubeClients; jobQueue?: Queue | undefined; logger: PipelineLogger }) {
    const { kube, ...rest } = opts;
    super({
      ...rest,
      source: {
        label: 'restored pod',
        // Pods come as raw JSON: the fields read here are typed by RestoredPod.
        watch: (options) =>
          watchPods(kube, { ...(options as WatchPodsOptions), labelSelector: RESTORE_NAME_LABEL }) as unknown as Informer<RestoredPod>,
        nameOf: (pod) => pod.metadata.name,
        shouldPromote: anyContainerRunning,
        jobIdOf: (pod) => {
          const restoreName = pod.metadata.labels?.[RESTORE_NAME_LABEL];
          if (!restoreName || !pod.metadata.namespace) return undefined;
          try {
            return restoreJobIds.hooks(restoreName, pod.metadata.namespace, pod.metadata.name);
          } catch {
            return undefined; // a name no restore-hooks job id can hold: no job to promote
          }
        },
        jobName: JobName.runRestoreHooks,
      },
    });
  }
}
