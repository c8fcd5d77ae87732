import type { FlowProducer, Queue } from 'bullmq';
import type { PipelineDeps } from './deps.js';
import type { PvbInformerHub } from './pvb/pvb-informer-hub.js';
import type { PvrInformerHub } from './restore/pvr-tracker.js';
import type { RestoredPodHub } from './restore/restored-pod-hub.js';
import type { SnapshotInformerHub } from './snapshots/snapshot-informer-hub.js';
import type { DispatchWindow } from './state/dispatch-window.js';

/** What processors share inside one process: the deps plus the queues they add to. */
export interface PipelineRuntime {
  deps: PipelineDeps;
  /** Adds block sub-flows while planning. */
  flowProducer: FlowProducer;
  /** Where planning adds solo blocks' item-block jobs. */
  itemBlocksQueue: Queue;
  /** The backups queue: deletion removes a deleted backup's finished jobs from it. */
  backupsQueue: Queue;
  /** The hooks queue (made when first used): parked post-hooks and restore-hooks jobs are woken through it. */
  hooksQueue(): Queue;
  /** The repository queue (made when first used): deletions ask for a prune on it. */
  repositoryQueue(): Queue;
  /** Backups' dispatch windows (plan opens one, blocks that end refill it). */
  window: DispatchWindow;
  /** The process's PVB informer (present when this process hosts hooks or pvb-watch, or runs inline mode). */
  hub?: PvbInformerHub | undefined;
  /** The process's PVR informer (present when this process hosts hooks or pvb-watch and restores are wired). */
  pvrHub?: PvrInformerHub | undefined;
  /** The process's restored-pod informer (present when this process hosts hooks and restores are wired). */
  podHub?: RestoredPodHub | undefined;
  /** The process's VolumeSnapshot informer (when it hosts hooks and the cluster serves CSI snapshots). */
  snapshotHub?: SnapshotInformerHub | undefined;
}
