import { type Informer, type PodVolumeBackup, pvbLabels } from '@stowage/kube';
import { inlineBlockWait, type RunningWorkers, startWorkers, submitBackup } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { spawnWorker, useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, namespace, node, pod } from './support/fixtures.js';
import { type Harness, startHarness, waitForBackupEnd } from './support/harness.js';
import { TestPvbController } from './support/test-pvb-controller.js';

/*
 * Real worker processes (services/worker/src/main.ts) host item-blocks, pvb-watch and hooks;
 * this process hosts the backups queue (plan, finalize, as the api service does) and the test
 * PVB controller (standing in for the node agents).
 */

const POST = ['/bin/unfreeze'];
const NODES = Array.from({ length: 10 }, (_, i) => `node-${i}`);

const objects: unknown[] = [
  namespace('shop'),
  namespace('stowage'),
  ...NODES.map((n) => node(n)),
  // The seed-bug pod: a post hook and a volume whose PVB takes seconds.
  pod({
    name: 'db-0',
    node: 'node-0',
    volumes: [{ name: 'data', emptyDir: {} }],
    labels: { app: 'db' },
    annotations: { 'post.hook.backup.velero.io/command': JSON.stringify(POST), 'backup.velero.io/backup-volumes': 'data' },
  }),
  // Ten blocks on ten nodes for the decoupling test.
  ...NODES.map((n, i) =>
    pod({
      name: `web-${i}`,
      node: n,
      labels: { app: 'web' },
      volumes: [{ name: 'cache', emptyDir: {} }],
      annotations: { 'backup.velero.io/backup-volumes': 'cache' },
    }),
  ),
];

/** Watches PVBs of one backup and remembers the most that were InProgress at the same moment. */
function trackInProgress(h: Harness, backupName: string): { max: () => number; stop: () => Promise<void> } {
  const phases = new Map<string, string>();
  let max = 0;
  const informer: Informer<PodVolumeBackup> = h.pvbs.watchPvbs({
    labelSelector: `${pvbLabels.backupName}=${backupName}`,
    onEvent: (event) => {
      phases.set(event.object.metadata.name, event.object.status?.phase ?? 'New');
      const now = [...phases.values()].filter((p) => p === 'InProgress').length;
      if (now > max) max = now;
    },
  });
  return { max: () => max, stop: () => informer.stop() };
}

describe('worker processes', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let backups: RunningWorkers;
  let controller: TestPvbController;

  const workerEnv = (extra: Record<string, string>) => ({
    REDIS_URL: redisHandle.url,
    KUBECONFIG: h.sim.kubeconfigPath,
    STOWAGE_STORAGE: h.storageDir,
    STOWAGE_QUEUE_PREFIX: h.queuePrefix,
    STOWAGE_NAMESPACE: 'stowage',
    ...extra,
  });

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: NODES });
    backups = startWorkers({ deps: h.deps, queues: [QueueName.backups] });
    controller = new TestPvbController({
      pvbs: h.pvbs,
      durationMs: (pvb) =>
        pvb.spec.pod.name === 'db-0' ? 2_500 : pvb.metadata.labels?.[pvbLabels.backupName] === 'inline-1' ? 600 : 3_000,
    });
    await controller.start();
  });
  afterAll(async () => {
    await backups?.close();
    await controller?.stop();
    await h?.close();
    await redisHandle?.stop();
  });

  const submit = (name: string, app: string) =>
    submitBackup(
      { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
      { name, spec: backupSpec({ labelSelector: { matchLabels: { app }, matchExpressions: [] } }) },
    );

  it('the seed bug cannot happen: the post hook starts only after its PVB completed', async () => {
    const worker = await spawnWorker(workerEnv({ STOWAGE_BLOCK_CONCURRENCY: '2' }));
    try {
      await submit('seed-1', 'db');
      expect(await waitForBackupEnd(h.deps.state, 'seed-1', 40_000)).toBe('Completed');
      const [pvb] = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=seed-1` });
      expect(pvb?.status?.phase).toBe('Completed');
      const completedAt = Date.parse(pvb?.status?.completionTimestamp ?? '');
      const startedAt = Date.parse(pvb?.status?.startTimestamp ?? '');
      expect(completedAt - startedAt).toBeGreaterThanOrEqual(2_000);
      const posts = h.sim.execLog({ namespace: 'shop', pod: 'db-0' }).filter((e) => e.command.join(' ') === POST.join(' '));
      expect(posts).toHaveLength(1);
      expect(Date.parse(posts[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(completedAt);
      expect(posts[0]?.exitCode).toBe(0);
    } finally {
      expect(await worker.stop()).toBe(0);
    }
  }, 90_000);

  it('decoupled: one block slot, ten nodes → many PVBs InProgress together; inline: never more than one', async () => {
    const worker = await spawnWorker(workerEnv({ STOWAGE_BLOCK_CONCURRENCY: '1' }));
    const decoupled = trackInProgress(h, 'decoupled-1');
    try {
      await submit('decoupled-1', 'web');
      expect(await waitForBackupEnd(h.deps.state, 'decoupled-1', 60_000)).toBe('Completed');
      expect(decoupled.max()).toBeGreaterThanOrEqual(5);
    } finally {
      await decoupled.stop();
      expect(await worker.stop()).toBe(0);
    }

    // The benchmark's comparison (inlineBlockWait, Velero's way), one block slot, hosted here as
    // the bench's inline worker processes host it; the product's worker never wires it in.
    const inlineWorkers = startWorkers({
      deps: { ...h.deps, blockWait: inlineBlockWait },
      queues: [QueueName.itemBlocks, QueueName.hooks],
      concurrency: { itemBlocks: 1 },
    });
    const inline = trackInProgress(h, 'inline-1');
    try {
      await submit('inline-1', 'web');
      expect(await waitForBackupEnd(h.deps.state, 'inline-1', 60_000)).toBe('Completed');
      expect(inline.max()).toBe(1);
      const counters = await h.deps.state.counters('inline-1');
      expect(counters.pvbsCompleted).toBe(10);
    } finally {
      await inline.stop();
      await inlineWorkers.close();
    }
  }, 150_000);
});
