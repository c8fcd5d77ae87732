import { isKubeError, isPvbTerminal, KubeErrorCodes } from '@stowage/kube';
import { addPvbWatch, parseItemBlockJobData, postHooksParentOf } from '@stowage/queue';
import { writeItem } from '@stowage/storage';
import type { Job } from 'bullmq';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { runPodHooks } from '../hooks/hook-runner.js';
import { type BlockPlan, type PlannedVolume, podKey } from '../plan/block-plan.js';
import { buildPvb } from '../pvb/pvb-object.js';
import { isPvbSettled, recordPvbMissing } from '../pvb/pvb-observation.js';
import { stepPvbWait, type WatchProgress } from '../pvb/pvb-wait-step.js';
import type { PipelineRuntime } from '../runtime.js';
import { finishBlock } from './block-post-hooks.js';

const ITEM_WRITE_CONCURRENCY = 8;
const PVB_CREATE_CONCURRENCY = 8;

/** Runs the tasks with at most `limit` in flight; rejects with the first failure after all settle. */
async function runBounded(tasks: ReadonlyArray<() => Promise<unknown>>, limit: number): Promise<void> {
  let next = 0;
  let firstError: { error: unknown } | undefined;
  const lane = async () => {
    while (next < tasks.length) {
      const task = tasks[next++]!;
      try {
        await task();
      } catch (error) {
        firstError ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, lane));
  if (firstError) throw firstError.error;
}

/** What an item-block job returns to its post-hooks parent (small: it lives in the parent's hash). */
export type ItemBlockResult =
  | { canceled: true }
  | { canceled?: false; failedPods: string[]; pvbs: string[]; itemsWritten: number; inline?: boolean };

/**
 * item-block: pre hooks per pod, the block's items to storage (minus pods whose pre hook failed
 * with `onError: Fail`), then the PVBs — each recorded as pending first, then created (409 = it
 * exists), then watched by a pvb-watch child of the block's post-hooks parent — and return: the
 * slot is free while volumes copy. Safe to run twice: items and PVB names are deterministic,
 * counters count once per key; pre hooks do run again (at-least-once, recorded twice).
 */
export async function processItemBlock(rt: PipelineRuntime, job: Job, _token: string | undefined): Promise<ItemBlockResult> {
  const { deps } = rt;
  const { state, clock } = deps;
  const data = parseItemBlockJobData(job.data);
  const { backupName, blockId } = data;
  const log = deps.logger.child({ backup: backupName, block: blockId, jobId: job.id, attempt: job.attemptsMade + 1 });

  const record = await state.getBackup(backupName);
  if (!record) throw new UnrecoverablePipelineError(PipelineErrorCode.backupMissing, `backup ${backupName} has no record`);
  const plan = await state.getBlockPlan<BlockPlan>(backupName, blockId);
  if (!plan) throw new UnrecoverablePipelineError(PipelineErrorCode.blockMissing, `backup ${backupName} has no plan for block ${blockId}`);
  const parent = rt.deps.config.waitMode === 'decoupled' ? postHooksParentOf(job) : undefined;
  const block = await state.getBlock(backupName, blockId);

  if (record.cancelRequestedAt !== undefined && block?.startedAt === undefined) {
    await state.updateBlock(backupName, blockId, { state: 'Canceled', completedAt: clock.now() });
    await state.log(backupName, { level: 'info', msg: 'block not started: the backup was canceled', blockId });
    return { canceled: true };
  }

  if (block?.startedAt === undefined) await state.updateBlock(backupName, blockId, { state: 'InProgress', startedAt: clock.now() });
  if (await state.countOnce(backupName, `block-started:${blockId}`, 'blocksStarted')) {
    await state.appendEvent(backupName, 'block.started', { blockId, pods: plan.pods.length, items: plan.items.length });
  }

  // 1. Pre hooks. A pod that failed once stays failed: it was not backed up and owes no post hook.
  const failedPods = new Set(block?.failedPods ?? []);
  const prePhaseDone = new Set(block?.prePhaseDonePods ?? []);
  for (const pod of plan.pods) {
    const key = podKey(pod);
    if (failedPods.has(key)) continue;
    const res = await runPodHooks(deps, { backupName, blockId, pod, phase: 'pre', attempt: job.attemptsMade + 1 });
    if (res.failedWithFail) {
      failedPods.add(key);
      prePhaseDone.delete(key);
      await state.countOnce(backupName, `pod-skipped:${key}`, 'podsSkippedByHooks');
      await state.recordProblem(backupName, {
        level: 'error',
        onceKey: `pod-skipped:${key}`,
        msg: `pod ${key} not backed up: a pre hook with onError: Fail failed (no item, no PVB, no post hook)`,
        namespace: pod.namespace,
        blockId,
        pod: key,
      });
    } else {
      prePhaseDone.add(key);
    }
    await state.updateBlock(backupName, blockId, { failedPods: [...failedPods], prePhaseDonePods: [...prePhaseDone] });
  }

  // 2. Items (idempotent writes; counted once per item key).
  const skippedItems = new Set(plan.pods.filter((p) => failedPods.has(podKey(p))).map((p) => p.itemKey));
  const manifests = (await state.getBlockItems<Record<string, unknown>[]>(backupName, blockId)) ?? [];
  let itemsWritten = 0;
  let itemErrors = 0;
  const counted: { onceKey: string; field: string }[] = [];
  // Item writes are independent (each an atomic file write with two fsyncs): run a few at once
  // instead of one after another, which made the item-block job the bottleneck (BENCHMARKS.md).
  const writes: Array<() => Promise<unknown>> = [];
  for (let i = 0; i < plan.items.length; i++) {
    const item = plan.items[i];
    const object = manifests[i];
    if (!item || skippedItems.has(item.key)) continue;
    if (!object) {
      itemErrors++;
      await state.countOnce(backupName, `item-write-failed:${item.key}`, 'itemWriteFailures');
      await state.recordProblem(backupName, {
        level: 'error',
        onceKey: `item-missing:${item.key}`,
        msg: `manifest of ${item.key} missing from the plan`,
        namespace: item.namespace,
        blockId,
      });
      continue;
    }
    writes.push(() =>
      writeItem(deps.storage, backupName, { groupResource: item.groupResource, namespace: item.namespace, name: item.name, object }),
    );
    itemsWritten++;
    counted.push({ onceKey: `item:${item.key}`, field: 'itemsBackedUp' });
  }
  await runBounded(writes, ITEM_WRITE_CONCURRENCY);
  await state.countOnceMany(backupName, counted);
  await state.updateBlock(backupName, blockId, { itemsWritten, itemsDoneAt: clock.now(), ...(itemErrors > 0 ? { itemErrors } : {}) });

  // 3. PVBs: register all as pending first, then create and watch each.
  const canceled = (await state.getBackup(backupName))?.cancelRequestedAt !== undefined;
  const wanted: { pod: (typeof plan.pods)[number]; volume: PlannedVolume & { pvbName: string } }[] = [];
  for (const pod of plan.pods) {
    if (failedPods.has(podKey(pod))) continue;
    for (const volume of pod.volumes) {
      if (volume.action === 'fs-backup' && volume.pvbName && pod.node) wanted.push({ pod, volume: { ...volume, pvbName: volume.pvbName } });
    }
  }
  const known = new Set(block?.pvbs ?? []);
  const toCreate = canceled ? wanted.filter((w) => known.has(w.volume.pvbName)) : wanted;
  if (canceled && toCreate.length < wanted.length) {
    await state.log(backupName, {
      level: 'info',
      msg: `backup canceled: ${wanted.length - toCreate.length} PVBs of the block not created`,
      blockId,
    });
  }
  for (const { pod, volume } of toCreate) {
    await state.registerPvb(backupName, volume.pvbName, {
      blockId,
      podNamespace: pod.namespace,
      podName: pod.name,
      podUid: pod.uid,
      volume: volume.name,
      node: pod.node ?? '',
      phase: 'Pending',
    });
    known.add(volume.pvbName);
  }
  const pvbNames = [...known].sort();
  await state.updateBlock(backupName, blockId, { pvbs: pvbNames, state: pvbNames.length > 0 ? 'WaitingForPvbs' : 'ItemsDone' });

  const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
  const deadlineAt = record.fsDeadlineAt ?? clock.now() + 4 * 3_600_000;
  // PVBs of a block are independent: create and watch them at once (each is a few round trips).
  await runBounded(
    toCreate.map((w) => () => createAndWatch(w)),
    PVB_CREATE_CONCURRENCY,
  );
  async function createAndWatch({ pod, volume }: (typeof toCreate)[number]): Promise<void> {
    const existing = await state.getPvb(backupName, volume.pvbName);
    if (isPvbSettled(existing)) return;
    try {
      const res = await deps.pvbs.createPvb(
        buildPvb({
          backupName,
          backupUid: data.backupUid,
          pod,
          volume,
          node: pod.node ?? '',
          backupStorageLocation: deps.config.backupStorageLocation,
        }),
      );
      if (res.created)
        await state.appendEvent(backupName, 'pvb.created', {
          pvb: volume.pvbName,
          blockId,
          pod: podKey(pod),
          volume: volume.name,
          node: pod.node,
        });
    } catch (err) {
      const permanent = isKubeError(err, KubeErrorCodes.invalid) || isKubeError(err, KubeErrorCodes.forbidden);
      if (!permanent && !lastAttempt) throw err;
      log.error({ err: (err as Error).message, pvb: volume.pvbName }, 'PVB could not be created');
      await recordPvbMissing(deps, backupName, volume.pvbName, existing, `could not be created: ${(err as Error).message}`);
      return;
    }
    if (parent) {
      await addPvbWatch(rt.watchQueue, parent, {
        backupName,
        backupUid: data.backupUid,
        blockId,
        pvbName: volume.pvbName,
        namespace: deps.pvbs.namespace,
        deadlineAt,
        ...(data.requestId ? { requestId: data.requestId } : {}),
      });
    }
  }

  const result = { failedPods: [...failedPods].sort(), pvbs: pvbNames, itemsWritten };
  if (deps.config.waitMode !== 'inline') return result;

  // Inline mode (Velero 1.16 behaviour, benchmark only): hold the slot until the PVBs are done,
  // then run the post hooks here; the post-hooks job sees `inline` and does nothing.
  for (const name of pvbNames) {
    let progress: WatchProgress = { polls: 0, lastGetAt: 0 };
    for (;;) {
      const step = await stepPvbWait(
        deps,
        rt.hub,
        { backupName, pvbName: name, deadlineAt: record.fsDeadlineAt ?? Number.MAX_SAFE_INTEGER },
        progress,
      );
      if (step.kind === 'done') break;
      progress = step.progress;
      if (rt.hub) {
        // Register first, then look again: an event that arrived while the step above was
        // recording what it saw has no waiter to wake, and would cost the whole delay.
        const changed = rt.hub.waitForChange(name, step.delayMs);
        const current = rt.hub.cached(name);
        if (!(current && isPvbTerminal(current))) await changed;
      } else await new Promise((r) => setTimeout(r, step.delayMs));
    }
  }
  await finishBlock(deps, { backupName, blockId, plan, attempt: job.attemptsMade + 1 });
  return { ...result, inline: true };
}
