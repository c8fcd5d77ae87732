import type { FlowJob, FlowProducer, Job } from 'bullmq';
import { z } from 'zod';
import { JobName, QueueName, qualifiedQueueName } from './constants.js';
import { JobPayloadError, QueueError, QueueErrorCode } from './errors.js';
import type { ParentRef } from './flows.js';
import { childJobOptions, DEFAULT_JOB_OPTIONS } from './job-options.js';

/*
 * The restore job graph (docs/architecture.md#the-restore-job-graph):
 *
 *   restore-finalize(restore)          restores        runs last
 *    ├─ restore-plan(restore)          restores        adds tier 0
 *    ├─ restore-tier(k)                restores        runs when its batches are done; adds tier k+1 under finalize
 *    │   └─ restore-items(k, batch)…   restore-items
 *    └─ restore-hooks(pod)             hooks           added by restore-items when it created the pod; watches
 *                                                       the pod's PVRs itself (restores started by older versions
 *                                                       have a pvr-watch(pvr) child per PVR, queue pvb-watch)
 *
 * Job ids are deterministic (a re-run adds nothing twice), contain no ':' and are never all digits:
 * every one starts with `rs.`.
 */

function part(kind: string, value: string): string {
  if (value.length === 0) throw new QueueError(QueueErrorCode.badArgument, `restore job id: ${kind} must not be empty`);
  if (value.includes(':'))
    throw new QueueError(QueueErrorCode.badArgument, `restore job id: ${kind} ${JSON.stringify(value)} contains ':'`);
  return value;
}

export const restoreJobIds = {
  plan: (restore: string) => `rs.${part('restore name', restore)}.plan`,
  finalize: (restore: string) => `rs.${part('restore name', restore)}.finalize`,
  tier: (restore: string, tier: number) => `rs.${part('restore name', restore)}.tier.${tier}`,
  items: (restore: string, tier: number, batch: number) => `rs.${part('restore name', restore)}.items.${tier}.${batch}`,
  /** One per restored pod: `<target namespace>.<pod name>` (a namespace has no '.', so it is unambiguous). */
  hooks: (restore: string, namespace: string, pod: string) =>
    `rs.${part('restore name', restore)}.hooks.${part('namespace', namespace)}.${part('pod name', pod)}`,
  /** What every restore-hooks job id of the restore starts with. */
  hooksPrefix: (restore: string) => `rs.${part('restore name', restore)}.hooks.`,
  /** What every pvr-watch job id of the restore starts with (its PVR name follows; older versions' restores). */
  pvrWatchPrefix: (restore: string) => `rs.${part('restore name', restore)}.watch.`,
  pvrWatch: (restore: string, pvr: string) => `rs.${part('restore name', restore)}.watch.${part('PVR name', pvr)}`,
};

const name = z.string().min(1);
const requestId = z.string().min(1).optional();
const index = z.number().int().nonnegative();

export const restoreRunJobSchema = z.object({ restoreName: name, restoreUid: name, requestId });
export type RestoreRunJobData = z.infer<typeof restoreRunJobSchema>;
export const restoreTierJobSchema = restoreRunJobSchema.extend({ tier: index });
export type RestoreTierJobData = z.infer<typeof restoreTierJobSchema>;
export const restoreItemsJobSchema = restoreRunJobSchema.extend({ tier: index, batch: index });
export type RestoreItemsJobData = z.infer<typeof restoreItemsJobSchema>;
export const restoreHooksJobSchema = restoreRunJobSchema.extend({
  /** The restored pod (target namespace, name). */
  podNamespace: name,
  podName: name,
  /** The uid of the pod this restore created: a different pod under the same name gets no hook. Absent in jobs of older versions. */
  podUid: z.string().min(1).max(128).optional(),
  /**
   * The pod's PVRs, which the job watches itself. Absent in jobs of older versions: their
   * pvr-watch children watched the PVRs, and the job was released when those were done.
   */
  pvrs: z.array(name).optional(),
  /** When the restore stops waiting for volume data (itemOperationTimeout), epoch ms (with `pvrs`). */
  deadlineAt: z.number().int().nonnegative().optional(),
});
export type RestoreHooksJobData = z.infer<typeof restoreHooksJobSchema>;
/** pvr-watch jobs are no longer added; this parses those of restores started by older versions. */
export const pvrWatchJobSchema = restoreRunJobSchema.extend({
  pvrName: name,
  /** When the restore stops waiting for volume data (itemOperationTimeout), epoch ms. */
  deadlineAt: z.number().int().nonnegative(),
});
export type PvrWatchJobData = z.infer<typeof pvrWatchJobSchema>;

function parseWith<T>(schema: z.ZodType<T>, jobName: string, data: unknown): T {
  const result = schema.safeParse(data);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(data)'}: ${issue.message}`);
  throw new JobPayloadError(jobName, problems, { cause: result.error });
}

export const parseRestoreRunJobData = (data: unknown, jobName: string): RestoreRunJobData => parseWith(restoreRunJobSchema, jobName, data);
export const parseRestoreTierJobData = (data: unknown): RestoreTierJobData => parseWith(restoreTierJobSchema, JobName.restoreTier, data);
export const parseRestoreItemsJobData = (data: unknown): RestoreItemsJobData =>
  parseWith(restoreItemsJobSchema, JobName.restoreItems, data);
export const parseRestoreHooksJobData = (data: unknown): RestoreHooksJobData =>
  parseWith(restoreHooksJobSchema, JobName.runRestoreHooks, data);
export const parsePvrWatchJobData = (data: unknown): PvrWatchJobData => parseWith(pvrWatchJobSchema, JobName.watchPvr, data);

function prefixOf(flowProducer: FlowProducer): string {
  return flowProducer.opts.prefix ?? 'bull';
}

/** Adds `restore-finalize ← restore-plan` (queue restores). Idempotent while the jobs exist. */
export async function addRestoreFlow(flowProducer: FlowProducer, input: RestoreRunJobData): Promise<void> {
  const data: RestoreRunJobData = {
    restoreName: input.restoreName,
    restoreUid: input.restoreUid,
    ...(input.requestId ? { requestId: input.requestId } : {}),
  };
  await flowProducer.add({
    name: JobName.restoreFinalize,
    queueName: QueueName.restores,
    data,
    opts: { ...DEFAULT_JOB_OPTIONS[QueueName.restores], jobId: restoreJobIds.finalize(input.restoreName) },
    children: [
      {
        name: JobName.restorePlan,
        queueName: QueueName.restores,
        data,
        opts: childJobOptions(QueueName.restores, restoreJobIds.plan(input.restoreName)),
      },
    ],
  });
}

/** The restore-finalize job, as a parent ref (tiers and hook jobs are added under it). */
export function restoreFinalizeRef(prefix: string, restoreName: string): ParentRef {
  return { id: restoreJobIds.finalize(restoreName), queue: qualifiedQueueName(prefix, QueueName.restores) };
}

/**
 * Adds `restore-tier(k) ← restore-items(k, 0..batches-1)` under finalize. Idempotent: the same
 * ids are a no-op while the jobs exist. Throws QUEUE_PARENT_MISSING when finalize is gone.
 */
export async function addRestoreTier(flowProducer: FlowProducer, base: RestoreRunJobData, tier: number, batches: number): Promise<void> {
  const prefix = prefixOf(flowProducer);
  const parent = restoreFinalizeRef(prefix, base.restoreName);
  const finalize = await flowProducer.getFlow({ id: parent.id, queueName: QueueName.restores, depth: 1, maxChildren: 1 });
  if (!finalize?.job) throw new QueueError(QueueErrorCode.parentMissing, `restore-finalize job ${parent.id} does not exist`);
  const children: FlowJob[] = [];
  for (let batch = 0; batch < batches; batch++) {
    children.push({
      name: JobName.restoreItems,
      queueName: QueueName.restoreItems,
      data: { ...base, tier, batch } satisfies RestoreItemsJobData,
      opts: childJobOptions(QueueName.restoreItems, restoreJobIds.items(base.restoreName, tier, batch)),
    });
  }
  await flowProducer.add({
    name: JobName.restoreTier,
    queueName: QueueName.restores,
    data: { ...base, tier } satisfies RestoreTierJobData,
    opts: { ...childJobOptions(QueueName.restores, restoreJobIds.tier(base.restoreName, tier)), parent },
    children,
  });
}

/**
 * Adds one pod's restore-hooks job under finalize; it watches the pod's PVRs itself. With PVRs it
 * starts parked for `parkMs` (the PVR informer promotes it when the pod's last PVR ends; the
 * park's end is the fallback). Idempotent while the job exists.
 */
export async function addRestoreHooksFlow(
  flowProducer: FlowProducer,
  input: {
    base: RestoreRunJobData;
    podNamespace: string;
    podName: string;
    podUid: string;
    pvrs: readonly string[];
    deadlineAt: number;
    parkMs: number;
  },
): Promise<void> {
  const { base } = input;
  const parent = restoreFinalizeRef(prefixOf(flowProducer), base.restoreName);
  const park = input.parkMs > 0 && input.pvrs.length > 0 ? { delay: input.parkMs } : {};
  const data: RestoreHooksJobData = {
    ...base,
    podNamespace: input.podNamespace,
    podName: input.podName,
    podUid: input.podUid,
    pvrs: [...input.pvrs],
    deadlineAt: input.deadlineAt,
  };
  await flowProducer.add({
    name: JobName.runRestoreHooks,
    queueName: QueueName.hooks,
    data,
    opts: {
      ...childJobOptions(QueueName.hooks, restoreJobIds.hooks(base.restoreName, input.podNamespace, input.podName)),
      parent,
      ...park,
    },
  });
}

/** The parent of a running job as a ref (for adding a sibling under the same parent). */
export function parentRefOf(job: Pick<Job, 'id' | 'parent'>): ParentRef {
  const id = job.parent?.id;
  if (!job.parent || !id) throw new QueueError(QueueErrorCode.jobHasNoParent, `job ${job.id ?? '(no id)'} has no parent`);
  return { id, queue: job.parent.queueKey };
}
