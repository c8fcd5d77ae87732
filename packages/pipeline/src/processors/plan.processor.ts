import { type BackupSpec, ENDED_BACKUP_PHASES } from '@stowage/core';
import { addBlockFlows, parsePlanJobData } from '@stowage/queue';
import type { Job } from 'bullmq';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import type { BackupHooksRecord } from '../hooks/backup-hooks.js';
import { NO_PIPELINE_METRICS, scheduleOf } from '../metrics.js';
import { type BlockPlan, needsPostHooksJob } from '../plan/block-plan.js';
import { type PlannedBlock, planCluster, resolveResourcePolicies } from '../plan/cluster-plan.js';
import type { PipelineRuntime } from '../runtime.js';
import type { ClaimedBlock } from '../state/dispatch-window.js';
import { BlockPlanEncoder } from '../state/plan-codec.js';
import { awaitBackupHooks } from './backup-hooks.processor.js';
import { addClaimedBlocks, flowsPerAdd, postHooksParkMs } from './window-refill.js';

export type PlanResult = { skipped: string } | { blocks: number; items: number; batches: number };

/** Blocks in the first batch a backup adds (enough to fill the first slots of a few workers); later batches double. */
const FIRST_BATCH_BLOCKS = 8;

/**
 * plan (a child of the backup's finalize job): New → InProgress, then discovery, paginated
 * lists, ItemBlocks, hooks and fs-backup decisions per pod; each batch of blocks is stored and
 * its sub-flows added under finalize at once, so blocks start while planning goes on. Pods,
 * PVCs and PVs go first (their grouping needs all three), then every other resource, one by one.
 * Safe to run twice: plans are stored per block id once, flows have deterministic ids. It runs
 * twice by design when the backup has pre hooks: it parks while a backup worker runs them.
 */
export async function processPlan(rt: PipelineRuntime, job: Job, token: string | undefined): Promise<PlanResult> {
  const { deps } = rt;
  const { state, clock, config } = deps;
  const data = parsePlanJobData(job.data);
  const { backupName } = data;
  const log = deps.logger.child({ backup: backupName, jobId: job.id, attempt: job.attemptsMade + 1 });
  const record = await state.getBackup(backupName);
  if (!record) throw new UnrecoverablePipelineError(PipelineErrorCode.backupMissing, `backup ${backupName} has no record`);
  if ((ENDED_BACKUP_PHASES as readonly string[]).includes(record.phase)) return { skipped: `backup already ${record.phase}` };
  if (record.planCompletedAt !== undefined) return { skipped: 'plan already completed' };
  const totals = { blocks: 0, items: 0, batches: 0 };
  /** The plan ends early on a cancel; finalize (which BullMQ releases now) ends the backup Canceled. */
  async function stopCanceled(when: string): Promise<PlanResult> {
    await state.setCounter(backupName, 'blocksPlanned', totals.blocks);
    await state.appendEvent(backupName, 'plan.canceled', { ...totals });
    await state.log(backupName, { level: 'info', msg: `plan stopped by the cancel ${when}` });
    log.info({ ...totals }, 'plan stopped: backup canceled');
    return { skipped: `canceled ${when}` };
  }
  if (record.cancelRequestedAt !== undefined) {
    // Canceled while a backup worker ran the pre hooks this job waited for: the cancel stopped the plan there.
    if ((record.backupHooks as BackupHooksRecord | undefined)?.pre?.canceled) return stopCanceled(PRE_HOOKS_CANCELED);
    return { skipped: 'backup canceled before planning' };
  }
  const finalizeId = job.parent?.id;
  if (!finalizeId) throw new UnrecoverablePipelineError(PipelineErrorCode.badArgument, `plan job ${job.id} has no finalize parent`);

  const requestedSpec = record.spec as BackupSpec;
  const problems = specProblems(requestedSpec);
  const metrics = deps.metrics ?? NO_PIPELINE_METRICS;
  if (problems.length > 0) {
    const failed = await state.transitionPhase(backupName, ['New'], 'FailedValidation', { failureReason: problems.join('; ') });
    if (failed.moved) {
      metrics.backupStarted({ schedule: scheduleOf(record) });
      metrics.backupEnded({ schedule: scheduleOf(record), phase: 'FailedValidation' });
    }
    await state.log(backupName, { level: 'error', msg: `backup spec is invalid: ${problems.join('; ')}` });
    return { skipped: 'spec invalid' };
  }
  const now = clock.now();
  const started = await state.transitionPhase(backupName, ['New'], 'InProgress', {
    startedAt: now,
    fsDeadlineAt: now + requestedSpec.fsBackupTimeoutMs,
  });
  if (started.moved) metrics.backupStarted({ schedule: scheduleOf(record) });

  const loaded = await resolveResourcePolicies(deps.kube, config.namespace, requestedSpec);
  if (!loaded.ok) {
    const failed = await state.transitionPhase(backupName, ['InProgress', 'New'], 'FailedValidation', { failureReason: loaded.why });
    if (failed.moved) metrics.backupEnded({ schedule: scheduleOf(record), phase: 'FailedValidation', durationMs: clock.now() - now });
    await state.log(backupName, { level: 'error', msg: loaded.why });
    return { skipped: 'resource policy invalid' };
  }
  const { policies, spec } = loaded;
  // Backup-level pre hooks (e.g. pause a GitOps controller) run before anything is listed or any
  // block is added: no pod hook and no PVB can start before them. A backup worker runs them (the
  // api may not exec) while this job is parked; it then runs again from the top and finds them
  // done. One that fails with onError: Fail fails the backup here; finalize (which still runs)
  // runs the backup post hooks. A cancel stops them between two hooks.
  const canceled = async () => (await state.cancelRequestedAt(backupName)) !== undefined;
  const backupPre = await awaitBackupHooks(rt, job, token, data, spec, 'pre');
  if (backupPre.canceled) return stopCanceled(PRE_HOOKS_CANCELED);
  if (backupPre.failed !== undefined) {
    await state.log(backupName, { level: 'error', msg: `backup not run: ${backupPre.failed}` });
    return { skipped: 'a backup pre hook failed' };
  }

  // Fairness between backups: at most this many of this backup's blocks in the queues at once.
  const windowed = config.blocksInFlightPerBackup > 0;
  if (windowed) await rt.window.open(backupName, config.blocksInFlightPerBackup);
  let claims = 0;
  let batchSize = Math.min(FIRST_BATCH_BLOCKS, config.blockBatchSize);
  // One encoder for the run: the dictionary learned from the first blocks compresses the rest.
  const encoder = new BlockPlanEncoder();
  // A batch is stored (plans, then its window claim) while the batch before it is still being
  // added and recorded: the planner's CPU (encoding) and the two batches' round trips overlap
  // instead of adding up. At most one batch is being dispatched at a time, and a batch is only
  // ever dispatched after its plans are stored, so a re-run of plan still finds what it needs.
  let dispatching: Promise<void> = Promise.resolve();
  const dispatch = async (stored: PlannedBlock[], claimed: ReadonlyArray<ClaimedBlock<BlockPlan>> | undefined, counted: typeof totals) => {
    if (claimed) {
      await addClaimedBlocks(rt, { backupName, backupUid: data.backupUid, requestId: data.requestId, finalizeJobId: finalizeId }, claimed);
    } else {
      await addBlockFlows(
        { flowProducer: rt.flowProducer, itemBlocks: rt.itemBlocksQueue },
        {
          backupName,
          backupUid: data.backupUid,
          finalizeJobId: finalizeId,
          // Blocks with no fs-backup volume and no post hook need no post-hooks job (one job, not two).
          blocks: stored.map(({ plan }) => ({ id: plan.id, solo: !needsPostHooksJob(plan) })),
          batchSize: flowsPerAdd(config.blockBatchSize),
          requestId: data.requestId,
          postHooksParkMs: postHooksParkMs(config),
        },
      );
    }
    // The batch's skips, problems and progress after its flows are in (blocks need not wait for
    // them), sent together: one round trip's wait.
    const writes: Array<Promise<unknown>> = [
      state.logMany(
        backupName,
        stored.flatMap(({ plan }) =>
          plan.skips.map((skip) => ({ level: 'info' as const, msg: `skipped ${skip.what}: ${skip.reason}`, blockId: plan.id, skip: true })),
        ),
      ),
    ];
    for (const { plan } of stored) {
      for (const error of plan.errors ?? []) {
        writes.push(
          state.recordProblem(backupName, {
            level: 'error',
            onceKey: `volume:${error.what}`,
            msg: `${error.what} not backed up: ${error.reason}`,
            namespace: error.what.split('/')[1],
            blockId: plan.id,
          }),
        );
      }
      for (const warning of plan.warnings ?? []) {
        writes.push(state.recordProblem(backupName, { level: 'warn', onceKey: `plan:${warning}`, msg: warning, blockId: plan.id }));
      }
    }
    writes.push(state.setCounter(backupName, 'totalItems', counted.items));
    writes.push(state.appendEvent(backupName, 'plan.progress', { blocks: counted.blocks, items: counted.items }));
    await Promise.all(writes);
  };
  const store = async (planned: PlannedBlock[]) => {
    for (let start = 0; start < planned.length; ) {
      // A cancel stops the plan between batches: no block after it is stored or added.
      if (await canceled()) throw new PlanCanceled();
      const stored = planned.slice(start, start + batchSize);
      start += stored.length;
      // The first batches are small and each twice the last, up to blockBatchSize: the first
      // blocks reach the workers at once, and each batch is added while the one before runs (one
      // add of a few hundred flows left every slot idle for tens of milliseconds).
      batchSize = Math.min(config.blockBatchSize, batchSize * 2);
      await state.putBlockPlans(
        backupName,
        stored.map(({ plan, manifests }) => ({ id: plan.id, plan, items: manifests, solo: !needsPostHooksJob(plan) })),
        encoder,
      );
      // Windowed: the batch joins the backup's queue of blocks; only what fits the window is
      // added (claimed under this batch's key, so a re-run of plan adds the same again).
      const claimed = windowed ? await rt.window.claim<BlockPlan>(backupName, `plan:${++claims}`, false) : undefined;
      totals.blocks += stored.length;
      totals.batches += 1;
      totals.items += stored.reduce((n, b) => n + b.plan.items.length, 0);
      const counted = { ...totals };
      await dispatching;
      dispatching = dispatch(stored, claimed, counted);
      // Awaited before the next batch is dispatched, or at the end; a failure meanwhile is not unhandled.
      dispatching.catch(() => {});
    }
  };

  // The plan step itself is shared with the dry run (plan/cluster-plan.ts): same lists, same decisions.
  try {
    await planCluster(
      {
        kube: deps.kube,
        backupName,
        spec,
        policies,
        nodesWithAgent: await deps.agents.nodesWithAgent(),
        listPageSize: config.listPageSize,
        namespaceListsMax: config.namespaceListsMax,
        maxHookTimeoutMs: config.maxHookTimeoutMs,
      },
      {
        blocks: store,
        problem: async ({ forbidden, ...problem }) => {
          await state.recordProblem(backupName, problem);
          // A type kept out by a 403: a warning, and counted so the backup ends PartiallyFailed.
          if (forbidden !== undefined) await state.countOnce(backupName, `types-not-read:${forbidden}`, 'typesNotRead');
        },
        note: (msg) => state.log(backupName, { level: 'info', msg }),
      },
    );
  } catch (err) {
    // No batch is still being added while this attempt fails (its retry adds the same again).
    await dispatching.catch(() => {});
    if (err instanceof PlanCanceled) return stopCanceled(`after ${totals.blocks} block(s) in ${totals.batches} batch(es)`);
    throw err;
  }
  await dispatching;
  if (await canceled()) return stopCanceled(`after ${totals.blocks} block(s) in ${totals.batches} batch(es)`);
  await state.setCounter(backupName, 'totalItems', totals.items);
  await state.setCounter(backupName, 'blocksPlanned', totals.blocks);
  await state.updateBackup(backupName, { planCompletedAt: clock.now(), planSummary: totals });
  await state.appendEvent(backupName, 'plan.done', { ...totals });
  log.info({ ...totals }, 'plan done');
  return totals;
}

const PRE_HOOKS_CANCELED = 'before its backup pre hooks were all run';

/** Thrown through planCluster by the sink when the backup has been canceled. */
class PlanCanceled extends Error {
  constructor() {
    super('the backup was canceled while it was being planned');
  }
}

function specProblems(spec: BackupSpec | undefined): string[] {
  if (!spec || typeof spec !== 'object') return ['spec is missing'];
  const problems: string[] = [];
  for (const key of ['includedNamespaces', 'excludedNamespaces', 'includedResources', 'excludedResources', 'orLabelSelectors'] as const) {
    if (!Array.isArray(spec[key])) problems.push(`spec.${key} must be an array (store the validated spec)`);
  }
  if (typeof spec.fsBackupTimeoutMs !== 'number') problems.push('spec.fsBackupTimeoutMs must be a number (store the validated spec)');
  if (!spec.hooks || !Array.isArray(spec.hooks.resources)) problems.push('spec.hooks.resources must be an array');
  return problems;
}
