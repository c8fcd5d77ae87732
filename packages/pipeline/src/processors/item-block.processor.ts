import { isKubeError, KubeErrorCodes } from '@stowage/kube';
import { parseItemBlockJobData } from '@stowage/queue';
import { type BackupItem, stageItems } from '@stowage/storage';
import type { Job } from 'bullmq';
import type { PipelineDeps, PipelineLogger } from '../deps.js';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { runPodHooks } from '../hooks/hook-runner.js';
import { type BlockPlan, needsPostHooksJob, type PlannedVolume, podKey } from '../plan/block-plan.js';
import { handOverClaims } from '../plan/claim-handover.js';
import { buildPvb } from '../pvb/pvb-object.js';
import { isPvbSettled, recordPvbMissing } from '../pvb/pvb-observation.js';
import { waitForPvbEnd } from '../pvb/pvb-wait-step.js';
import type { PipelineRuntime } from '../runtime.js';
import {
  blockSnapshots,
  createSnapshot,
  pendingSnapshotRecord,
  type SnapshotStateRecord,
  snapshotField,
  type WantedSnapshot,
} from '../snapshots/block-snapshots.js';
import type { PvbStateRecord } from '../state/backup-state.js';
import { finishBlock } from './block-post-hooks.js';
import { claimedInStep } from './window-refill.js';

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

/** Names the pod's fs-backup volumes in its error (a shared PVC among them may pass to another pod: logged apart). */
function volumesLeftOut(pod: { volumes: readonly PlannedVolume[] }): string {
  const names = pod.volumes.filter((v) => v.action === 'fs-backup').map((v) => v.name);
  return names.length > 0 ? `; its volumes ${names.join(', ')} get no PVB through it` : '';
}

/** What an item-block job returns to its post-hooks parent (small: it lives in the parent's hash). */
export type ItemBlockResult =
  | { canceled: true }
  | {
      canceled?: false;
      failedPods: string[];
      pvbs: string[];
      itemsWritten: number;
      inline?: boolean;
      skipped?: string;
      /** The backup's fs-backup deadline (epoch ms), when the block has PVBs. */
      deadlineAt?: number;
      /** When this run's oldest PVB create was answered (epoch ms). */
      pvbsReadAt?: number;
    };

/**
 * item-block: pre hooks per pod, then the PVBs — each recorded as pending first, then created
 * (409 = it exists; tagged with the block, whose post-hooks parent watches them once this job
 * returns) — while the block's items go to storage (minus pods whose pre hook failed with `onError: Fail`); then
 * return: the slot is free while volumes copy. Pre hooks always end before the first PVB is
 * created (the freeze guarantee); the items are written while the PVBs copy, since nothing about
 * a PVB depends on them. A solo block (no PVB, no post hook: `needsPostHooksJob`) has no post-hooks
 * parent and finishes itself: its final state and `block.done` are written here.
 * Safe to run twice: items and PVB names are deterministic, counters count once per key; pre hooks
 * do run again (at-least-once, recorded twice).
 */
export async function processItemBlock(rt: PipelineRuntime, job: Job, _token: string | undefined): Promise<ItemBlockResult> {
  const { deps } = rt;
  const { state, clock } = deps;
  const data = parseItemBlockJobData(job.data);
  const { backupName, blockId } = data;
  const solo = data.solo === true;
  // A child logger per job costs a redaction pass over its bindings: only make it when needed.
  let jobLog: PipelineLogger | undefined;
  const log = () => (jobLog ??= deps.logger.child({ backup: backupName, block: blockId, jobId: job.id, attempt: job.attemptsMade + 1 }));

  // One round trip for everything the block starts from.
  const ctx = await state.readBlockContext<BlockPlan, Record<string, unknown>[]>(backupName, blockId);
  const { record, plan, block } = ctx;
  if (!record) throw new UnrecoverablePipelineError(PipelineErrorCode.backupMissing, `backup ${backupName} has no record`);
  if (!plan) throw new UnrecoverablePipelineError(PipelineErrorCode.blockMissing, `backup ${backupName} has no plan for block ${blockId}`);
  if (solo && needsPostHooksJob(plan)) {
    throw new UnrecoverablePipelineError(
      PipelineErrorCode.badArgument,
      `block ${blockId} of backup ${backupName} was added solo but has post hooks or fs-backup volumes`,
    );
  }
  const blockPlan: BlockPlan = plan;

  if (record.cancelRequestedAt !== undefined && block?.startedAt === undefined) {
    await state.blockStep(backupName, blockId, {
      set: { state: 'Canceled', completedAt: clock.now() },
      // A solo block has no post-hooks job to count it done.
      ...(solo ? { once: [{ onceKey: `block-done:${blockId}`, field: 'blocksDone' }] } : {}),
    });
    await state.log(backupName, { level: 'info', msg: 'block not started: the backup was canceled', blockId });
    return { canceled: true };
  }

  // 1. Start, and pre hooks. A pod that failed once stays failed: it was not backed up and owes
  // no post hook. Pods without pre hooks are done with the pre phase at once (recorded with the
  // start, in the same round trip).
  const failedPods = new Set(block?.failedPods ?? []);
  const prePhaseDone = new Set(block?.prePhaseDonePods ?? []);
  // A pre hook with onError: FailBlock failed (now or in an earlier attempt of this job): the
  // whole block is skipped — no further pre hook, no item, no PVB (its PVCs and PVs too).
  let skipped = typeof block?.skipped === 'string' ? block.skipped : undefined;
  for (const pod of plan.pods) if (pod.hooks.pre.length === 0 && !failedPods.has(podKey(pod))) prePhaseDone.add(podKey(pod));
  const startedAt = clock.now();
  const startFields = {
    ...(block?.startedAt === undefined ? { state: 'InProgress', startedAt } : {}),
    failedPods: [...failedPods],
    prePhaseDonePods: [...prePhaseDone],
  };
  const startCounter = { onceKey: `block-started:${blockId}`, field: 'blocksStarted' };
  // A solo block without pre hooks has nothing between its start and its end but item writes:
  // its start is recorded with its end (one round trip less). Should the job die in between, the
  // retry starts it again; no hook ran and no PVB exists, so there is nothing to account for.
  const preHooksRan = plan.pods.some((pod) => pod.hooks.pre.length > 0);
  const startWithEnd = solo && !preHooksRan;
  // Without pre hooks the start is sent together with the PVB registration below (the commands go
  // out in order on one connection; both are answered before any PVB is created).
  const started = startWithEnd
    ? Promise.resolve(0)
    : state.blockStep(backupName, blockId, {
        set: startFields,
        once: [startCounter],
        // A solo block starts and ends within this job: its `block.done` says both.
        ...(solo
          ? {}
          : { event: { type: 'block.started', data: { blockId, pods: plan.pods.length, items: plan.items.length }, ifCounted: 0 } }),
      });
  started.catch(() => {}); // awaited below; not unhandled meanwhile
  if (preHooksRan) await started;
  for (const pod of plan.pods) {
    const key = podKey(pod);
    if (skipped !== undefined) break;
    if (failedPods.has(key) || pod.hooks.pre.length === 0) continue;
    const res = await runPodHooks(deps, {
      runName: backupName,
      scope: blockId,
      pod,
      phase: 'pre',
      hooks: pod.hooks.pre,
      attempt: job.attemptsMade + 1,
    });
    if (res.failedBlock) {
      failedPods.add(key);
      prePhaseDone.delete(key);
      skipped = res.failedBlock.reason;
      await state.recordProblem(backupName, {
        level: 'error',
        onceKey: `block-skipped:${blockId}`,
        msg: `block ${blockId} skipped, onError: FailBlock: ${skipped}; none of its ${plan.items.length} items (its pods, PVCs and PVs included) is backed up and no PVB is created`,
        namespace: pod.namespace,
        blockId,
        pod: key,
      });
      await state.updateBlock(backupName, blockId, { failedPods: [...failedPods], prePhaseDonePods: [...prePhaseDone], skipped });
      break;
    }
    if (res.failedWithFail) {
      failedPods.add(key);
      prePhaseDone.delete(key);
      await state.countOnce(backupName, `pod-skipped:${key}`, 'podsSkippedByHooks');
      await state.recordProblem(backupName, {
        level: 'error',
        onceKey: `pod-skipped:${key}`,
        msg: `pod ${key} not backed up: a pre hook with onError: Fail failed (no item, no PVB, no post hook)${volumesLeftOut(pod)}`,
        namespace: pod.namespace,
        blockId,
        pod: key,
      });
    } else {
      prePhaseDone.add(key);
    }
    await state.updateBlock(backupName, blockId, { failedPods: [...failedPods], prePhaseDonePods: [...prePhaseDone] });
  }

  // 2. PVBs (only after every pre hook) and items, at once.
  const wanted: { pod: (typeof plan.pods)[number]; volume: PlannedVolume & { pvbName: string } }[] = [];
  const wantedSnapshots: WantedSnapshot[] = [];
  for (const pod of plan.pods) {
    if (skipped !== undefined || failedPods.has(podKey(pod))) continue;
    for (const volume of pod.volumes) {
      if (volume.action === 'snapshot' && volume.snapshot) wantedSnapshots.push({ pod, volume: { ...volume, snapshot: volume.snapshot } });
      if (volume.action !== 'fs-backup') continue;
      if (volume.pvbName && pod.node) wanted.push({ pod, volume: { ...volume, pvbName: volume.pvbName } });
      else {
        // The planner never stores this; should a plan do so, the volume is an error, not a silent gap.
        await state.recordProblem(backupName, {
          level: 'error',
          onceKey: `volume-unplannable:${podKey(pod)}/${volume.name}`,
          msg: `pods/${podKey(pod)} volume ${volume.name} not backed up: its plan has ${pod.node ? 'no PVB name' : 'no node'}`,
          namespace: pod.namespace,
          blockId,
        });
      }
    }
  }
  // A PVC taken at plan time by a pod that is not backed up passes to a surviving pod that mounts
  // it; one that nobody can take is an error naming it (never a volume silently left out).
  if (failedPods.size > 0 && skipped === undefined) {
    const { handovers, lost } = handOverClaims(plan.pods, failedPods);
    for (const handover of handovers) {
      wanted.push({ pod: handover.to, volume: handover.volume });
      await state.log(backupName, {
        level: 'info',
        msg: `PVC ${handover.pvc} is backed up through pod ${podKey(handover.to)} (volume ${handover.volume.name}): pod ${handover.from}, which took it, is not backed up`,
        blockId,
      });
    }
    for (const claim of lost) {
      await state.recordProblem(backupName, {
        level: 'error',
        onceKey: `pvc-not-backed-up:${claim.pvc}`,
        msg: `PVC ${claim.pvc} not backed up: ${claim.why}`,
        namespace: claim.namespace,
        blockId,
      });
    }
  }
  // A cancel asked while pre hooks ran stops PVB creation; without pre hooks the record read at
  // the start is as fresh as another read would be.
  const canceled =
    wanted.length + wantedSnapshots.length > 0 &&
    (preHooksRan ? (await state.cancelRequestedAt(backupName)) !== undefined : record.cancelRequestedAt !== undefined);
  const known = new Set(block?.pvbs ?? []);
  const toCreate = canceled ? wanted.filter((w) => known.has(w.volume.pvbName)) : wanted;
  if (canceled && toCreate.length < wanted.length) {
    const notCreated = wanted.filter((w) => !known.has(w.volume.pvbName)).map((w) => `${podKey(w.pod)} volume ${w.volume.name}`);
    await state.log(backupName, {
      level: 'info',
      msg: `backup canceled: ${wanted.length - toCreate.length} PVBs of the block not created (${notCreated.join(', ')})`,
      blockId,
    });
  }
  for (const { volume } of toCreate) known.add(volume.pvbName);
  const pvbNames = [...known].sort();
  // Snapshots: those an earlier run recorded keep their record; new ones are recorded Pending
  // with the PVBs (before any is created), none once the backup is canceled.
  const knownSnapshots = new Map(blockSnapshots(block).map((r) => [r.name, r]));
  const newSnapshots: SnapshotStateRecord[] = canceled
    ? []
    : wantedSnapshots.filter((w) => !knownSnapshots.has(w.volume.snapshot.name)).map((w) => pendingSnapshotRecord(w, clock.now()));
  if (canceled && wantedSnapshots.length > knownSnapshots.size) {
    await state.log(backupName, {
      level: 'info',
      msg: `backup canceled: ${wantedSnapshots.length - knownSnapshots.size} VolumeSnapshots of the block not created`,
      blockId,
    });
  }
  const snapshotsToCreate = [...[...knownSnapshots.values()].filter((r) => r.phase === 'Pending'), ...newSnapshots];
  const snapshotNames = [...knownSnapshots.keys(), ...newSnapshots.map((r) => r.name)];
  const snapshotFields: Record<string, unknown> =
    snapshotNames.length > 0
      ? { snapshots: snapshotNames, ...Object.fromEntries(newSnapshots.map((r) => [snapshotField(r.name), r])) }
      : {};
  if (solo && (pvbNames.length > 0 || wantedSnapshots.length > 0)) {
    throw new UnrecoverablePipelineError(PipelineErrorCode.badArgument, `solo block ${blockId} of backup ${backupName} would create PVBs`);
  }
  // Registered as pending before any is created (a fast PVB must never finish unregistered).
  let registered = new Map<string, PvbStateRecord | undefined>();
  if (toCreate.length > 0 || !solo) {
    registered = await state.registerPvbs(
      backupName,
      blockId,
      toCreate.map(({ pod, volume }) => ({
        pvbName: volume.pvbName,
        record: {
          blockId,
          podNamespace: pod.namespace,
          podName: pod.name,
          podUid: pod.uid,
          volume: volume.name,
          node: pod.node ?? '',
          phase: 'Pending',
        },
      })),
      { pvbs: pvbNames, ...snapshotFields, ...(pvbNames.length + snapshotNames.length > 0 ? { state: 'WaitingForPvbs' } : {}) },
    );
  }
  await started;

  const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
  const deadlineAt = record.fsDeadlineAt ?? clock.now() + 4 * 3_600_000;
  // When the PVB creates were answered (each answer is the PVB as the API server has it: a real read).
  const readAts: number[] = [];
  async function create({ pod, volume }: (typeof toCreate)[number]): Promise<void> {
    const existing = registered.get(volume.pvbName);
    if (isPvbSettled(existing)) return;
    let created = false;
    let readAt: number;
    try {
      const res = await deps.pvbs.createPvb(
        buildPvb({
          backupName,
          backupUid: data.backupUid,
          blockId,
          pod,
          volume,
          node: pod.node ?? '',
          backupStorageLocation: deps.config.backupStorageLocation,
        }),
      );
      created = res.created;
      readAt = clock.now(); // the answer is the PVB as the API server has it: a real read
    } catch (err) {
      const permanent = isKubeError(err, KubeErrorCodes.invalid) || isKubeError(err, KubeErrorCodes.forbidden);
      if (!permanent && !lastAttempt) throw err;
      log().error({ err, pvb: volume.pvbName }, 'PVB could not be created');
      await recordPvbMissing(deps, backupName, volume.pvbName, existing, `could not be created: ${(err as Error).message}`);
      return;
    }
    readAts.push(readAt);
    if (created) {
      await state.appendEvent(backupName, 'pvb.created', {
        pvb: volume.pvbName,
        blockId,
        pod: podKey(pod),
        volume: volume.name,
        node: pod.node,
      });
    }
  }

  // PVBs of a block are independent: create them at once (each is a few round trips),
  // and write the items meanwhile. A block with a post-hooks job records its items as soon as
  // they are written, while the PVB creates are still out (the items take a few milliseconds, a
  // create's answer usually longer: one wait less before the slot frees); items written are
  // counted even when a PVB step fails. Both run to the end before a failure is rethrown, so a
  // retry never overlaps with this attempt's writes.
  const itemsStep = stageBlockItems(deps, backupName, blockId, blockPlan, failedPods, ctx.items ?? [], skipped !== undefined).then(
    async (written) => {
      const fields = {
        itemsWritten: written.itemsWritten,
        itemsDoneAt: clock.now(),
        ...(written.itemErrors > 0 ? { itemErrors: written.itemErrors } : {}),
      };
      if (!solo) {
        await state.blockStep(backupName, blockId, {
          set: { ...fields, ...(pvbNames.length === 0 && snapshotNames.length === 0 ? { state: 'ItemsDone' } : {}) },
          once: written.counted,
        });
      }
      return { ...written, fields };
    },
  );
  // A snapshot that cannot be created is recorded Failed (an error naming the volume), as a PVB is.
  async function createOneSnapshot(rec: SnapshotStateRecord): Promise<void> {
    try {
      const res = await createSnapshot(deps, { backupName, backupUid: data.backupUid, blockId, record: rec });
      if (res.created) {
        await state.appendEvent(backupName, 'snapshot.created', {
          snapshot: rec.name,
          blockId,
          pod: `${rec.namespace}/${rec.pod}`,
          volume: rec.volume,
          className: rec.className,
          moveData: rec.moveData,
        });
      }
    } catch (err) {
      const permanent = isKubeError(err, KubeErrorCodes.invalid) || isKubeError(err, KubeErrorCodes.forbidden);
      if (!permanent && !lastAttempt) throw err;
      log().error({ err, snapshot: rec.name }, 'VolumeSnapshot could not be created');
      const msg = `VolumeSnapshot ${rec.namespace}/${rec.name} could not be created: ${(err as Error).message}`;
      await state.updateBlock(backupName, blockId, {
        [snapshotField(rec.name)]: { ...rec, phase: 'Failed', message: msg, completedAt: clock.now() },
      });
      await state.recordProblem(backupName, {
        level: 'error',
        onceKey: `snapshot-failed:${rec.name}`,
        msg: `pods/${rec.namespace}/${rec.pod} volume ${rec.volume} not backed up: ${msg}`,
        namespace: rec.namespace,
        blockId,
      });
    }
  }
  const [pvbsDone, itemsDone] = await Promise.allSettled([
    runBounded(
      [...toCreate.map((w) => () => create(w)), ...snapshotsToCreate.map((rec) => () => createOneSnapshot(rec))],
      PVB_CREATE_CONCURRENCY,
    ),
    itemsStep,
  ]);
  if (itemsDone.status === 'rejected') throw itemsDone.reason;
  const { itemsWritten, itemErrors, counted, fields: itemFields } = itemsDone.value;
  const now = clock.now();
  if (!solo) {
    if (pvbsDone.status === 'rejected') throw pvbsDone.reason;
  } else {
    if (pvbsDone.status === 'rejected') throw pvbsDone.reason; // (a solo block has no PVB step)
    // The block's tail, as finishBlock does it for a block without PVBs and post hooks, in the
    // same round trip as the item counters.
    const finalState = failedPods.size > 0 || itemErrors > 0 ? 'PartiallyFailed' : 'Completed';
    const end = {
      set: { ...(startWithEnd ? startFields : {}), ...itemFields, state: finalState, completedAt: now },
      once: [{ onceKey: `block-done:${blockId}`, field: 'blocksDone' }, ...(startWithEnd ? [startCounter] : []), ...counted],
      event: { type: 'block.done', data: { blockId, state: finalState, pvbs: 0, postHookPods: 0 }, ifCounted: 0 },
    } as const;
    // A windowed backup's block frees its place in the same script (endingBlock adds what it claimed).
    if (data.windowed === true) claimedInStep(job, await rt.window.stepAndClaim<BlockPlan>(backupName, blockId, end, `job:${job.id}`));
    else await state.blockStep(backupName, blockId, end);
  }

  const result = {
    failedPods: [...failedPods].sort(),
    pvbs: pvbNames,
    itemsWritten,
    ...(skipped !== undefined ? { skipped } : {}),
    // For the post-hooks job, which watches the PVBs: the fs-backup deadline, and the oldest real
    // read of a PVB this run made (its first look may trust the informer's cache until a GET is due).
    ...(pvbNames.length > 0 ? { deadlineAt, ...(readAts.length > 0 ? { pvbsReadAt: Math.min(...readAts) } : {}) } : {}),
  };
  if (!deps.blockWait || solo) return result;
  // A comparison the benchmark wires in (deps.blockWait): this job holds its slot until the block
  // is done; its post-hooks job then sees `inline` and does nothing.
  await deps.blockWait({
    backupName,
    blockId,
    pvbNames,
    pvbEnded: (pvbName) => waitForPvbEnd(deps, rt.hub, { backupName, pvbName, deadlineAt }),
    finishBlock: async () => void (await finishBlock(deps, { backupName, blockId, plan, attempt: job.attemptsMade + 1 })),
  });
  return { ...result, inline: true };
}

/**
 * Stages the block's items (stageItems: one segment with the items of the other jobs staging at
 * the same moment), minus those of pods whose pre hook failed with `onError: Fail`. Returns the
 * once-counters to record with the block's next state step.
 */
async function stageBlockItems(
  deps: PipelineDeps,
  backupName: string,
  blockId: string,
  plan: BlockPlan,
  failedPods: ReadonlySet<string>,
  manifests: ReadonlyArray<Record<string, unknown> | undefined>,
  blockSkipped = false,
): Promise<{ itemsWritten: number; itemErrors: number; counted: { onceKey: string; field: string }[] }> {
  const { state } = deps;
  // A block skipped by a FailBlock pre hook writes nothing (its error names how many items).
  if (blockSkipped) return { itemsWritten: 0, itemErrors: 0, counted: [] };
  const skippedItems = new Set(plan.pods.filter((p) => failedPods.has(podKey(p))).map((p) => p.itemKey));
  let itemErrors = 0;
  const counted: { onceKey: string; field: string }[] = [];
  const items: BackupItem[] = [];
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
    items.push({ groupResource: item.groupResource, namespace: item.namespace, name: item.name, object });
    counted.push({ onceKey: `item:${item.key}`, field: 'itemsBackedUp' });
  }
  // Staged without fsync: atomic for readers and across a worker crash (a retried job stages
  // them again); a machine crash that loses or cuts a segment is caught by finalize, which parses
  // every item it packs, counts them against itemsBackedUp and restages from Redis (assembleValidated).
  await stageItems(deps.storage, backupName, items, { durable: false });
  return { itemsWritten: items.length, itemErrors, counted };
}
