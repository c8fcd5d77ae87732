import { backupHooksJobId, blockJobId, finalizeJobId, planJobId, postHooksJobId, pvbWatchJobId } from '@stowage/core';
import { DelayedError, type FlowJob, type FlowProducer, Job, type JobsOptions, type Queue } from 'bullmq';
import { JobName, QueueName, qualifiedQueueName } from './constants.js';
import { QueueError, QueueErrorCode } from './errors.js';
import { childJobOptions, DEFAULT_JOB_OPTIONS } from './job-options.js';
import type { BackupHooksJobData, FinalizeJobData, ItemBlockJobData, PlanJobData, PostHooksJobData, PvbWatchJobData } from './payloads.js';
import { parseBackupHooksJobData, parsePvbWatchJobData } from './payloads.js';

/** `{ id, queue }` of a parent job, as BullMQ's `parent` job option wants it. */
export interface ParentRef {
  id: string;
  /** Qualified queue name `<prefix>:<queue>` (a job's `parent.queueKey`). */
  queue: string;
}

function prefixOf(flowProducer: FlowProducer): string {
  // BullMQ's own default when no prefix is configured.
  return flowProducer.opts.prefix ?? 'bull';
}

export interface BackupFlowInput {
  backupName: string;
  backupUid: string;
  requestId?: string | undefined;
}

export interface BackupFlowIds {
  finalizeJobId: string;
  planJobId: string;
}

/**
 * Adds `finalize ← plan` for a backup (queue `backups`). Deterministic ids: adding it again
 * (a retried POST) is a no-op while the jobs exist. `plan` carries `ignoreDependencyOnFailure`,
 * so a failed plan still lets `finalize` run; finalize reads it from getIgnoredChildrenFailures().
 */
export async function addBackupFlow(flowProducer: FlowProducer, input: BackupFlowInput): Promise<BackupFlowIds> {
  const ids = { finalizeJobId: finalizeJobId(input.backupName), planJobId: planJobId(input.backupName) };
  const data: PlanJobData & FinalizeJobData = {
    backupName: input.backupName,
    backupUid: input.backupUid,
    ...(input.requestId ? { requestId: input.requestId } : {}),
  };
  await flowProducer.add({
    name: JobName.finalize,
    queueName: QueueName.backups,
    data,
    opts: { ...DEFAULT_JOB_OPTIONS[QueueName.backups], jobId: ids.finalizeJobId },
    children: [{ name: JobName.plan, queueName: QueueName.backups, data, opts: childJobOptions(QueueName.backups, ids.planJobId) }],
  });
  return ids;
}

export interface BlockFlowsInput {
  backupName: string;
  backupUid: string;
  /** The backup's finalize job (parent of every block's post-hooks job). */
  finalizeJobId: string;
  /**
   * Block ids, or `{ id, solo: true }` for a block with no fs-backup volume and no post hook:
   * such a block gets one item-block job straight under finalize instead of the two-job
   * `post-hooks ← item-block` sub-flow (nothing to wait for, nothing to run after its items).
   */
  blocks: ReadonlyArray<string | BlockFlowSpec>;
  /** Blocks per `FlowProducer.addBulk` (one Redis transaction each). Default 1,000. */
  batchSize?: number;
  requestId?: string | undefined;
  /** The backup dispatches through a window: the jobs that end blocks carry `windowed: true`. */
  windowed?: boolean | undefined;
  /** The caller knows finalize exists (it is one of its children, running): skip the check. */
  parentKnown?: boolean | undefined;
  /**
   * Park each post-hooks job this long once its item-block child is done (BullMQ moves a parent
   * with a `delay` to delayed, not to wait): it waits for the block's PVBs, and whoever sees them
   * end promotes it (the worker that ran the item-block job, the PVB informers), so it is not
   * activated only to find them copying. 0 or absent: released at once.
   */
  postHooksParkMs?: number | undefined;
}

export interface BlockFlowSpec {
  id: string;
  /** One item-block job under finalize, no post-hooks parent (the block finishes itself). */
  solo?: boolean | undefined;
}

export interface BlockFlowsResult {
  blocks: number;
  batches: number;
}

/** Default blocks per addBulk: ~175 ms of Redis per batch (docs/architecture.md#adding-blocks-in-batches), short enough not to stall other clients. */
export const DEFAULT_BLOCK_BATCH_SIZE = 1_000;

/** What addBlockFlows adds with. */
export interface BlockFlowProducers {
  flowProducer: FlowProducer;
  /** The item-blocks queue: a solo block's one job is added to it straight (no flow to build). */
  itemBlocks: Queue;
}

/**
 * Adds, under the existing `finalize` job, one `post-hooks ← item-block` sub-flow per block — or,
 * for a solo block, one item-block job with `solo: true` — in batches (never one huge
 * transaction). Sub-flows go through `FlowProducer.addBulk`, solo jobs through `Queue.addBulk`
 * (one script call each; building them as flows cost the planner about twice the CPU). Every
 * child has `ignoreDependencyOnFailure`. Deterministic ids make re-adding a no-op while the jobs
 * exist. Throws QUEUE_PARENT_MISSING when there is no such finalize job.
 */
export async function addBlockFlows(producers: BlockFlowProducers, input: BlockFlowsInput): Promise<BlockFlowsResult> {
  const { flowProducer, itemBlocks } = producers;
  const batchSize = input.batchSize ?? DEFAULT_BLOCK_BATCH_SIZE;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new QueueError(QueueErrorCode.badArgument, `addBlockFlows: batchSize must be a positive integer, got ${batchSize}`);
  }
  if (itemBlocks.name !== QueueName.itemBlocks) {
    throw new QueueError(QueueErrorCode.badArgument, `addBlockFlows needs the ${QueueName.itemBlocks} queue, got ${itemBlocks.name}`);
  }
  if (input.blocks.length === 0) return { blocks: 0, batches: 0 };
  const prefix = prefixOf(flowProducer);
  const parent: ParentRef = { id: input.finalizeJobId, queue: qualifiedQueueName(prefix, QueueName.backups) };
  const parentMissing = () =>
    new QueueError(QueueErrorCode.parentMissing, `finalize job ${input.finalizeJobId} does not exist in ${parent.queue}`);
  const isSolo = (block: string | BlockFlowSpec) => typeof block !== 'string' && block.solo === true;
  if (!input.parentKnown && input.blocks.some((block) => !isSolo(block))) {
    // FlowProducer.addBulk does not report a missing parent (its per-entry errors are dropped), so check once.
    // depth 1: the job itself (getFlow recurses while depth - 1 is truthy, so 0 would walk the children).
    const parentNode = await flowProducer.getFlow({ id: input.finalizeJobId, queueName: QueueName.backups, depth: 1, maxChildren: 1 });
    if (!parentNode?.job) throw parentMissing();
  }
  const base = { backupName: input.backupName, backupUid: input.backupUid, ...(input.requestId ? { requestId: input.requestId } : {}) };
  const windowed = input.windowed ? { windowed: true } : {};
  const park = input.postHooksParkMs !== undefined && input.postHooksParkMs > 0 ? { delay: input.postHooksParkMs } : {};
  let batches = 0;
  for (let start = 0; start < input.blocks.length; start += batchSize) {
    const flows: FlowJob[] = [];
    const solos: Array<{ name: string; data: ItemBlockJobData; opts: JobsOptions }> = [];
    for (const block of input.blocks.slice(start, start + batchSize)) {
      const blockId = typeof block === 'string' ? block : block.id;
      const itemBlockJobOptions = childJobOptions(QueueName.itemBlocks, blockJobId(input.backupName, blockId));
      if (isSolo(block)) {
        solos.push({
          name: JobName.backupItemBlock,
          data: { ...base, blockId, solo: true, ...windowed },
          opts: { ...itemBlockJobOptions, parent },
        });
        continue;
      }
      const postHooks: PostHooksJobData = { ...base, blockId, ...windowed };
      const itemBlock: ItemBlockJobData = { ...base, blockId };
      flows.push({
        name: JobName.runPostHooks,
        queueName: QueueName.hooks,
        data: postHooks,
        opts: { ...childJobOptions(QueueName.hooks, postHooksJobId(input.backupName, blockId)), parent, ...park },
        children: [{ name: JobName.backupItemBlock, queueName: QueueName.itemBlocks, data: itemBlock, opts: itemBlockJobOptions }],
      });
    }
    // Sub-flows first: in dispatch order, blocks with PVBs come before the rest.
    if (flows.length > 0) await flowProducer.addBulk(flows);
    if (solos.length > 0) {
      const added = await itemBlocks.addBulk(solos);
      // The add script answers a missing parent with a negative code in place of the job id.
      if (added.some((job) => typeof job.id !== 'string')) throw parentMissing();
    }
    batches++;
  }
  return { blocks: input.blocks.length, batches };
}

/**
 * The post-hooks parent of an item-block job, ready for `addPvbWatch`. Throws
 * QUEUE_JOB_HAS_NO_PARENT when the job was not added as part of a block flow.
 */
export function postHooksParentOf(job: Pick<Job, 'id' | 'parent'>): ParentRef {
  const id = job.parent?.id;
  if (!job.parent || !id) {
    throw new QueueError(
      QueueErrorCode.jobHasNoParent,
      `job ${job.id ?? '(no id)'} has no parent: item-block jobs are added by addBlockFlows`,
    );
  }
  return { id, queue: job.parent.queueKey };
}

/**
 * The key (`<prefix>:hooks:<id>`) by which a parent's children values and ignored failures name
 * the `run-backup-hooks` job of `phase`.
 */
export function backupHooksJobKey(prefix: string, backupName: string, phase: BackupHooksJobData['phase']): string {
  return `${qualifiedQueueName(prefix, QueueName.hooks)}:${backupHooksJobId(backupName, phase)}`;
}

/**
 * Adds the `run-backup-hooks` job of one phase (queue hooks: the backup workers, which hold
 * `pods/exec`) as a child of `parent` — the plan job for `pre`, finalize for `post` — which then
 * waits for it parked (`moveToWaitingChildren`), holding no worker slot. Deterministic id, and
 * `ignoreDependencyOnFailure`: a job that fails for good still releases the parent, which reads
 * the failure with getIgnoredChildrenFailures(). Adding it again while it exists is a no-op (one
 * that completed is counted done for the parent again), so the parent must not re-add one that
 * failed for good: it would wait for it forever. Returns the job's key (backupHooksJobKey).
 */
export async function addBackupHooksJob(queue: Queue, parent: ParentRef, payload: BackupHooksJobData): Promise<string> {
  if (queue.name !== QueueName.hooks) {
    throw new QueueError(QueueErrorCode.badArgument, `addBackupHooksJob needs the ${QueueName.hooks} queue, got ${queue.name}`);
  }
  const data = parseBackupHooksJobData(payload);
  await queue.add(JobName.runBackupHooks, data, {
    ...childJobOptions(QueueName.hooks, backupHooksJobId(data.backupName, data.phase)),
    parent,
  });
  return backupHooksJobKey(queue.opts.prefix ?? 'bull', data.backupName, data.phase);
}

export interface PvbWatchStart {
  /** Park the job this long before its first look (it can be promoted earlier). Default 0: look at once. */
  delayMs?: number | undefined;
  /** The poll state the first look starts from (the pipeline's `watch` field of the job data). */
  watch?: Record<string, unknown> | undefined;
}

/**
 * Attaches one `pvb-watch` job under a block's post-hooks parent (called by the item-block
 * processor before it returns, so the parent cannot run in between). Idempotent: the same PVB
 * under the same parent is re-linked, not added twice.
 */
export async function addPvbWatch(queue: Queue, parent: ParentRef, payload: PvbWatchJobData, start: PvbWatchStart = {}): Promise<string> {
  if (queue.name !== QueueName.pvbWatch) {
    throw new QueueError(QueueErrorCode.badArgument, `addPvbWatch needs the ${QueueName.pvbWatch} queue, got ${queue.name}`);
  }
  const delayMs = start.delayMs ?? 0;
  if (!Number.isFinite(delayMs) || delayMs < 0) {
    throw new QueueError(QueueErrorCode.badArgument, `addPvbWatch: delayMs must be a finite number >= 0, got ${delayMs}`);
  }
  const data = parsePvbWatchJobData(payload);
  const jobId = pvbWatchJobId(data.backupName, data.pvbName);
  await queue.add(JobName.watchPvb, start.watch ? { ...data, watch: start.watch } : data, {
    ...childJobOptions(QueueName.pvbWatch, jobId),
    parent,
    ...(delayMs > 0 ? { delay: delayMs } : {}),
  });
  return jobId;
}

/**
 * Re-parks the running job: moves it to delayed for `delayMs` (releasing its lock and worker
 * slot) and throws `DelayedError` so the worker neither completes nor fails it. Call it as
 * `return repark(job, token, ms)` from a processor. It does not use up an attempt. `afterPark`
 * runs once the job is parked (e.g. to promote it again if what it waits for happened meanwhile).
 */
export async function repark(
  job: Pick<Job, 'id' | 'moveToDelayed'>,
  token: string | undefined,
  delayMs: number,
  afterPark?: () => Promise<void>,
): Promise<never> {
  if (!token) throw new QueueError(QueueErrorCode.missingToken, `repark(${job.id ?? '?'}): the worker's lock token is required`);
  if (!Number.isFinite(delayMs) || delayMs < 0) {
    throw new QueueError(QueueErrorCode.badArgument, `repark: delayMs must be a finite number >= 0, got ${delayMs}`);
  }
  await job.moveToDelayed(Date.now() + delayMs, token);
  await afterPark?.();
  throw new DelayedError();
}

/**
 * Wakes a parked (delayed) job by id now, without reading it first (BullMQ's promote script checks
 * that it is delayed). True when it was promoted; false when it was not parked — waiting, running,
 * done, or not added yet, which is a normal answer for a wake-up that may race the job's own
 * progress. Any other error is thrown.
 */
export async function promoteParked(queue: Queue, jobName: string, jobId: string): Promise<boolean> {
  try {
    await new Job(queue, jobName, {}, {}, jobId).promote();
    return true;
  } catch (err) {
    if (isNotParkedError(err)) return false;
    throw err;
  }
}

/**
 * Sets when a parked (delayed) job wakes: `delayMs` from now. True when it was parked; false when
 * it was not (as for promoteParked). Any other error is thrown.
 */
export async function wakeParkedIn(queue: Queue, jobName: string, jobId: string, delayMs: number): Promise<boolean> {
  if (!Number.isFinite(delayMs) || delayMs < 0) {
    throw new QueueError(QueueErrorCode.badArgument, `wakeParkedIn: delayMs must be a finite number >= 0, got ${delayMs}`);
  }
  try {
    await new Job(queue, jobName, {}, {}, jobId).changeDelay(delayMs);
    return true;
  } catch (err) {
    if (isNotParkedError(err)) return false;
    throw err;
  }
}

/** "not in the delayed state" / "Missing key": BullMQ's answers for a job not parked. */
function isNotParkedError(err: unknown): boolean {
  return /not in the delayed state|missing key/i.test(String((err as Error)?.message));
}

/**
 * Wakes every parked (delayed) job of `queue` whose id `matches`, now. A cancel uses it: jobs the
 * informers promote park for long (until their next real read is due), and a cancel changes no
 * object an informer sees, so without this a parked job would notice it only at its timer. A job
 * woken with nothing to do looks once and parks again. Returns how many were woken.
 */
export async function promoteParkedWhere(queue: Queue, matches: (jobId: string) => boolean): Promise<number> {
  const ids = (await queue.getRanges(['delayed'], 0, -1, true)).filter(matches);
  const woken = await Promise.all(ids.map((id) => promoteParked(queue, 'parked', id)));
  return woken.filter(Boolean).length;
}

/**
 * The id of a backup's deletion job: one per backup incarnation and reason (the uid keeps a later
 * backup of the same name from colliding with a kept finished job; a re-add while it exists is a no-op).
 */
export function deleteBackupJobId(input: { backupName: string; backupUid: string; reason: 'ttl' | 'requested' }): string {
  return `${input.reason === 'ttl' ? 'expire' : 'delete'}-${input.backupName}-${input.backupUid}`;
}

/**
 * Adds the `delete-backup` job: delayed by the TTL when a backup is submitted (Velero's
 * `status.expiration` = start + ttl), or at once when a user deletes it. Through the FlowProducer,
 * as a flow of one job, so the API needs nothing it does not already hold.
 */
export async function addDeleteBackupJob(
  flowProducer: FlowProducer,
  input: { backupName: string; backupUid: string; reason: 'ttl' | 'requested'; delayMs?: number },
): Promise<void> {
  const { backupName, backupUid, reason } = input;
  await flowProducer.add({
    name: JobName.deleteBackup,
    queueName: QueueName.repository,
    data: { backupName, backupUid, reason },
    opts: { ...DEFAULT_JOB_OPTIONS[QueueName.repository], jobId: deleteBackupJobId(input), delay: Math.max(0, input.delayMs ?? 0) },
  });
}
