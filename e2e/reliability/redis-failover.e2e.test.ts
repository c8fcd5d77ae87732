/*
 * A real Redis Cluster (3 masters + 3 replicas, cluster-node-timeout 1 s) under real api and
 * worker processes and node agents. The master holding the queues' slot is SIGKILLed
 * mid-backup; its replica is promoted; the api and worker reconnect by themselves (nobody
 * restarts them) and the backup completes with nothing lost or done twice: every item, each PVB
 * once, each post hook once and after its PVB.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../packages/platform/src/index.js';
import type { NodeAgent } from '../../services/node-agent/src/index.js';
import { backupFacts, execsOf, pvbsOf, shopOfDatabases, UNFREEZE } from './support/fixtures.js';
import { recordRun } from './support/run-figures.js';
import { type ServiceProcess, type Stack, startAgents, startStack, waitFor, waitForBackupEnd } from './support/stack.js';

const NODES = ['node-a', 'node-b'];
const PODS = 6;
const fixture = shopOfDatabases({ nodes: NODES, pods: PODS, mib: 2, configMaps: 40 });

let stack: Stack;
let api: ServiceProcess;
let worker: ServiceProcess;
const agents: NodeAgent[] = [];

beforeAll(async () => {
  stack = await startStack({ fixture, redisCluster: true });
  const logger = createLogger({ level: 'warn', name: 'reliability-agents' });
  agents.push(
    ...(await startAgents(stack, NODES, {
      loadConcurrency: { globalConfig: 1 },
      bandwidthBytesPerSec: 1024 * 1024,
      progressIntervalMs: 250,
      logger,
    })),
  );
  [api, worker] = await Promise.all([stack.spawn('api', 'api'), stack.spawn('worker', 'worker')]);
}, 180_000);

afterAll(async () => {
  await Promise.allSettled(agents.map((a) => a.stop()));
  await stack?.close();
});

describe('a Redis Cluster master SIGKILLed mid-backup', () => {
  it('its replica takes over, api and worker reconnect, the backup completes with nothing lost or twice', async () => {
    const cluster = stack.redisCluster;
    if (!cluster) throw new Error('the stack must run on a Redis Cluster');
    const since = Date.now();
    const res = await fetch(`http://127.0.0.1:${api.port}/v1/backups`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'redis-failover', spec: { includedNamespaces: ['shop'] } }),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    // Live events (a blocking XREAD on the backup's stream, through the api's own cluster connection).
    const sse = await fetch(`http://127.0.0.1:${api.port}/v1/backups/redis-failover/events`, {
      headers: { authorization: `Bearer ${stack.token}` },
      signal: AbortSignal.timeout(20_000),
    });
    expect(sse.status).toBe(200);
    const reader = (sse.body as ReadableStream<Uint8Array>).getReader();
    let firstEvents = '';
    while (!/event: backup\./.test(firstEvents)) firstEvents += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    // Mid-backup: some PVBs copying, more still to come (one copy per node at a time).
    await waitFor(
      'PVBs in progress',
      async () => ((await pvbsOf(stack, 'redis-failover')).some((p) => p.status?.phase === 'InProgress') ? true : undefined),
      90_000,
    );
    const queueMaster = await cluster.masterPortFor(stack.queuePrefix);
    await cluster.killNode(queueMaster);
    const promoted = await cluster.waitUntilServing(stack.queuePrefix, 30_000);
    expect(promoted).not.toBe(queueMaster);

    const rec = await waitForBackupEnd(stack.state, 'redis-failover', 150_000);
    expect(rec.phase).toBe('Completed');
    const facts = await backupFacts(stack, 'redis-failover');
    expect(facts.totalItems).toBeGreaterThanOrEqual(PODS + 40);
    expect(facts.itemsBackedUp).toBe(facts.totalItems);
    expect(facts.tarballItems).toBe(facts.totalItems);
    expect(facts.pvbs).toBe(PODS);
    expect(facts.pvbsCompleted).toBe(PODS);
    const counters = await stack.state.counters('redis-failover');
    expect(counters.pvbsCompleted).toBe(PODS);
    expect(facts.hooksAttempted).toBe(PODS * 2);
    expect(facts.hooksFailed).toBe(0);
    const pvbs = await pvbsOf(stack, 'redis-failover');
    expect(new Set(pvbs.map((p) => p.spec.pod.name)).size).toBe(PODS);
    for (const pvb of pvbs) {
      const posts = execsOf(stack, 'shop', pvb.spec.pod.name, UNFREEZE, since);
      expect(posts, `post hooks of ${pvb.spec.pod.name}`).toHaveLength(1);
      expect(Date.parse(posts[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(pvb.status?.completionTimestamp ?? ''));
    }
    // Both processes are still the ones started before the failover, and ready.
    expect(api.child.exitCode).toBeNull();
    expect(worker.child.exitCode).toBeNull();
    for (const p of [api, worker]) {
      await waitFor(`${p.name} ready`, async () =>
        (await fetch(`http://127.0.0.1:${p.port}/readyz`).then((r) => r.status)) === 200 ? true : undefined,
      );
    }
    const view = await fetch(`http://127.0.0.1:${api.port}/v1/backups/redis-failover`, {
      headers: { authorization: `Bearer ${stack.token}` },
    });
    expect(view.status).toBe(200);
    expect(((await view.json()) as { phase: string }).phase).toBe('Completed');
    recordRun('redis-failover', { faults: 1, backups: 1, completed: 1, itemsLost: facts.totalItems - facts.itemsBackedUp });
  }, 300_000);
});
