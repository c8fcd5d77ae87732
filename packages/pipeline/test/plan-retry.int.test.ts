import { planJobId } from '@stowage/core';
import { createKubeClients } from '@stowage/kube';
import type { BlockPlan, RunningWorkers } from '@stowage/pipeline';
import { startWorkers, submitBackup } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { useTestRedis } from '@stowage/testing';
import { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readFinishedBackup } from './support/finished-backup.js';
import { backupSpec, configMap, namespace, node, pod } from './support/fixtures.js';
import { type Harness, startHarness, waitForBackupEnd } from './support/harness.js';

/*
 * plan stores a batch while the batch before it is still being added, and lists the next
 * resources while blocks are stored. An attempt that fails in the middle of that (here: the
 * ConfigMaps list, read ahead while the pods' blocks go in) must leave nothing half done that its
 * retry would do twice or skip.
 */
const PODS = 40;
const objects: unknown[] = [
  namespace('shop'),
  node('node-a'),
  configMap('settings'),
  ...Array.from({ length: PODS }, (_, i) => pod({ name: `app-${i}` })),
];

describe('plan: an attempt that fails while batches are in flight', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  const running: RunningWorkers[] = [];

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    // Small batches: the pods' blocks go in over several batches, each added while the next is stored.
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: ['node-a'], config: { blockBatchSize: 4 } });
  });
  afterEach(async () => {
    h.sim.setFaults({});
    await Promise.all(running.splice(0).map((w) => w.close()));
  });
  afterAll(async () => {
    await h?.close();
    await redisHandle?.stop();
  });

  it.each([
    { window: 6, label: 'with a dispatch window' },
    { window: 0, label: 'without a window' },
  ])('$label: the retry completes the backup with every block and item once', async ({ window }) => {
    const name = `plan-retry-${window}`;
    // The planner's client gives up on the first error (the default retries would hide the fault).
    const kube = createKubeClients({ kubeconfigPath: h.sim.kubeconfigPath, retryPolicy: { maxAttempts: 1 } });
    const deps = { ...h.deps, kube, config: { ...h.deps.config, blocksInFlightPerBackup: window } };
    h.sim.setFaults({ errorRate: 1, statuses: [500], appliesTo: { resources: ['configmaps'], verbs: ['list'] } });
    running.push(startWorkers({ deps, queues: [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks] }));
    await submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name, spec: backupSpec() });

    // The first attempt fails on the ConfigMaps list, after the pods' blocks went in.
    const backups = new Queue(QueueName.backups, { connection: h.redis, prefix: h.queuePrefix });
    try {
      for (;;) {
        const planJob = await backups.getJob(planJobId(name));
        if ((planJob?.attemptsMade ?? 0) >= 1) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await backups.close();
    }
    const afterFirstAttempt = await h.deps.state.counters(name);
    expect(afterFirstAttempt.blocksPlanned).toBeUndefined(); // the plan did not complete
    expect(await h.deps.state.blockCount(name)).toBe(PODS); // but every pod's block was stored
    h.sim.setFaults({});

    expect(await waitForBackupEnd(h.deps.state, name)).toBe('Completed');
    const counters = await h.deps.state.counters(name);
    const finished = await readFinishedBackup(h.deps.storage, name);
    // Every pod in one block, once; the ConfigMap (listed by the retry) too.
    const pods = finished.blocks.flatMap(({ plan }) => (plan as BlockPlan | undefined)?.pods.map((p) => p.name) ?? []);
    expect(pods.sort()).toEqual(Array.from({ length: PODS }, (_, i) => `app-${i}`).sort());
    const itemKeys = finished.blocks.flatMap(({ plan }) => (plan as BlockPlan | undefined)?.items.map((i) => i.key) ?? []);
    expect(itemKeys).toContain('configmaps/shop/settings');
    expect(new Set(itemKeys).size).toBe(itemKeys.length);
    expect(counters.blocksPlanned).toBe(finished.blocks.length);
    expect(counters.blocksDone).toBe(finished.blocks.length);
    expect(counters.itemsBackedUp).toBe(counters.totalItems);
    // Each block ended once.
    const done = finished.events.filter((e) => e.type === 'block.done').map((e) => String(e.data.blockId));
    expect(done.sort()).toEqual(finished.blocks.map((b) => b.id).sort());
  });
});
