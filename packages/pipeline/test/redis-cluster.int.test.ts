import { type Informer, type PodVolumeBackup, pvbLabels } from '@stowage/kube';
import { type RunningWorkers, startWorkers, submitBackup } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { type RedisCluster, spawnWorker, startRedisCluster, type WorkerProcess } from '@stowage/testing';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, namespace, node, pod } from './support/fixtures.js';
import { type Harness, startHarness, waitFor, waitForBackupEnd } from './support/harness.js';
import { TestPvbController } from './support/test-pvb-controller.js';

/*
 * The pipeline on a real Redis Cluster (3 masters + 3 replicas, cluster-node-timeout 1 s): a real
 * worker process hosts item-blocks, pvb-watch and hooks; this process hosts the backups queue
 * (as the api service does) and the test PVB controller (standing in for the node agents).
 */

const POST = ['/bin/unfreeze'];
const NODES = Array.from({ length: 6 }, (_, i) => `node-${i}`);
const PODS = NODES.map((n, i) => ({ name: `web-${i}`, node: n }));

const objects: unknown[] = [
  namespace('shop'),
  namespace('stowage'),
  ...NODES.map((n) => node(n)),
  ...PODS.map((p) =>
    pod({
      name: p.name,
      node: p.node,
      labels: { app: 'web' },
      volumes: [{ name: 'cache', emptyDir: {} }],
      annotations: { 'backup.velero.io/backup-volumes': 'cache', 'post.hook.backup.velero.io/command': JSON.stringify(POST) },
    }),
  ),
];

describe('on a Redis Cluster', () => {
  let cluster: RedisCluster;
  let h: Harness;
  let backups: RunningWorkers;
  let controller: TestPvbController;
  let worker: WorkerProcess | undefined;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 1_000 });
    h = await startHarness({ redisUrl: cluster.url, fixture: { objects }, agentNodes: NODES });
    backups = startWorkers({ deps: h.deps, queues: [QueueName.backups] });
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 2_500 });
    await controller.start();
    worker = await spawnWorker({
      REDIS_URL: cluster.url,
      KUBECONFIG: h.sim.kubeconfigPath,
      STOWAGE_STORAGE: h.storageDir,
      STOWAGE_QUEUE_PREFIX: h.queuePrefix,
      STOWAGE_NAMESPACE: 'stowage',
      STOWAGE_BLOCK_CONCURRENCY: '2',
    });
  }, 120_000);
  afterAll(async () => {
    await backups?.close();
    await worker?.stop();
    await controller?.stop();
    await h?.close();
    await cluster?.stop();
  });

  const submit = (name: string) =>
    submitBackup(
      { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
      { name, spec: backupSpec({ labelSelector: { matchLabels: { app: 'web' }, matchExpressions: [] } }) },
    );

  /** Each pod's PVB exactly once and Completed, its post hook exactly once and only after it. */
  async function expectEachPvbOnceAndHooksAfter(backup: string, submittedAt: number): Promise<void> {
    const pvbs = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${backup}` });
    expect(pvbs.map((p) => p.spec.pod.name).sort()).toEqual(PODS.map((p) => p.name).sort());
    expect(pvbs.map((p) => p.status?.phase)).toEqual(PODS.map(() => 'Completed'));
    const counters = await h.deps.state.counters(backup);
    expect(counters.pvbsCompleted).toBe(PODS.length);
    for (const pvb of pvbs) {
      const posts = h.sim
        .execLog({ namespace: 'shop', pod: pvb.spec.pod.name })
        .filter((e) => e.command.join(' ') === POST.join(' ') && Date.parse(e.startedAt) >= submittedAt);
      expect(posts, `post hooks of ${pvb.spec.pod.name}`).toHaveLength(1);
      expect(Date.parse(posts[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(pvb.status?.completionTimestamp ?? ''));
    }
  }

  it('a whole backup completes; its state keys are tagged by the backup, the queues by the prefix', async () => {
    expect(h.redis).toBeInstanceOf(Cluster);
    const submittedAt = Date.now();
    await submit('spread-1');
    expect(await waitForBackupEnd(h.deps.state, 'spread-1', 60_000)).toBe('Completed');
    await expectEachPvbOnceAndHooksAfter('spread-1', submittedAt);

    const slot = async (key: string) => (await h.redis.call('CLUSTER', 'KEYSLOT', key)) as number;
    expect(await slot(h.deps.state.key('spread-1', 'rec'))).toBe(await slot('spread-1'));
    expect(await slot(h.deps.state.key('spread-1', 'events'))).toBe(await slot('spread-1'));
    expect(await slot(`${h.queuePrefix}:${QueueName.itemBlocks}:wait`)).toBe(await slot(`${h.queuePrefix}:${QueueName.hooks}:id`));
    // Backups spread over the shards: of a few backups' tags, not all share one master.
    const masters = new Set<number>();
    for (const name of ['a-1', 'b-2', 'c-3', 'd-4', 'e-5', 'f-6']) masters.add(await cluster.masterPortFor(h.deps.state.key(name, 'rec')));
    expect(masters.size).toBeGreaterThan(1);
  }, 90_000);

  it('failover: SIGKILL the master of the queues mid-backup; its replica takes over and the backup completes, nothing lost or twice', async () => {
    const queueMaster = await cluster.masterPortFor(h.queuePrefix);
    // Kill when the first PVB is being copied: blocks are still being dispatched, watches parked.
    let killed: Promise<void> | undefined;
    const informer: Informer<PodVolumeBackup> = h.pvbs.watchPvbs({
      labelSelector: `${pvbLabels.backupName}=failover-1`,
      onEvent: (event) => {
        if (!killed && event.object.status?.phase === 'InProgress') killed = cluster.killNode(queueMaster);
      },
    });
    try {
      const submittedAt = Date.now();
      await submit('failover-1');
      await waitFor('a PVB in progress and the master killed', async () => (killed ? true : undefined), 30_000, 20);
      await killed;
      const promoted = await cluster.waitUntilServing(h.queuePrefix, 30_000);
      expect(promoted).not.toBe(queueMaster);

      expect(await waitForBackupEnd(h.deps.state, 'failover-1', 90_000)).toBe('Completed');
      await expectEachPvbOnceAndHooksAfter('failover-1', submittedAt);
      // The worker process rode it out by itself: still running, never restarted, and ready again.
      expect(worker?.child.exitCode).toBeNull();
      const ready = await fetch(`http://127.0.0.1:${worker?.port}/readyz`);
      expect(ready.status).toBe(200);
    } finally {
      await informer.stop();
    }
  }, 150_000);
});
