import { isPvbTerminal } from '@stowage/kube';
import { createFlowProducer, createQueue, JobName, KEEP_FINISHED_JOBS, promoteParked, QueueName, wakeParkedIn } from '@stowage/queue';
import { StorageMeter } from '@stowage/storage';
import { type Job, type Processor, type Queue, Worker } from 'bullmq';
import type { PipelineDeps } from './deps.js';
import { PipelineErrorCode, UnrecoverablePipelineError } from './errors.js';
import { processBackupHooks } from './processors/backup-hooks.processor.js';
import { processDeleteBackup } from './processors/delete-backup.processor.js';
import { processFinalize } from './processors/finalize.processor.js';
import { processItemBlock } from './processors/item-block.processor.js';
import { processPlan } from './processors/plan.processor.js';
import { processPostHooks } from './processors/post-hooks.processor.js';
import { processPruneRepository } from './processors/prune-repository.processor.js';
import { processPvbWatch } from './processors/pvb-watch.processor.js';
import { processPvrWatch } from './processors/pvr-watch.processor.js';
import { processRestoreFinalize } from './processors/restore-finalize.processor.js';
import { processRestoreHooks } from './processors/restore-hooks.processor.js';
import { processRestoreItems } from './processors/restore-items.processor.js';
import { processRestorePlan } from './processors/restore-plan.processor.js';
import { processRestoreTier } from './processors/restore-tier.processor.js';
import { processRunSchedule } from './processors/run-schedule.processor.js';
import { endingBlock, postHooksParkMs } from './processors/window-refill.js';
import { PvbInformerHub } from './pvb/pvb-informer-hub.js';
import { PvrInformerHub } from './restore/pvr-tracker.js';
import { applyRestoreApiCap } from './restore/restore-api-cap.js';
import { RestoredPodHub } from './restore/restored-pod-hub.js';
import type { PipelineRuntime } from './runtime.js';
import { startSnapshotHubIfServed } from './snapshots/snapshot-informer-hub.js';
import { DispatchWindow } from './state/dispatch-window.js';
import { takeCurrentStorageCost } from './state/storage-cost.js';

export type HostedQueue = (typeof QueueName)[keyof typeof QueueName];

export interface Pipeline {
  runtime: PipelineRuntime;
  /** The processor of one queue (dispatching on job name), for a Worker or a test. */
  processorFor(queue: HostedQueue): Processor;
  /** Starts the process's PVB (and, with restores wired, PVR) informer: promotes delayed watch jobs, feeds the cache. */
  startInformer(): void;
  /** With restores wired: starts the process's restored-pod informer, which promotes parked restore-hooks jobs. */
  startRestoredPodInformer(): void;
  /** Starts the process's VolumeSnapshot informer when the cluster serves CSI snapshots: promotes parked post-hooks jobs. */
  startSnapshotInformer(): void;
  /**
   * After an item-block job completed (with its value) or failed: promotes its post-hooks parent,
   * parked by then, unless a PVB of the block may still be copying and no cancel was asked (the
   * informers promote it when they end; the park's own end is the fallback, cut to the poll cap
   * here without a healthy informer and to the fs-backup deadline).
   */
  releaseBlockTail(job: Job, result?: unknown): Promise<void>;
  close(): Promise<void>;
}

/**
 * The processors bound to their deps. Any process can host any queue: the worker service hosts
 * item-blocks, pvb-watch and hooks; the api service hosts backups; a test hosts what it needs.
 */
export function createPipeline(deps: PipelineDeps): Pipeline {
  const flowProducer = createFlowProducer({ connection: deps.connection, prefix: deps.queuePrefix });
  const itemBlocksQueue = createQueue(QueueName.itemBlocks, { connection: deps.connection, prefix: deps.queuePrefix });
  const backupsQueue = createQueue(QueueName.backups, { connection: deps.connection, prefix: deps.queuePrefix });
  backupsQueue.on('error', (err) => deps.logger.warn({ err }, 'backups queue error'));
  flowProducer.on('error', (err) => deps.logger.warn({ err }, 'flow producer error'));
  itemBlocksQueue.on('error', (err) => deps.logger.warn({ err }, 'item-blocks queue error'));
  let hooksQueue: Queue | undefined;
  const hooks = (): Queue => {
    if (hooksQueue) return hooksQueue;
    hooksQueue = createQueue(QueueName.hooks, { connection: deps.connection, prefix: deps.queuePrefix });
    hooksQueue.on('error', (err) => deps.logger.warn({ err }, 'hooks queue error'));
    return hooksQueue;
  };
  let repositoryQueue: Queue | undefined;
  const repository = (): Queue => {
    if (repositoryQueue) return repositoryQueue;
    repositoryQueue = createQueue(QueueName.repository, { connection: deps.connection, prefix: deps.queuePrefix });
    repositoryQueue.on('error', (err) => deps.logger.warn({ err }, 'repository queue error'));
    return repositoryQueue;
  };
  const runtime: PipelineRuntime = {
    deps,
    flowProducer,
    itemBlocksQueue,
    backupsQueue,
    hooksQueue: hooks,
    repositoryQueue: repository,
    window: new DispatchWindow(deps.state),
  };

  const processors: Record<HostedQueue, Processor> = {
    [QueueName.backups]: (job: Job, token?: string) => {
      if (job.name === JobName.plan) return processPlan(runtime, job, token);
      if (job.name === JobName.finalize) return processFinalize(runtime, job, token);
      if (job.name === JobName.runSchedule) return processRunSchedule(runtime, job);
      throw unknownJob(job, QueueName.backups);
    },
    // In the backup workers, which hold the repository key (deps.repository).
    [QueueName.repository]: (job: Job, token?: string) => {
      if (job.name === JobName.deleteBackup) return processDeleteBackup(runtime, job, token);
      if (job.name === JobName.pruneRepository) return processPruneRepository(runtime, job);
      throw unknownJob(job, QueueName.repository);
    },
    [QueueName.itemBlocks]: (job: Job, token?: string) => {
      if (job.name === JobName.backupItemBlock) {
        // A solo block's job ends its block; one with a post-hooks parent leaves that to the parent.
        if ((job.data as { solo?: unknown }).solo === true) return endingBlock(runtime, job, () => processItemBlock(runtime, job, token));
        return processItemBlock(runtime, job, token);
      }
      throw unknownJob(job, QueueName.itemBlocks);
    },
    [QueueName.pvbWatch]: (job: Job, token?: string) => {
      if (job.name === JobName.watchPvb) return processPvbWatch(runtime, job, token);
      if (job.name === JobName.watchPvr) return processPvrWatch(runtime, job, token);
      throw unknownJob(job, QueueName.pvbWatch);
    },
    [QueueName.hooks]: (job: Job, token?: string) => {
      if (job.name === JobName.runPostHooks) return endingBlock(runtime, job, () => processPostHooks(runtime, job, token));
      if (job.name === JobName.runRestoreHooks) return processRestoreHooks(runtime, job, token);
      // Backup-level hooks: plan and finalize (in the api, which may not exec) wait for this job.
      if (job.name === JobName.runBackupHooks) return processBackupHooks(runtime, job);
      throw unknownJob(job, QueueName.hooks);
    },
    [QueueName.restores]: (job: Job, token?: string) => {
      if (job.name === JobName.restorePlan) return processRestorePlan(runtime, job);
      if (job.name === JobName.restoreTier) return processRestoreTier(runtime, job, token);
      if (job.name === JobName.restoreFinalize) return processRestoreFinalize(runtime, job);
      throw unknownJob(job, QueueName.restores);
    },
    [QueueName.restoreItems]: (job: Job) => {
      if (job.name === JobName.restoreItems) return processRestoreItems(runtime, job);
      throw unknownJob(job, QueueName.restoreItems);
    },
  };

  let closing: Promise<void> | undefined;
  let snapshotHubStarting: Promise<void> | undefined;
  return {
    runtime,
    processorFor: (queue) => metered(deps, processors[queue]),
    startInformer() {
      if (runtime.hub) return;
      // It promotes blocks' post-hooks jobs (they watch the block's PVBs).
      runtime.hub = new PvbInformerHub({ pvbs: deps.pvbs, jobQueue: hooks(), logger: deps.logger.child({ component: 'pvb-informer' }) });
      runtime.hub.start();
      if (deps.pvrs && !runtime.pvrHub) {
        // It promotes restored pods' restore-hooks jobs (they watch the pod's PVRs).
        runtime.pvrHub = new PvrInformerHub({
          pvrs: deps.pvrs,
          jobQueue: hooks(),
          logger: deps.logger.child({ component: 'pvr-informer' }),
        });
        runtime.pvrHub.start();
      }
    },
    startRestoredPodInformer() {
      if (!deps.pvrs || runtime.podHub) return;
      runtime.podHub = new RestoredPodHub({
        kube: deps.kube,
        jobQueue: hooks(),
        logger: deps.logger.child({ component: 'restored-pod-informer' }),
      });
      runtime.podHub.start();
    },
    startSnapshotInformer() {
      if (snapshotHubStarting) return;
      snapshotHubStarting = startSnapshotHubIfServed({
        kube: deps.kube,
        jobQueue: hooks(),
        logger: deps.logger.child({ component: 'snapshot-informer' }),
      }).then(async (hub) => {
        if (closing) await hub?.stop().catch(() => undefined);
        else runtime.snapshotHub = hub;
      });
    },
    async releaseBlockTail(job, result) {
      const parentId = job.parent?.id;
      if (!parentId || job.parent?.queueKey !== `${deps.queuePrefix}:${QueueName.hooks}`) return;
      const { pvbs, deadlineAt, inline } = (result ?? {}) as { pvbs?: unknown; deadlineAt?: unknown; inline?: unknown };
      const backupName = (job.data as { backupName?: unknown }).backupName;
      // A block a BlockWait finished (`inline`) has nothing left to copy.
      const copying = inline !== true && Array.isArray(pvbs) && pvbs.some((name) => !isEnded(runtime.hub?.cached(String(name))));
      // A parent not parked (the job will be retried, or another worker promoted it already) is fine.
      try {
        // BullMQ parked it until a real read of its PVBs is due (postHooksParkMs): right while this
        // process's informer will promote it when they end. A cancel asked before it was parked
        // woke nothing (cancelBackup wakes the parked jobs): it looks now, and asks them to stop.
        const cancelAsked = copying && typeof backupName === 'string' && (await deps.state.cancelRequestedAt(backupName)) !== undefined;
        if (!copying || cancelAsked) {
          await promoteParked(hooks(), JobName.runPostHooks, parentId);
          return;
        }
        // Without an informer here it looks at the poll cap; either way by the fs-backup deadline.
        const parkedMs = postHooksParkMs(deps.config);
        let wakeInMs = runtime.hub?.healthy() === true ? parkedMs : deps.config.pvbPollMaxMs;
        if (typeof deadlineAt === 'number') wakeInMs = Math.min(wakeInMs, Math.max(0, deadlineAt - deps.clock.now()));
        if (wakeInMs < parkedMs) await wakeParkedIn(hooks(), JobName.runPostHooks, parentId, wakeInMs);
      } catch (err) {
        deps.logger.warn({ err, jobId: parentId }, 'could not wake a post-hooks job');
      }
    },
    close() {
      closing ??= (async () => {
        await runtime.hub?.stop().catch(() => undefined);
        await runtime.pvrHub?.stop().catch(() => undefined);
        await runtime.podHub?.stop().catch(() => undefined);
        await snapshotHubStarting?.catch(() => undefined);
        await runtime.snapshotHub?.stop().catch(() => undefined);
        await Promise.allSettled([
          flowProducer.close(),
          itemBlocksQueue.close(),
          backupsQueue.close(),
          hooksQueue?.close(),
          repositoryQueue?.close(),
        ]);
      })();
      return closing;
    },
  };
}

function isEnded(pvb: Parameters<typeof isPvbTerminal>[0] | undefined): boolean {
  return pvb !== undefined && isPvbTerminal(pvb);
}

function unknownJob(job: Job, queue: string): UnrecoverablePipelineError {
  return new UnrecoverablePipelineError(
    PipelineErrorCode.unknownJob,
    `queue ${queue} has no processor for job name ${JSON.stringify(job.name)} (job ${job.id})`,
  );
}

export interface WorkerConcurrency {
  backups?: number;
  itemBlocks?: number;
  pvbWatch?: number;
  hooks?: number;
  restores?: number;
  restoreItems?: number;
  repository?: number;
}

export interface StartWorkersOptions {
  deps: PipelineDeps;
  queues: readonly HostedQueue[];
  concurrency?: WorkerConcurrency;
  /** How long close() waits for active jobs before forcing. Default 10 s. */
  closeTimeoutMs?: number;
  /** BullMQ lock and stalled-check timing; BullMQ's defaults (30 s each) when unset. */
  lock?: WorkerLockTiming;
}

/**
 * How fast a crashed process's active jobs are taken over: its locks expire after
 * `durationMs`, and any live worker's stalled check (every `stalledIntervalMs`) moves them back
 * to wait. Shorter means faster recovery but more Redis traffic and a risk of false stalls when
 * an event loop is blocked longer than `durationMs`.
 */
export interface WorkerLockTiming {
  durationMs?: number;
  stalledIntervalMs?: number;
}

export interface RunningWorkers {
  pipeline: Pipeline;
  workers: Worker[];
  /** Stops taking jobs, waits (bounded) for active ones, then forces; closes the pipeline. Safe to call twice. */
  close(): Promise<void>;
}

const DEFAULT_CONCURRENCY: Required<WorkerConcurrency> = {
  backups: 2,
  itemBlocks: 4,
  pvbWatch: 50,
  hooks: 8,
  restores: 2,
  restoreItems: 8,
  // deletions (storage deletes) and prunes (one at a time per repository: its lock)
  repository: 2,
};

/**
 * Hosts the given queues in this process with their concurrency. The pvb-watch host (and an
 * item-block host with a BlockWait) also runs the process's one PVB informer.
 */
export function startWorkers(opts: StartWorkersOptions): RunningWorkers {
  const { deps } = opts;
  const pipeline = createPipeline(deps);
  const concurrency = { ...DEFAULT_CONCURRENCY, ...opts.concurrency };
  const concurrencyOf: Record<HostedQueue, number> = {
    [QueueName.backups]: concurrency.backups,
    [QueueName.itemBlocks]: concurrency.itemBlocks,
    [QueueName.pvbWatch]: concurrency.pvbWatch,
    [QueueName.hooks]: concurrency.hooks,
    [QueueName.restores]: concurrency.restores,
    [QueueName.restoreItems]: concurrency.restoreItems,
    [QueueName.repository]: concurrency.repository,
  };
  // Post-hooks jobs watch their blocks' PVBs through it; pvb-watch hosts restores' PVR watches.
  if (
    opts.queues.includes(QueueName.hooks) ||
    opts.queues.includes(QueueName.pvbWatch) ||
    (deps.blockWait !== undefined && opts.queues.includes(QueueName.itemBlocks))
  ) {
    pipeline.startInformer();
  }
  if (opts.queues.includes(QueueName.hooks)) {
    pipeline.startRestoredPodInformer();
    pipeline.startSnapshotInformer();
  }
  const workers = [...new Set(opts.queues)].map((queue) => {
    const worker = new Worker(queue, pipeline.processorFor(queue), {
      connection: deps.connection,
      prefix: deps.queuePrefix,
      concurrency: concurrencyOf[queue],
      // Finished jobs kept (per-block jobs do not carry it: job-options.ts).
      ...KEEP_FINISHED_JOBS,
      ...(opts.lock?.durationMs !== undefined ? { lockDuration: opts.lock.durationMs } : {}),
      ...(opts.lock?.stalledIntervalMs !== undefined ? { stalledInterval: opts.lock.stalledIntervalMs } : {}),
      // restore-items starts once the restore's API cap is in Redis (its global concurrency): never a job beyond it.
      ...(queue === QueueName.restoreItems ? { autorun: false } : {}),
    });
    const log = deps.logger.child({ queue });
    if (queue === QueueName.restoreItems) {
      applyRestoreApiCap({ connection: deps.connection, queuePrefix: deps.queuePrefix, cap: deps.config.restoreMaxInFlight })
        .then(() => worker.run())
        .catch((err: Error) => log.error({ err }, 'restore-items worker did not start: the API cap could not be stored'));
    }
    worker.on('error', (err) => log.error({ err }, 'worker error'));
    worker.on('failed', (job, err) => {
      if (job) log.warn({ jobId: job.id, attempt: job.attemptsMade, err }, 'job failed');
      if (job && queue === QueueName.itemBlocks) void pipeline.releaseBlockTail(job);
    });
    // The block's post-hooks job is parked once this job is done; release it when nothing is copying.
    if (queue === QueueName.itemBlocks) worker.on('completed', (job, result) => void pipeline.releaseBlockTail(job, result));
    return worker;
  });

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      const timeoutMs = opts.closeTimeoutMs ?? 10_000;
      await Promise.all(
        workers.map(async (worker) => {
          let timer: NodeJS.Timeout | undefined;
          const timedOut = new Promise<'timeout'>((resolve) => {
            timer = setTimeout(() => resolve('timeout'), timeoutMs);
          });
          const outcome = await Promise.race([worker.close().then(() => 'closed' as const), timedOut]).catch(() => 'timeout' as const);
          clearTimeout(timer);
          if (outcome === 'timeout') await worker.close(true).catch(() => undefined);
        }),
      );
      await pipeline.close();
    })();
    return closing;
  };
  return { pipeline, workers, close };
}

/** Jobs whose storage requests are their backup's (job data `backupName`) or restore's (`restoreName`). */
const BACKUP_JOBS: ReadonlySet<string> = new Set([
  JobName.plan,
  JobName.finalize,
  JobName.backupItemBlock,
  JobName.watchPvb,
  JobName.runPostHooks,
  JobName.runBackupHooks,
]);
const RESTORE_JOBS: ReadonlySet<string> = new Set([
  JobName.restorePlan,
  JobName.restoreTier,
  JobName.restoreItems,
  JobName.restoreFinalize,
  JobName.watchPvr,
  JobName.runRestoreHooks,
]);

/**
 * Runs a backup's or restore's job under a storage request meter and adds what it counted to the
 * run's counters when the job ends, however it ends (a re-parked or failed run made its requests
 * too). Finalize counts its archive writes itself, before the live state is dropped.
 */
function metered(deps: PipelineDeps, processor: Processor): Processor {
  return async (job: Job, token?: string) => {
    const data = job.data as { backupName?: unknown; restoreName?: unknown };
    const state = BACKUP_JOBS.has(job.name) ? deps.state : RESTORE_JOBS.has(job.name) ? deps.restores : undefined;
    const runName = BACKUP_JOBS.has(job.name) ? data.backupName : data.restoreName;
    if (!state || typeof runName !== 'string') return processor(job, token);
    const meter = new StorageMeter(state === deps.state ? 'backup' : 'restore');
    return await meter.run(async () => {
      try {
        return await processor(job, token);
      } finally {
        const entries = takeCurrentStorageCost();
        if (entries.length > 0) {
          await state.countOnceMany(runName, entries).catch((err: unknown) => {
            deps.logger.warn({ err, job: job.id, run: runName }, 'storage requests of a job not counted');
          });
        }
      }
    });
  };
}
