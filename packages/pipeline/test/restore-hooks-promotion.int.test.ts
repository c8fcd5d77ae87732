import { validateRestoreRequest } from '@stowage/core';
import { type RunningWorkers, startWorkers, submitBackup, submitRestore } from '@stowage/pipeline';
import { createQueue, QueueName, restoreJobIds } from '@stowage/queue';
import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, namespace, node, pod } from './support/fixtures.js';
import { BACKUP_AND_RESTORE_QUEUES, type Harness, startHarness, waitFor, waitForBackupEnd, waitForRestoreEnd } from './support/harness.js';

const ALL_QUEUES = BACKUP_AND_RESTORE_QUEUES;
const SETTLE = ['/bin/settle'];
const HOOK = ['/bin/mark-restored'];

/** A pod whose init container takes `settleMs` in the simulator's kubelet: its app container runs only after that. */
function slowStartingPod(settleMs: number): unknown {
  const base = pod({ name: 'app-0', exec: { settle: { rules: [{ command: SETTLE, durationMs: settleMs }] } } }) as {
    spec: Record<string, unknown>;
  };
  base.spec.initContainers = [{ name: 'settle', image: 'busybox', command: SETTLE }];
  return base;
}

/**
 * The job finds the pod's PVRs settled before the app container runs (an init container settles
 * after the restore-wait one). It waits for the container in its slot for restoreContainerGraceMs,
 * then parks until the restored-pod informer promotes it: a container slower than the grace parks
 * it (until a real read of the pod is due, however short the poll cap); one within the grace does
 * not (no re-park and promotion in the hook's lag).
 */
describe.each([
  { settleMs: 1_500, graceMs: 250, parks: true, pollCapMs: 600_000 },
  { settleMs: 3_000, graceMs: 250, parks: true, pollCapMs: 1_000 },
  { settleMs: 500, graceMs: 5_000, parks: false, pollCapMs: 600_000 },
])(
  'post-restore hooks: a container that runs $settleMs ms after its PVRs end, grace $graceMs ms, poll cap $pollCapMs ms',
  ({ settleMs, graceMs, parks, pollCapMs }) => {
    let redisHandle: { url: string; stop: () => Promise<void> };
    let h: Harness;
    let workers: RunningWorkers | undefined;

    beforeAll(async () => {
      redisHandle = await useTestRedis();
      // A job parked while the restored-pod informer is healthy sleeps until a real read of the pod
      // is due (30 s, or the poll cap when longer): far beyond the test's timeout, so it can only
      // come back through the informer's promotion.
      h = await startHarness({
        redisUrl: redisHandle.url,
        fixture: { objects: [node('node-a'), namespace('shop'), slowStartingPod(settleMs)] },
        agentNodes: ['node-a'],
        config: { pvbPollMaxMs: pollCapMs, restoreContainerGraceMs: graceMs },
      });
      workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES });
      await submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name: 'bk1', spec: backupSpec() });
      expect(await waitForBackupEnd(h.deps.state, 'bk1')).toBe('Completed');
      await h.kube.core.deleteNamespace({ name: 'shop' });
      await waitFor('shop gone', async () =>
        (await h.kube.core.readNamespace({ name: 'shop' }).catch(() => undefined)) ? undefined : true,
      );
      const podHub = workers.pipeline.runtime.podHub;
      await waitFor('the restored-pod informer to be healthy', async () => (podHub?.healthy() ? true : undefined));
    });
    afterAll(async () => {
      await workers?.close();
      await h?.close();
      await redisHandle?.stop();
    });

    it(`${parks ? 'the job parks, the pod starting promotes it' : 'the job waits in its slot, never parks'}, and the hook runs after the container started`, async () => {
      const validation = validateRestoreRequest({
        name: 'rs1',
        spec: {
          backupName: 'bk1',
          hooks: { resources: [{ name: 'after', includedNamespaces: ['shop'], postHooks: [{ exec: { command: HOOK } }] }] },
        },
      });
      if (!validation.ok) throw new Error(JSON.stringify(validation.problems));
      await submitRestore(
        { restores: h.deps.restores!, connection: h.redis, queuePrefix: h.queuePrefix },
        { name: 'rs1', spec: validation.value },
      );
      const jobId = restoreJobIds.hooks('rs1', 'shop', 'app-0');
      if (parks) {
        // Parked for the container (not its PVRs): until a real read of the pod is due, not the poll cap.
        const hooksQueue = createQueue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
        try {
          const wakesInMs = await waitFor('the job parked for its container', async () => {
            const job = await hooksQueue.getJob(jobId);
            if (!(job?.data as { wait?: { containersSince?: number } } | undefined)?.wait?.containersSince) return undefined;
            const score = await h.redis.zscore(hooksQueue.toKey('delayed'), jobId);
            return score === null ? undefined : Math.floor(Number(score) / 0x1000) - Date.now();
          });
          expect(wakesInMs).toBeGreaterThan(20_000);
        } finally {
          await hooksQueue.close();
        }
      }
      // Read from storage: once archived, Redis keeps only the restore's record and counters.
      const { phase, hookRuns: runs } = await waitForRestoreEnd(h.deps.restores!, h.deps.storage, 'rs1');
      expect(phase).toBe('Completed');
      expect(runs.map((r) => [r.command.join(' '), r.outcome, r.exitCode])).toEqual([[HOOK.join(' '), 'exited', 0]]);

      // The job looked while the container was not running yet and parked (for the 10-min cap)
      // or waited for it in its slot...
      const hooksQueue = createQueue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
      try {
        const job = await hooksQueue.getJob(jobId);
        if (!job) throw new Error('the restore-hooks job is gone');
        expect(await job.getState()).toBe('completed');
        const polls = (job.data as { wait?: { polls?: number } }).wait?.polls ?? 0;
        if (parks) expect(polls).toBeGreaterThanOrEqual(1);
        else expect(polls).toBe(0);
      } finally {
        await hooksQueue.close();
      }
      // ...and a parked one came back through the informer, not its next poll.
      if (parks) expect(workers?.pipeline.runtime.podHub?.promotions).toBeGreaterThanOrEqual(1);

      // The hook ran in the running container, never before it started (the kubelet's startedAt has whole seconds).
      const restored = (await h.kube.core.readNamespacedPod({ namespace: 'shop', name: 'app-0' })) as unknown as {
        status: { containerStatuses: Array<{ name: string; state: { running?: { startedAt: string } } }> };
      };
      const runningSince = restored.status.containerStatuses.find((s) => s.name === 'app')?.state.running?.startedAt;
      expect(runningSince).toBeDefined();
      const execs = h.sim.execLog({ namespace: 'shop', pod: 'app-0' }).filter((e) => e.command.join(' ') === HOOK.join(' '));
      expect(execs).toHaveLength(1);
      expect(Date.parse(execs[0]!.startedAt)).toBeGreaterThanOrEqual(Date.parse(runningSince!));
    });
  },
);
