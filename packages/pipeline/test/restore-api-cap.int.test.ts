import { validateRestoreRequest } from '@stowage/core';
import { type RunningWorkers, restoreApiShares, startWorkers, submitBackup, submitRestore } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { spawnWorker, useTestRedis, type WorkerProcess } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, configMap, namespace, node } from './support/fixtures.js';
import { type Harness, startHarness, waitFor, waitForBackupEnd } from './support/harness.js';

/*
 * STOWAGE_RESTORE_MAX_INFLIGHT is a bound for the whole deployment, not per process: two real
 * worker processes restore items while the simulator holds every request 20 ms, and the
 * simulator's own count of requests in flight never goes above the cap.
 */

const ITEMS = 240;
const objects: unknown[] = [node('node-a'), namespace('shop'), ...Array.from({ length: ITEMS }, (_, i) => configMap(`cm-${i}`))];
const ENDED = new Set(['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled']);

describe('the restore API cap across worker processes', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let host: RunningWorkers | undefined;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: ['node-a'] });
    // This process hosts what the api service hosts (backups; restore plan, tiers, finalize) and backs the namespace up.
    const backupSide = startWorkers({
      deps: h.deps,
      queues: [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks],
    });
    try {
      await submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name: 'bk1', spec: backupSpec() });
      expect(await waitForBackupEnd(h.deps.state, 'bk1', 60_000)).toBe('Completed');
    } finally {
      await backupSide.close();
    }
    host = startWorkers({ deps: h.deps, queues: [QueueName.restores] });
  }, 120_000);
  afterAll(async () => {
    await host?.close();
    await h?.close();
    await redisHandle?.stop();
  });

  /** Restores shop into `target` with two worker processes capped at `cap`; the simulator's peak in flight. */
  const restoreWithTwoWorkers = async (name: string, target: string, cap: number): Promise<number> => {
    const env = {
      REDIS_URL: redisHandle.url,
      KUBECONFIG: h.sim.kubeconfigPath,
      STOWAGE_STORAGE: h.storageDir,
      STOWAGE_QUEUE_PREFIX: h.queuePrefix,
      STOWAGE_NAMESPACE: 'stowage',
      STOWAGE_RESTORE_MAX_INFLIGHT: String(cap),
      // More item jobs per process than the cap allows in the whole deployment.
      STOWAGE_RESTORE_ITEMS_CONCURRENCY: '8',
    };
    const workers: WorkerProcess[] = await Promise.all([spawnWorker(env, 60_000), spawnWorker(env, 60_000)]);
    try {
      h.sim.setFaults({ latencyMs: 20 });
      h.sim.resetRequests();
      const validation = validateRestoreRequest({ name, spec: { backupName: 'bk1', namespaceMapping: { shop: target } } });
      if (!validation.ok) throw new Error(JSON.stringify(validation.problems));
      await submitRestore(
        { restores: h.deps.restores!, connection: h.redis, queuePrefix: h.queuePrefix },
        { name, spec: validation.value },
      );
      const phase = await waitFor(
        `restore ${name} to end`,
        async () => {
          const rec = await h.deps.restores?.getRestore(name);
          return rec && ENDED.has(rec.phase) ? rec.phase : undefined;
        },
        120_000,
      );
      expect(phase).toBe('Completed');
      const peak = h.sim.requests().inFlight.peak;
      h.sim.clearFaults();
      const restored = await h.kube.requestJson<{ items: unknown[] }>({ path: `/api/v1/namespaces/${target}/configmaps` });
      expect(restored.items).toHaveLength(ITEMS);
      return peak;
    } finally {
      h.sim.clearFaults();
      // A clean exit; the worker's own output says why when it was not.
      const codes = await Promise.all(workers.map((w) => w.stop()));
      for (const [i, code] of codes.entries()) expect(code, workers[i]?.output.join('').slice(-3000)).toBe(0);
    }
  };

  it('cap 12: many requests at once, never more than 12 in flight at the API server', async () => {
    expect(restoreApiShares(12)).toEqual({ jobsAtOnce: 2, perJob: 6 });
    const peak = await restoreWithTwoWorkers('rs-cap-12', 'shop-a', 12);
    expect(peak).toBeLessThanOrEqual(12);
    // More than one job's share: jobs ran side by side (a per-process cap would have allowed 24).
    expect(peak).toBeGreaterThan(6);
  }, 180_000);

  it("cap 1 is Velero's way: one request at a time whatever the number of workers", async () => {
    expect(await restoreWithTwoWorkers('rs-cap-1', 'shop-b', 1)).toBe(1);
  }, 180_000);
});
