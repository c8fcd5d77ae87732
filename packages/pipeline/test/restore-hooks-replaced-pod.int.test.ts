import { validateRestoreRequest } from '@stowage/core';
import { type RunningWorkers, startWorkers, submitBackup, submitRestore } from '@stowage/pipeline';
import { createQueue, QueueName, restoreJobIds } from '@stowage/queue';
import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, namespace, node, pod } from './support/fixtures.js';
import { BACKUP_AND_RESTORE_QUEUES, type Harness, startHarness, waitFor, waitForBackupEnd, waitForRestoreEnd } from './support/harness.js';

const SETTLE = ['/bin/settle'];
const HOOK = ['/bin/mark-restored'];

/** The backed-up pod: its init container takes long enough in the simulator's kubelet for the test to replace the restored pod meanwhile. */
function slowStartingPod(): unknown {
  const base = pod({ name: 'app-0', exec: { settle: { rules: [{ command: SETTLE, durationMs: 15_000 }] } } }) as {
    spec: Record<string, unknown>;
  };
  base.spec.initContainers = [{ name: 'settle', image: 'busybox', command: SETTLE }];
  return base;
}

// Post-restore hooks go to the pod the restore created, by uid (issue 44): a pod deleted and made
// again under the same name (by a controller, or by a tenant) is another pod and gets no hook.
describe('post-restore hooks of a pod replaced under the same name', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({
      redisUrl: redisHandle.url,
      fixture: { objects: [node('node-a'), namespace('shop'), slowStartingPod()] },
      agentNodes: ['node-a'],
      config: { restoreContainerGraceMs: 250 },
    });
    workers = startWorkers({ deps: h.deps, queues: BACKUP_AND_RESTORE_QUEUES });
    await submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name: 'bk1', spec: backupSpec() });
    expect(await waitForBackupEnd(h.deps.state, 'bk1')).toBe('Completed');
    await h.kube.core.deleteNamespace({ name: 'shop' });
    await waitFor('shop gone', async () => ((await h.kube.core.readNamespace({ name: 'shop' }).catch(() => undefined)) ? undefined : true));
  });
  afterAll(async () => {
    await workers?.close();
    await h?.close();
    await redisHandle?.stop();
  });

  it('runs no hook in the replacement, and records why', async () => {
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
    const restoredUid = await waitFor('the restore to create app-0', async () => {
      const found = await h.kube.core.readNamespacedPod({ namespace: 'shop', name: 'app-0' }).catch(() => undefined);
      return found?.metadata?.uid;
    });
    // The hooks job waits for the app container, parked; the hooks queue is held while the pod
    // is replaced (so the job looks next at the replacement, not at the moment it is gone).
    const hooksQueue = createQueue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    const jobId = restoreJobIds.hooks('rs1', 'shop', 'app-0');
    await waitFor('the hooks job parked for its container', async () => {
      const job = await hooksQueue.getJob(jobId);
      return (job?.data as { wait?: { containersSince?: number } } | undefined)?.wait?.containersSince;
    });
    await hooksQueue.pause();
    // Replaced while the restored pod still initialises: a same-named pod that runs at once.
    await h.kube.core.deleteNamespacedPod({ namespace: 'shop', name: 'app-0', gracePeriodSeconds: 0 });
    await waitFor('the restored pod gone', async () =>
      (await h.kube.core.readNamespacedPod({ namespace: 'shop', name: 'app-0' }).catch(() => undefined)) ? undefined : true,
    );
    const replacement = pod({ name: 'app-0' }) as { metadata: Record<string, unknown> };
    delete replacement.metadata.uid;
    // The simulator's kubelet starts it (a status given at creation would be kept as is).
    delete (replacement as { status?: unknown }).status;
    const created = await h.kube.core.createNamespacedPod({ namespace: 'shop', body: replacement as never });
    expect(created.metadata?.uid).not.toBe(restoredUid);
    await waitFor('the replacement running', async () => {
      const found = await h.kube.core.readNamespacedPod({ namespace: 'shop', name: 'app-0' });
      return found.status?.containerStatuses?.some((c) => c.state?.running) ? true : undefined;
    });
    await hooksQueue.resume();
    await hooksQueue.close();

    const ended = await waitForRestoreEnd(h.deps.restores!, h.deps.storage, 'rs1');
    // Nothing ran in the replacement...
    expect(h.sim.execLog({ namespace: 'shop', pod: 'app-0' }).filter((e) => e.command.join(' ') === HOOK.join(' '))).toEqual([]);
    expect(ended.hookRuns.filter((r) => r.outcome === 'exited')).toEqual([]);
    // ...and the restore says why, naming both uids.
    const said = ended.logs.map((l) => JSON.stringify(l)).join('\n');
    expect(said).toContain(`uid ${restoredUid}`);
    expect(said).toContain(`uid ${created.metadata?.uid}`);
    expect(ended.counters.hooksFailed).toBe(1);
  }, 120_000);
});
