import { generateCluster } from '@stowage/kube-sim';
import { BackupState, type RunningWorkers, startWorkers, submitBackup } from '@stowage/pipeline';
import { parseCommandStats } from '@stowage/platform';
import { createWorkerConnection, QueueName, type RedisClient, statePrefixFor } from '@stowage/queue';
import { type RedisServer, startRedisServer } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, namespace } from './support/fixtures.js';
import { type Harness, startHarness, waitFor } from './support/harness.js';
import { TestPvbController } from './support/test-pvb-controller.js';

/*
 * Issue 23 item 4: Redis commands per block in the bench's default fs-backup scenario — a pod
 * with two PVC-backed fs-backup volumes and a post hook per block — counted the way the bench
 * counts them: INFO commandstats (a script's own commands included) over a whole backup, plan
 * and finalize included, ÷ the blocks it planned. Two worker sets on their own connections stand
 * in for the two worker processes (each has its own PVB informer, as in a deployment). A private
 * redis-server, so nothing else is counted.
 *
 * The budget is the figure reached plus a margin, not issue 23's target of 150: 203–207 in runs
 * here (206–213 before finalize read each PVB once and a post-hooks run stopped reading failures
 * and the cancel flag it does not use; 209–217 when the post-hooks job began watching its block's
 * PVBs; 322–331 with a pvb-watch job per PVB, four jobs per block). About 130 is BullMQ's own
 * work for two jobs (add ~23, activations ~25, completions ~66 with the parents' bookkeeping,
 * one promotion ~5 plus ~2 for each other worker's attempt); the rest ours (block steps, PVB
 * registration and records, events, hook runs, once-counters, the window claim, finalize). Its
 * PVBs take 300 ms, so no post-hooks job wakes before its promotion: the bench's long copies add
 * re-parks. `pnpm bench --redis-monitor` attributes the count to scripts. Reaching 150 takes one
 * job per block (see the pipeline README).
 */

const PODS = 12;
const NODES = ['node-0', 'node-1', 'node-2', 'node-3'];
const BUDGET_PER_BLOCK = 215;
const ENDED = new Set(['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled']);

describe('Redis commands per fs-backup block', () => {
  let server: RedisServer;
  let h: Harness;
  let controller: TestPvbController;
  const running: RunningWorkers[] = [];
  const connections: RedisClient[] = [];

  beforeAll(async () => {
    server = await startRedisServer();
    const cluster = generateCluster({
      namespaces: 1,
      podsPerNamespace: PODS,
      volumesPerPod: 2,
      bytesPerVolume: 0,
      nodes: NODES.length,
      postHook: { durationMs: 20 },
      namespacePrefix: 'shop',
      includeStowage: false,
    });
    h = await startHarness({ redisUrl: server.url, fixture: { objects: [...cluster.objects, namespace('stowage')] }, agentNodes: NODES });
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 300, perNodeConcurrency: 4 });
    await controller.start();
    running.push(startWorkers({ deps: h.deps, queues: [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks] }));
    // A second worker process: its own connection, state and informer.
    const redis = createWorkerConnection(server.url);
    connections.push(redis);
    const deps = { ...h.deps, connection: redis, state: new BackupState({ redis, prefix: statePrefixFor(h.queuePrefix) }) };
    running.push(startWorkers({ deps, queues: [QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks] }));
  });
  afterAll(async () => {
    await Promise.all(running.map((w) => w.close()));
    await controller?.stop();
    for (const c of connections) c.disconnect();
    await h?.close();
    await server?.stop();
  });

  /** Backs up the namespace; returns its phase and how many reads this test made waiting (not the pipeline's). */
  const backUp = async (name: string) => {
    await submitBackup(
      { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
      { name, spec: backupSpec({ includedNamespaces: ['shop-0'], defaultVolumesToFsBackup: true }) },
    );
    let polls = 0;
    const phase = await waitFor(
      `backup ${name} to end`,
      async () => {
        polls++;
        const rec = await h.deps.state.getBackup(name);
        return rec && ENDED.has(rec.phase) && rec.archivedAt !== undefined ? rec.phase : undefined;
      },
      60_000,
      200,
    );
    return { phase, polls };
  };

  it(`stays within ${BUDGET_PER_BLOCK} commands per block (two PVBs and a post hook each)`, async () => {
    // A first backup warms up what a running fleet has (informers synced, scripts loaded).
    expect((await backUp('warm-up')).phase).toBe('Completed');
    const before = parseCommandStats(await h.redis.info('commandstats'));
    const measured = await backUp('measured');
    expect(measured.phase).toBe('Completed');
    const after = parseCommandStats(await h.redis.info('commandstats'));
    // This test's own reads: its polls (HGETALL) and the INFO call.
    after.hgetall = (after.hgetall ?? 0) - measured.polls;
    after.info = (after.info ?? 0) - 1;

    const counters = await h.deps.state.counters('measured');
    expect(counters.pvbsCompleted).toBe(PODS * 2);
    expect(counters.hooksAttempted).toBe(PODS);
    const blocks = counters.blocksPlanned ?? 0;
    expect(blocks).toBe(PODS + 1); // a block per pod, and the namespace's own
    const delta = Object.entries(after).map(([cmd, calls]) => [cmd, calls - (before[cmd] ?? 0)] as const);
    const total = delta.reduce((s, [, n]) => s + n, 0);
    const perBlock = total / blocks;
    console.log(
      `Redis commands per block: ${perBlock.toFixed(1)} (${total} for ${blocks} blocks); ${delta
        .filter(([, n]) => n > 0)
        .sort((a, b) => b[1] - a[1])
        .map(([c, n]) => `${c} ${(n / blocks).toFixed(1)}`)
        .join(', ')}`,
    );
    expect(perBlock).toBeLessThanOrEqual(BUDGET_PER_BLOCK);
  });
});
