import { getPod } from '@stowage/kube';
import { cappedBackoffMs, parseRestoreHooksJobData, type RestoreHooksJobData, restoreJobIds } from '@stowage/queue';
import type { Job } from 'bullmq';
import { z } from 'zod';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { runPodHooks } from '../hooks/hook-runner.js';
import { type DownloadState, downloadRecheckMs, isDownloadSettled, stepBlockDownload } from '../restore/block-downloads.js';
import { InFlightLimit } from '../restore/in-flight-limit.js';
import { pvrTracker } from '../restore/pvr-tracker.js';
import type { PlannedRestoreHook, RestorePodPlan } from '../restore/restore-plan-types.js';
import { restoreDepsOf } from '../restore/restore-runtime.js';
import type { RestoreRecord, RestoreState } from '../restore/restore-state.js';
import type { RestoredPod } from '../restore/restored-pod-hub.js';
import type { PipelineRuntime } from '../runtime.js';
import { watchProgressSchema } from '../volume-ops/volume-op-wait-step.js';
import { afterEndRecords, reparkWatching, watchVolumeOps } from '../volume-ops/watch-volume-ops.js';
import { createPodPvrs } from './restore-items.processor.js';

export type RestoreHooksResult = { pvrs: number; hooks: number; hooksFailed: number; skipped?: string };

const waitStateSchema = z.object({
  /** When this job first found its PVRs settled and began waiting for the containers. */
  containersSince: z.number().optional(),
  polls: z.number().int().nonnegative().default(0),
  /** When the pod was last read from the API server (not the informer cache). */
  lastGetAt: z.number().default(0),
  /** Poll state of each PVR not settled yet, between re-parks. */
  pvrs: z.record(z.string(), watchProgressSchema).default({}),
  /** The same, written by older versions for PVRs whose pvr-watch job failed for good. */
  orphans: z.record(z.string(), watchProgressSchema).default({}),
  /** The pod's moved block volumes being written back (block-downloads.ts), by DataDownload name. */
  downloads: z
    .record(
      z.string(),
      z.custom<DownloadState>((v) => typeof v === 'object' && v !== null),
    )
    .default({}),
  /** With moved block volumes: the pod's PVRs were created (after the volumes were written). */
  pvrsCreated: z.boolean().optional(),
});

/**
 * restore-hooks(pod): first writes back the pod's moved block volumes (DataDownloads, stepped by
 * this job: block-downloads.ts), then waits for every PVR of the pod to be terminal, watching them itself
 * (watchVolumeOps, as a block's post-hooks job watches its PVBs): re-parked without a slot and
 * promoted by the PVR informer when the pod's last PVR ends (jobs of older versions were released
 * when their pvr-watch children were done; a PVR whose watch job failed for good is wound down:
 * asked to cancel, waited for boundedly). Then the post-restore exec hooks run — each only once its container is
 * running (and ready, with waitForReady); until then the job re-parks without a slot, at most
 * the hook's waitTimeout (0 = until the restore's itemOperationTimeout), after a first short wait
 * in its slot (restoreContainerGraceMs: the container usually runs moments after the PVRs end). The process's
 * restored-pod informer promotes the parked job the moment the pod's containers change, and its
 * cache stands in for GETs (a real GET at least every pvbRealReadEveryMs, and before giving up);
 * without a healthy informer the job polls with a capped backoff. A hook whose container
 * never came up is recorded failed; `onError: Fail` skips the pod's later hooks. Every run is
 * recorded like a backup hook's.
 */
export async function processRestoreHooks(rt: PipelineRuntime, job: Job, token: string | undefined): Promise<RestoreHooksResult> {
  const { deps } = rt;
  const restoreDeps = { ...deps, ...restoreDepsOf(deps) };
  const { restores } = restoreDeps;
  const data = parseRestoreHooksJobData(job.data);
  const name = data.restoreName;
  // Independent reads in one wait, not two (the hook lag is a chain of such waits): the listed
  // PVRs' records too; only an orphan of an older version's pvr-watch child costs a read of its own.
  const listedPvrs = [...new Set(data.pvrs ?? [])];
  const [record, plan, failures, listedRecords] = await Promise.all([
    restores.getRestore(name),
    restores.getPodPlan(name, data.podNamespace, data.podName),
    job.getIgnoredChildrenFailures(),
    listedPvrs.length > 0 ? restores.getPvrs(name, listedPvrs) : [],
  ]);
  if (!record || !plan)
    throw new UnrecoverablePipelineError(
      PipelineErrorCode.blockMissing,
      `restore ${name} has no plan for pod ${data.podNamespace}/${data.podName}`,
    );
  const wait = waitStateSchema.parse((job.data as { wait?: unknown }).wait ?? {});
  const now = deps.clock.now();

  // Moved block volumes first: the pod cannot start before they are written and bound to its claims.
  const downloads = plan.blockVolumes ?? [];
  if (downloads.some((d) => !isDownloadSettled(wait.downloads[d.name]))) {
    const states = { ...wait.downloads };
    let changed = false;
    for (const planned of downloads) {
      if (isDownloadSettled(states[planned.name])) continue;
      try {
        const look = await stepBlockDownload(deps, {
          restoreName: name,
          podNamespace: data.podNamespace,
          podName: data.podName,
          planned,
          state: states[planned.name],
          canceled: record.cancelRequestedAt !== undefined,
          deadlineAt: data.deadlineAt ?? record.deadlineAt ?? now,
        });
        states[planned.name] = look.state;
        if (look.changed) changed = true;
        if (look.event)
          await restores.appendEvent(name, look.event.type, { pod: `${data.podNamespace}/${data.podName}`, ...look.event.data });
        if (look.problem) {
          await restores.recordProblem(name, {
            level: 'error',
            onceKey: `datadownload:${planned.name}`,
            msg: look.problem,
            namespace: data.podNamespace,
          });
        }
      } catch (err) {
        // A failed look (an API blip) is looked at again at the next wake; the deadline ends it.
        deps.logger.warn({ restore: name, dataDownload: planned.name, err }, 'DataDownload look failed; looking again later');
        const previous = states[planned.name];
        if (previous) states[planned.name] = { ...previous, polls: (previous.polls ?? 0) + 1 };
      }
    }
    wait.downloads = states;
    const open = downloads.filter((d) => !isDownloadSettled(states[d.name]));
    if (open.length > 0) {
      await job.updateData({ ...(job.data as object), wait });
      const delayMs = changed ? 1 : Math.min(...open.map((d) => downloadRecheckMs(deps, now - (states[d.name]?.since ?? now))));
      return reparkWatching(rt, job, token, delayMs, {
        cancelRequested: async () => (await restores.cancelRequestedAt(name)) !== undefined,
      });
    }
    if (changed) await job.updateData({ ...(job.data as object), wait });
  }
  // Its PVRs, held back until its block volumes were written (the pod's volumes exist only then).
  if (downloads.length > 0 && !wait.pvrsCreated && data.podUid) {
    const base = { restoreName: name, restoreUid: data.restoreUid, ...(data.requestId ? { requestId: data.requestId } : {}) };
    const pod = { plan, podNamespace: data.podNamespace, podName: data.podName, podUid: data.podUid };
    await createPodPvrs(rt, new InFlightLimit(4), base, pod, { create: true });
    wait.pvrsCreated = true;
    await job.updateData({ ...(job.data as object), wait });
  }

  // Every PVR of the pod must be settled before any hook runs. The job watches them itself (no
  // job per PVR). A job of an older version had a pvr-watch child per PVR and was released when
  // they were done; one that failed for good left its PVR unwatched (child keys end in the watch
  // job's id, `rs.<restore>.watch.<pvr>`): it is wound down here (asked to cancel, waited for boundedly).
  const watchIdPrefix = restoreJobIds.pvrWatchPrefix(name);
  const orphanedBecause = new Map(
    Object.entries(failures).flatMap(([key, reason]) => {
      const at = key.lastIndexOf(watchIdPrefix);
      return at < 0 ? [] : [[key.slice(at + watchIdPrefix.length), `pvr-watch job failed: ${reason}`] as const];
    }),
  );
  const unlisted = [...orphanedBecause.keys()].filter((pvr) => !listedPvrs.includes(pvr));
  const pvrNames = [...listedPvrs, ...unlisted];
  let recording: Promise<void> = Promise.resolve();
  if (pvrNames.length > 0) {
    const records = [...listedRecords, ...(unlisted.length > 0 ? await restores.getPvrs(name, unlisted) : [])];
    const watched = await watchVolumeOps(deps, pvrTracker(restoreDeps), rt.pvrHub, {
      runName: name,
      ops: pvrNames.map((pvr, i) => ({ name: pvr, previous: records[i], orphanedBecause: orphanedBecause.get(pvr) })),
      cancelRequested: record.cancelRequestedAt !== undefined,
      deadlineAt: data.deadlineAt ?? record.deadlineAt ?? now,
      progress: { ...wait.orphans, ...wait.pvrs },
    });
    if (!watched.settled) {
      await job.updateData({ ...(job.data as object), wait: { ...wait, orphans: {}, pvrs: watched.progress } });
      // A look may have read the cache just before the pod's last PVR ended, or the record just
      // before a cancel, whose wake-up then found this job running, not parked: both looked at again once parked.
      return reparkWatching(rt, job, token, watched.recheckInMs, {
        recheck: () => rt.pvrHub?.promoteIfDue(watched.open),
        cancelSeen: watched.cancelSeen,
        cancelRequested: async () => (await restores.cancelRequestedAt(name)) !== undefined,
      });
    }
    recording = watched.recording;
  }
  // The records of the PVRs seen ending are sent, not confirmed: the hooks' own records follow on
  // the same connection, so the exec waits one round trip for both (the hook lag is a chain of
  // such waits). The job ends only once they are confirmed.
  return afterEndRecords(recording, () => runHooksOnceUp(rt, job, token, { restores, data, record, plan, wait, now }));
}

/**
 * The pod's PVRs are settled: its post-restore exec hooks run, each once its container is running
 * (and ready, with waitForReady) — until then the job re-parks without a slot (see processRestoreHooks).
 */
async function runHooksOnceUp(
  rt: PipelineRuntime,
  job: Job,
  token: string | undefined,
  input: {
    restores: RestoreState;
    data: RestoreHooksJobData;
    record: RestoreRecord;
    plan: RestorePodPlan;
    wait: z.infer<typeof waitStateSchema>;
    now: number;
  },
): Promise<RestoreHooksResult> {
  const { deps } = rt;
  const { restores, data, record, plan, wait, now } = input;
  const name = data.restoreName;
  if (plan.hooks.length === 0) return { pvrs: plan.volumes.length, hooks: 0, hooksFailed: 0 };
  if (record.cancelRequestedAt !== undefined) return { pvrs: plan.volumes.length, hooks: 0, hooksFailed: 0, skipped: 'canceled' };

  const podHub = rt.podHub;
  const isUpIn = (pod: RestoredPod, hook: PlannedRestoreHook) => {
    const status = pod.status?.containerStatuses?.find((s) => s.name === hook.container);
    return status?.state?.running !== undefined && (!hook.waitForReady || status.ready === true);
  };
  const since = wait.containersSince ?? now;
  const waitedMs = now - since;
  const restoreLeftMs = (record.deadlineAt ?? now) - now;
  const mayWait = (hook: PlannedRestoreHook) => (hook.waitTimeoutMs > 0 ? waitedMs < hook.waitTimeoutMs : restoreLeftMs > 0);
  const waitingIn = (pod: RestoredPod) => plan.hooks.filter((hook) => hook.invalid === undefined && !isUpIn(pod, hook) && mayWait(hook));
  const givingUpIn = (pod: RestoredPod) => plan.hooks.some((hook) => hook.invalid === undefined && !isUpIn(pod, hook) && !mayWait(hook));

  let lastGetAt = wait.lastGetAt;
  const readFromApiDue = now - (lastGetAt || since) >= deps.config.pvbRealReadEveryMs;
  let pod = readFromApiDue ? undefined : podHub?.cached(data.podName, data.podNamespace);
  // The cache may lag: never report a pod gone or a container not up from it alone.
  if (!pod || givingUpIn(pod)) {
    pod = (await getPod(deps.kube, data.podNamespace, data.podName)) as unknown as RestoredPod | undefined;
    lastGetAt = now;
  }
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
  // The container usually runs moments after the pod's last PVR ends (its restore-wait init
  // container exits on the agent's marker), and often just after this job found the PVRs settled.
  // On that first look, wait for the pod informer's events for at most restoreContainerGraceMs
  // (the slot is held that long at most) rather than re-park at once: a re-park and its promotion
  // put three Redis waits and a fetch into the hook's lag.
  if (wait.containersSince === undefined && podHub?.healthy() && waitingIn(pod).length > 0) {
    const until = Date.now() + deps.config.restoreContainerGraceMs; // a real timer's deadline
    while (waitingIn(pod).length > 0 && Date.now() < until) {
      await podHub.waitForChange(data.podName, until - Date.now());
      pod = podHub.cached(data.podName, data.podNamespace) ?? pod;
    }
  }
  // Hooks run in the pod this restore created, found by its uid: a pod deleted and made again
  // under the same name (by a controller, or by someone else) is not the one restored.
  const replaced = (candidate: RestoredPod) => data.podUid !== undefined && candidate.metadata.uid !== data.podUid;
  if (replaced(pod)) {
    // The cache may lag behind a replacement either way: the API server decides.
    const fresh = (await getPod(deps.kube, data.podNamespace, data.podName)) as unknown as RestoredPod | undefined;
    lastGetAt = now;
    if (!fresh || replaced(fresh)) {
      const onceKey = `hooks-pod-replaced:${data.podNamespace}/${data.podName}`;
      await restores.recordProblem(name, {
        level: 'error',
        onceKey,
        msg: `post-restore hooks of ${data.podNamespace}/${data.podName} not run: the pod this restore created (uid ${data.podUid}) was replaced by ${fresh ? `another pod of the same name (uid ${fresh.metadata.uid})` : 'none'}`,
        namespace: data.podNamespace,
      });
      await restores.countOnce(name, onceKey, 'hooksFailed', plan.hooks.length);
      return { pvrs: plan.volumes.length, hooks: 0, hooksFailed: plan.hooks.length, skipped: 'pod-replaced' };
    }
    pod = fresh;
  }
  const seen = pod;
  const isUp = (hook: PlannedRestoreHook) => isUpIn(seen, hook);
  const stillWaiting = waitingIn(seen);
  if (stillWaiting.length > 0) {
    // A healthy informer promotes this job when the pod changes: wait until a real read of the pod
    // is due (at least the poll cap), as a job watching its PVRs does. Without one, poll with a
    // capped backoff. Either way wake at the first timeout.
    const informerWillPromote = podHub?.healthy() === true;
    let delayMs = informerWillPromote
      ? Math.max(deps.config.pvbPollMaxMs, (lastGetAt || since) + deps.config.pvbRealReadEveryMs - now)
      : cappedBackoffMs(wait.polls, { baseMs: 50, maxMs: 2_000 });
    for (const hook of stillWaiting) delayMs = Math.min(delayMs, hook.waitTimeoutMs > 0 ? hook.waitTimeoutMs - waitedMs : restoreLeftMs);
    await job.updateData({ ...(job.data as object), wait: { ...wait, containersSince: since, polls: wait.polls + 1, lastGetAt } });
    // The pod may have changed while this look ran, or a cancel come after the record was read (one
    // in it skipped the hooks above); a wake-up then found the job running, not parked: both looked at again once parked.
    return reparkWatching(rt, job, token, Math.max(1, delayMs), {
      recheck: () => podHub?.promoteIfDue(data.podName, data.podNamespace, (cached) => waitingIn(cached).length < stillWaiting.length),
      cancelRequested: async () => (await restores.cancelRequestedAt(name)) !== undefined,
    });
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
