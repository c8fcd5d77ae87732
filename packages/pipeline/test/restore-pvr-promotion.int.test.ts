import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { validateRestoreRequest } from '@stowage/core';
import { pvrLabels } from '@stowage/kube';
import { emptyDirPath } from '@stowage/kube-sim';
import { cancelRestore, type RunningWorkers, startWorkers, submitBackup, submitRestore } from '@stowage/pipeline';
import { childJobOptions, createQueue, JobName, promoteParked, QueueName, type RestoreHooksJobData, restoreJobIds } from '@stowage/queue';
import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, namespace, node, pod } from './support/fixtures.js';
import { BACKUP_AND_RESTORE_QUEUES, type Harness, startHarness, waitFor, waitForBackupEnd, waitForRestoreEnd } from './support/harness.js';
import { TestPvbController } from './support/test-pvb-controller.js';

const HOOK = ['/bin/mark-restored'];
const PVR_DONE = { phase: 'Completed', progress: { totalBytes: 1, bytesDone: 1 } } as const;

/** A backup of one pod with two emptyDir volumes (test PVB controller), then its namespace deleted. */
async function backedUp(redisUrl: string, pollCapMs: number): Promise<{ h: Harness; workers: RunningWorkers }> {
  const h = await startHarness({
    redisUrl,
    fixture: {
      objects: [
        node('node-a'),
        namespace('shop'),
        namespace('stowage'),
        pod({
          name: 'pair-0',
          volumes: [
            { name: 'data', emptyDir: {} },
            { name: 'logs', emptyDir: {} },
          ],
          annotations: { 'backup.velero.io/backup-volumes': 'data,logs' },
        }),
      ],
    },
    agentNodes: ['node-a'],
    config: { pvbPollMaxMs: pollCapMs },
  });
  const workers = startWorkers({ deps: h.deps, queues: BACKUP_AND_RESTORE_QUEUES });
  const controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 50, perNodeConcurrency: 2 });
  await controller.start();
  try {
    await submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name: 'bk1', spec: backupSpec() });
    expect(await waitForBackupEnd(h.deps.state, 'bk1')).toBe('Completed');
  } finally {
    await controller.stop();
  }
  await h.kube.core.deleteNamespace({ name: 'shop' });
  await waitFor('shop gone', async () => ((await h.kube.core.readNamespace({ name: 'shop' }).catch(() => undefined)) ? undefined : true));
  await waitFor('the PVR informer to be healthy', async () => (workers.pipeline.runtime.pvrHub?.healthy() ? true : undefined));
  return { h, workers };
}

/** A describe's backed-up cluster (backedUp on its own redis-server), set up once and torn down after its tests. */
function useBackedUp(pollCapMs: number): { h: Harness; workers: RunningWorkers } {
  const ctx = {} as { h: Harness; workers: RunningWorkers };
  let redisHandle: { url: string; stop: () => Promise<void> } | undefined;
  beforeAll(async () => {
    redisHandle = await useTestRedis();
    Object.assign(ctx, await backedUp(redisHandle.url, pollCapMs));
  });
  afterAll(async () => {
    await ctx.workers?.close();
    await ctx.h?.close();
    await redisHandle?.stop();
  });
  return ctx;
}

/** The describe's workers replaced by ones with these restores and parks far beyond a test's waits, once the PVR informer is healthy. */
async function restartWithLongParks(ctx: { h: Harness; workers: RunningWorkers }, restores: NonNullable<Harness['deps']['restores']>) {
  await ctx.workers.close();
  const workers = startWorkers({
    deps: { ...ctx.h.deps, restores, config: { ...ctx.h.deps.config, pvbRealReadEveryMs: 600_000 } },
    queues: BACKUP_AND_RESTORE_QUEUES,
  });
  ctx.workers = workers;
  await waitFor('the PVR informer to be healthy', async () => (workers.pipeline.runtime.pvrHub?.healthy() ? true : undefined));
}

async function submitWithHook(h: Harness, name: string, spec: Record<string, unknown> = {}): Promise<void> {
  const validation = validateRestoreRequest({
    name,
    spec: {
      backupName: 'bk1',
      hooks: { resources: [{ name: 'after', includedNamespaces: ['shop', 'shop-copy'], postHooks: [{ exec: { command: HOOK } }] }] },
      ...spec,
    },
  });
  if (!validation.ok) throw new Error(JSON.stringify(validation.problems));
  await submitRestore({ restores: h.deps.restores!, connection: h.redis, queuePrefix: h.queuePrefix }, { name, spec: validation.value });
}

/** The volumes' done markers (what the node agent writes): the restored pod's init container ends and its app container runs. */
async function writeDoneMarkers(h: Harness, restoreUid: string): Promise<void> {
  const restored = (await h.kube.core.readNamespacedPod({ namespace: 'shop', name: 'pair-0' })) as unknown as {
    metadata: { uid: string };
    spec: { nodeName: string };
  };
  for (const volume of ['data', 'logs']) {
    const dir = join(emptyDirPath(h.sim.dataRoot, restored.spec.nodeName, restored.metadata.uid, volume), '.stowage');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, restoreUid), '');
  }
}

const hookExecs = (h: Harness) => h.sim.execLog({ namespace: 'shop', pod: 'pair-0' }).filter((e) => e.command.join(' ') === HOOK.join(' '));

describe("post-restore hooks: a restored pod's restore-hooks job watches its PVRs itself and is promoted by the last one's end", () => {
  // No pvr-watch job, and a poll cap far beyond the test's waits: only a promotion by the PVR
  // informer can release the hook in time.
  const pollCapMs = 60_000;
  const ctx = useBackedUp(pollCapMs);

  it('no pvr-watch job; the first PVR end wakes nothing, the running container does not release the hook, the last end promotes the job once', async () => {
    const { h, workers } = ctx;
    const name = 'rs1';
    await submitWithHook(h, name);
    const pvrClient = h.deps.pvrs!;
    const pvrHub = () => workers?.pipeline.runtime.pvrHub;
    const pvrs = await waitFor('both PVRs', async () => {
      const found = await pvrClient.list({ labelSelector: `${pvrLabels.restoreName}=${name}` });
      return found.length === 2 ? found : undefined;
    });
    const [first, second] = pvrs.map((p) => p.metadata.name).sort();
    const hooksQueue = createQueue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    const watchQueue = createQueue(QueueName.pvbWatch, { connection: h.redis, prefix: h.queuePrefix });
    const jobId = restoreJobIds.hooks(name, 'shop', 'pair-0');
    const end = async (pvr: string) => {
      const now = new Date().toISOString();
      await pvrClient.patchStatus(pvr, { ...PVR_DONE, startTimestamp: now, completionTimestamp: now });
      await waitFor(`the informer to see ${pvr} end`, async () =>
        pvrHub()?.cached(pvr)?.status?.phase === 'Completed' ? true : undefined,
      );
      return Date.now();
    };
    try {
      await waitFor('the restore-hooks job to be parked', async () =>
        (await hooksQueue.getJobState(jobId)) === 'delayed' ? true : undefined,
      );
      // The job watches the PVRs itself: no job per PVR.
      expect(await watchQueue.getJobs(['waiting', 'delayed', 'active', 'completed', 'failed', 'waiting-children'])).toEqual([]);

      await end(first ?? '');
      await new Promise((r) => setTimeout(r, 500));
      expect(await hooksQueue.getJobState(jobId)).toBe('delayed');
      expect(pvrHub()?.promotions).toBe(0);

      // The app container runs: the restored-pod informer may wake the job for that, but a PVR is
      // still open, so the hook must not run.
      await writeDoneMarkers(h, pvrs[0]?.metadata.labels?.[pvrLabels.restoreUid] ?? '');
      await waitFor('the app container to run', async () => {
        const seen = (await h.kube.core.readNamespacedPod({ namespace: 'shop', name: 'pair-0' })) as unknown as {
          status?: { containerStatuses?: Array<{ name: string; state?: { running?: unknown } }> };
        };
        return seen.status?.containerStatuses?.find((s) => s.name === 'app')?.state?.running ? true : undefined;
      });
      await new Promise((r) => setTimeout(r, 500));
      expect(hookExecs(h)).toHaveLength(0);
      await waitFor('the job parked again', async () => ((await hooksQueue.getJobState(jobId)) === 'delayed' ? true : undefined));

      const lastEndedAt = await end(second ?? '');
      const { phase } = await waitForRestoreEnd(h.deps.restores!, h.deps.storage, name);
      expect(phase).toBe('Completed');
      expect(pvrHub()?.promotions).toBe(1);
      const runs = hookExecs(h);
      expect(runs).toHaveLength(1);
      expect(Date.parse(runs[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(lastEndedAt - 1_000);
      expect(Date.parse(runs[0]?.startedAt ?? '') - lastEndedAt).toBeLessThan(pollCapMs / 4);
      expect(await h.deps.restores!.counters(name)).toMatchObject({ pvrsCompleted: 2 });
    } finally {
      await hooksQueue.close();
      await watchQueue.close();
    }
  });

  it('a cancel wakes the parked restore-hooks job at once (a cancel changes no PVR the informer sees): its PVRs get spec.cancel, no hook runs; Canceled', async () => {
    const { h } = ctx;
    const name = 'rs-cancel';
    await submitWithHook(h, name, { namespaceMapping: { shop: 'shop-copy' } });
    const pvrClient = h.deps.pvrs!;
    const pvrs = await waitFor('both PVRs', async () => {
      const found = await pvrClient.list({ labelSelector: `${pvrLabels.restoreName}=${name}` });
      return found.length === 2 ? found : undefined;
    });
    const hooksQueue = createQueue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    const jobId = restoreJobIds.hooks(name, 'shop-copy', 'pair-0');
    try {
      await waitFor('the restore-hooks job to be parked', async () =>
        (await hooksQueue.getJobState(jobId)) === 'delayed' ? true : undefined,
      );
      const canceledAt = Date.now();
      expect(await cancelRestore({ restores: h.deps.restores!, hooksQueue }, name)).toMatchObject({ outcome: 'requested' });
      // Woken: no longer parked, or already ran again (and parked anew, watching its PVRs stop).
      const state = await hooksQueue.getJobState(jobId);
      expect(state !== 'delayed' || ((await hooksQueue.getJob(jobId))?.processedOn ?? 0) >= canceledAt).toBe(true);
      for (const pvr of pvrs) {
        await waitFor(`${pvr.metadata.name} asked to cancel`, async () =>
          (await pvrClient.get(pvr.metadata.name))?.spec?.cancel ? true : undefined,
        );
        await pvrClient.patchStatus(pvr.metadata.name, { phase: 'Canceled', completionTimestamp: new Date().toISOString() });
      }
      expect((await waitForRestoreEnd(h.deps.restores!, h.deps.storage, name)).phase).toBe('Canceled');
      expect(h.sim.execLog({ namespace: 'shop-copy', pod: 'pair-0' }).filter((e) => e.command.join(' ') === HOOK.join(' '))).toEqual([]);
    } finally {
      await hooksQueue.close();
    }
  });
});

describe('a restore-hooks job parked until a real read of its PVRs is due', () => {
  const ctx = useBackedUp(60_000);

  it('a cancel asked while its restore-items job creates the PVRs (before the job is parked, so the cancel wakes nothing) is still seen at once', async () => {
    const { h } = ctx;
    const name = 'rs-early-cancel';
    // Parks far beyond the test's waits: only the restore-items job's own check can wake it in time.
    const hooksQueue = createQueue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    const restores = Object.create(h.deps.restores!) as NonNullable<typeof h.deps.restores>;
    let canceled = false;
    restores.registerPvr = async (restoreName, record) => {
      if (!canceled) {
        canceled = true;
        expect(await cancelRestore({ restores: h.deps.restores!, hooksQueue }, restoreName)).toMatchObject({ outcome: 'requested' });
      }
      return h.deps.restores!.registerPvr(restoreName, record);
    };
    try {
      await restartWithLongParks(ctx, restores);
      await submitWithHook(h, name);
      const pvrClient = h.deps.pvrs!;
      const pvrs = await waitFor('both PVRs', async () => {
        const found = await pvrClient.list({ labelSelector: `${pvrLabels.restoreName}=${name}` });
        return found.length === 2 ? found : undefined;
      });
      expect(canceled).toBe(true);
      for (const pvr of pvrs) {
        await waitFor(`${pvr.metadata.name} asked to cancel`, async () =>
          (await pvrClient.get(pvr.metadata.name))?.spec?.cancel ? true : undefined,
        );
        await pvrClient.patchStatus(pvr.metadata.name, { phase: 'Canceled', completionTimestamp: new Date().toISOString() });
      }
      expect((await waitForRestoreEnd(h.deps.restores!, h.deps.storage, name)).phase).toBe('Canceled');
      expect(hookExecs(h)).toEqual([]);
    } finally {
      await hooksQueue.close();
    }
  });

  it('a cancel asked while a parked restore-hooks job looks at its PVRs (after it read the record, so the wake-up finds it running) is still seen at once, not at its next timer', async () => {
    const { h } = ctx;
    const name = 'rs-look-cancel';
    // Re-parks far beyond the test's waits: only the job's own look after parking can bring the cancel to its PVRs in time.
    const hooksQueue = createQueue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    const restores = Object.create(h.deps.restores!) as NonNullable<typeof h.deps.restores>;
    let armedFor: string | undefined;
    const canceledWhile: string[] = [];
    restores.getPvrs = async (restoreName, pvrNames) => {
      const read = await h.deps.restores!.getPvrs(restoreName, pvrNames);
      if (armedFor !== undefined) {
        // The look has the record and its PVRs (no cancel yet); the cancel comes now, before the job re-parks.
        canceledWhile.push(await hooksQueue.getJobState(armedFor));
        armedFor = undefined;
        expect(await cancelRestore({ restores: h.deps.restores!, hooksQueue }, restoreName)).toMatchObject({ outcome: 'requested' });
      }
      return read;
    };
    try {
      await restartWithLongParks(ctx, restores);
      await submitWithHook(h, name, { namespaceMapping: { shop: 'shop-copy' } });
      const pvrClient = h.deps.pvrs!;
      const pvrs = await waitFor('both PVRs', async () => {
        const found = await pvrClient.list({ labelSelector: `${pvrLabels.restoreName}=${name}` });
        return found.length === 2 ? found : undefined;
      });
      const jobId = restoreJobIds.hooks(name, 'shop-copy', 'pair-0');
      await waitFor('the restore-hooks job parked', async () => ((await hooksQueue.getJobState(jobId)) === 'delayed' ? true : undefined));
      await new Promise((r) => setTimeout(r, 300)); // the restore-items job's own check after parking is done
      // Its timer wakes it for a look (here the test does); the cancel comes while it looks.
      armedFor = jobId;
      expect(await promoteParked(hooksQueue, JobName.runRestoreHooks, jobId)).toBe(true);
      for (const pvr of pvrs) {
        await waitFor(`${pvr.metadata.name} asked to cancel`, async () =>
          (await pvrClient.get(pvr.metadata.name))?.spec?.cancel ? true : undefined,
        );
      }
      expect(canceledWhile).toEqual(['active']);
      for (const pvr of pvrs) {
        await pvrClient.patchStatus(pvr.metadata.name, { phase: 'Canceled', completionTimestamp: new Date().toISOString() });
      }
      expect((await waitForRestoreEnd(h.deps.restores!, h.deps.storage, name)).phase).toBe('Canceled');
      expect(h.sim.execLog({ namespace: 'shop-copy', pod: 'pair-0' })).toEqual([]);
    } finally {
      await hooksQueue.close();
    }
  });
});

describe('post-restore hooks of a restore started by an older version (a pvr-watch child per PVR) still follow its PVRs', () => {
  // Legacy pvr-watch jobs are no longer promoted: they poll, at most the poll cap apart.
  const ctx = useBackedUp(500);

  it('the restore-hooks job is released by its pvr-watch children once both PVRs ended, then runs the hook once; Completed', async () => {
    const { h, workers } = ctx;
    const name = 'rs-old';
    // What restore-items of an older version added: `restore-hooks ← pvr-watch…`, no PVR list in the hooks job's data.
    const flows = workers!.pipeline.runtime.flowProducer;
    const add = flows.add.bind(flows);
    flows.add = async (flow, opts) => {
      if (flow.name !== JobName.runRestoreHooks) return add(flow, opts);
      const { pvrs, deadlineAt, ...data } = flow.data as RestoreHooksJobData;
      const { delay: _parked, ...hooksOpts } = flow.opts ?? {};
      return add(
        {
          ...flow,
          data,
          opts: hooksOpts,
          children: (pvrs ?? []).map((pvrName) => ({
            name: JobName.watchPvr,
            queueName: QueueName.pvbWatch,
            data: { restoreName: data.restoreName, restoreUid: data.restoreUid, pvrName, deadlineAt },
            opts: childJobOptions(QueueName.pvbWatch, restoreJobIds.pvrWatch(name, pvrName)),
          })),
        },
        opts,
      );
    };
    const hooksQueue = createQueue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    const watchQueue = createQueue(QueueName.pvbWatch, { connection: h.redis, prefix: h.queuePrefix });
    try {
      await submitWithHook(h, name);
      const pvrClient = h.deps.pvrs!;
      const pvrs = await waitFor('both PVRs', async () => {
        const found = await pvrClient.list({ labelSelector: `${pvrLabels.restoreName}=${name}` });
        return found.length === 2 ? found : undefined;
      });
      const jobId = restoreJobIds.hooks(name, 'shop', 'pair-0');
      await waitFor('the restore-hooks job waiting for its children', async () =>
        (await hooksQueue.getJobState(jobId)) === 'waiting-children' ? true : undefined,
      );
      await writeDoneMarkers(h, pvrs[0]?.metadata.labels?.[pvrLabels.restoreUid] ?? '');
      let lastEndedAt = 0;
      for (const pvr of pvrs.map((p) => p.metadata.name).sort()) {
        await new Promise((r) => setTimeout(r, 300));
        expect(hookExecs(h)).toHaveLength(0);
        const now = new Date().toISOString();
        await pvrClient.patchStatus(pvr, { ...PVR_DONE, startTimestamp: now, completionTimestamp: now });
        lastEndedAt = Date.now();
      }
      const { phase } = await waitForRestoreEnd(h.deps.restores!, h.deps.storage, name);
      expect(phase).toBe('Completed');
      const watches = (await watchQueue.getJobs(['completed'])).filter((j) => j.name === JobName.watchPvr);
      expect(watches.map((j) => (j.data as { pvrName: string }).pvrName).sort()).toEqual(pvrs.map((p) => p.metadata.name).sort());
      const runs = hookExecs(h);
      expect(runs).toHaveLength(1);
      expect(Date.parse(runs[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(lastEndedAt - 1_000);
      expect(await h.deps.restores!.counters(name)).toMatchObject({ pvrsCompleted: 2 });
    } finally {
      flows.add = add;
      await hooksQueue.close();
      await watchQueue.close();
    }
  });
});
