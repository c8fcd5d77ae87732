import { getPod } from '@stowage/kube';
import { cappedBackoffMs, parseRestoreHooksJobData, repark, restoreJobIds } from '@stowage/queue';
import type { Job } from 'bullmq';
import { z } from 'zod';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { runPodHooks } from '../hooks/hook-runner.js';
import { isPvrSettled, pvrTracker } from '../restore/pvr-tracker.js';
import type { PlannedRestoreHook } from '../restore/restore-plan-types.js';
import { restoreDepsOf } from '../restore/restore-runtime.js';
import type { PipelineRuntime } from '../runtime.js';
import { stepVolumeOpWait, watchProgressSchema } from '../volume-ops/volume-op-wait-step.js';

export type RestoreHooksResult = { pvrs: number; hooks: number; hooksFailed: number; skipped?: string };

const waitStateSchema = z.object({
  /** When this job first found its PVRs settled and began waiting for the containers. */
  containersSince: z.number().optional(),
  polls: z.number().int().nonnegative().default(0),
  orphans: z.record(z.string(), watchProgressSchema).default({}),
});

interface ContainerStatus {
  name?: string;
  ready?: boolean;
  state?: { running?: unknown };
}

/**
 * restore-hooks(pod): released when every pvr-watch child is done. PVRs left without a watcher
 * (their watch job failed for good) are settled first by the same step (asked to cancel, waited
 * for boundedly). Then the post-restore exec hooks run — each only once its container is
 * running (and ready, with waitForReady); until then the job re-parks without a slot, at most
 * the hook's waitTimeout (0 = until the restore's itemOperationTimeout). A hook whose container
 * never came up is recorded failed; `onError: Fail` skips the pod's later hooks. Every run is
 * recorded like a backup hook's.
 */
export async function processRestoreHooks(rt: PipelineRuntime, job: Job, token: string | undefined): Promise<RestoreHooksResult> {
  const { deps } = rt;
  const restoreDeps = { ...deps, ...restoreDepsOf(deps) };
  const { restores } = restoreDeps;
  const data = parseRestoreHooksJobData(job.data);
  const name = data.restoreName;
  // Independent reads in one wait, not two (the hook lag is a chain of such waits).
  const [record, plan, failures] = await Promise.all([
    restores.getRestore(name),
    restores.getPodPlan(name, data.podNamespace, data.podName),
    job.getIgnoredChildrenFailures(),
  ]);
  if (!record || !plan)
    throw new UnrecoverablePipelineError(
      PipelineErrorCode.blockMissing,
      `restore ${name} has no plan for pod ${data.podNamespace}/${data.podName}`,
    );
  const wait = waitStateSchema.parse((job.data as { wait?: unknown }).wait ?? {});
  const now = deps.clock.now();

  // Every PVR of the pod must be settled before any hook runs: a watch job that failed for good
  // leaves its PVR unwatched (child keys end in the watch job's id, `rs.<restore>.watch.<pvr>`).
  const watchIdPrefix = restoreJobIds.pvrWatchPrefix(name);
  const orphaned = Object.entries(failures).flatMap(([key, reason]) => {
    const at = key.lastIndexOf(watchIdPrefix);
    return at < 0 ? [] : [{ pvr: key.slice(at + watchIdPrefix.length), reason }];
  });
  const orphans: Record<string, z.infer<typeof watchProgressSchema>> = {};
  let recheckInMs: number | undefined;
  const records = await restores.getPvrs(
    name,
    orphaned.map((o) => o.pvr),
  );
  for (const [i, { pvr, reason }] of orphaned.entries()) {
    if (isPvrSettled(records[i])) continue;
    const step = await stepVolumeOpWait(
      deps,
      pvrTracker(restoreDeps),
      undefined,
      { runName: name, opName: pvr, deadlineAt: record.deadlineAt ?? now, orphanedBecause: `pvr-watch job failed: ${reason}` },
      wait.orphans[pvr] ?? { polls: 0, lastGetAt: 0 },
    );
    if (step.kind === 'done') continue;
    orphans[pvr] = step.progress;
    recheckInMs = Math.min(recheckInMs ?? step.delayMs, step.delayMs);
  }
  if (recheckInMs !== undefined) {
    await job.updateData({ ...(job.data as object), wait: { ...wait, orphans } });
    return repark(job, token, recheckInMs);
  }
  if (plan.hooks.length === 0) return { pvrs: plan.volumes.length, hooks: 0, hooksFailed: 0 };
  if (record.cancelRequestedAt !== undefined) return { pvrs: plan.volumes.length, hooks: 0, hooksFailed: 0, skipped: 'canceled' };

  const pod = (await getPod(deps.kube, data.podNamespace, data.podName)) as unknown as
    | { status?: { containerStatuses?: ContainerStatus[] } }
    | undefined;
  if (!pod) {
    await restores.recordProblem(name, {
      level: 'error',
      onceKey: `hooks-pod-gone:${data.podNamespace}/${data.podName}`,
      msg: `post-restore hooks of ${data.podNamespace}/${data.podName} not run: the pod is gone`,
      namespace: data.podNamespace,
    });
    await restores.countOnce(name, `hooks-pod-gone:${data.podNamespace}/${data.podName}`, 'hooksFailed', plan.hooks.length);
    return { pvrs: plan.volumes.length, hooks: 0, hooksFailed: plan.hooks.length, skipped: 'pod-gone' };
  }
  const statuses = new Map((pod.status?.containerStatuses ?? []).map((s) => [s.name, s]));
  const isUp = (hook: PlannedRestoreHook) => {
    const status = statuses.get(hook.container);
    return status?.state?.running !== undefined && (!hook.waitForReady || status.ready === true);
  };
  const since = wait.containersSince ?? now;
  const waitedMs = now - since;
  const restoreLeftMs = (record.deadlineAt ?? now) - now;
  const stillWaiting = plan.hooks.filter(
    (hook) => hook.invalid === undefined && !isUp(hook) && (hook.waitTimeoutMs > 0 ? waitedMs < hook.waitTimeoutMs : restoreLeftMs > 0),
  );
  if (stillWaiting.length > 0) {
    await job.updateData({ ...(job.data as object), wait: { ...wait, containersSince: since, polls: wait.polls + 1 } });
    return repark(job, token, cappedBackoffMs(wait.polls, { baseMs: 50, maxMs: 2_000 }));
  }
  const hooks = plan.hooks.map((hook) =>
    hook.invalid === undefined && !isUp(hook)
      ? { ...hook, invalid: `container ${hook.container} was not ${hook.waitForReady ? 'ready' : 'running'} after waiting ${waitedMs} ms` }
      : hook,
  );
  const res = await runPodHooks(
    { ...deps, state: restores },
    {
      runName: name,
      scope: 'restore',
      pod: { namespace: data.podNamespace, name: data.podName },
      phase: 'post',
      hooks,
      attempt: job.attemptsMade + 1,
    },
  );
  return { pvrs: plan.volumes.length, hooks: hooks.length, hooksFailed: res.failed };
}
