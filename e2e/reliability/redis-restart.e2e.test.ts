/*
 * Redis (the test's own redis-server, appendonly yes, appendfsync everysec as k8s/ and
 * docker-compose ship it) SIGKILLed mid-backup
 * and started again on the same port a few seconds later: the api and worker processes
 * reconnect by themselves, the backup completes, and nothing is lost (every item, every PVB,
 * every hook counted once; the api answers again).
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
  stack = await startStack({ fixture, appendOnly: true, appendFsync: 'everysec' });
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

describe('Redis restarted mid-backup', () => {
  it('api and worker reconnect, the backup completes, nothing is lost', async () => {
    const since = Date.now();
    // What we ship (k8s/base/redis.conf, docker-compose.yml): AOF fsynced once a second. A killed
    // process still loses no acknowledged write: Redis write()s the AOF before it replies.
    expect(await stack.redis.config('GET', 'appendfsync')).toEqual(['appendfsync', 'everysec']);
    const res = await fetch(`http://127.0.0.1:${api.port}/v1/backups`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'redis-restart', spec: { includedNamespaces: ['shop'] } }),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    // Mid-backup: some PVBs copying, more still to come (one copy per node at a time).
    await waitFor(
      'PVBs in progress',
      async () => ((await pvbsOf(stack, 'redis-restart')).some((p) => p.status?.phase === 'InProgress') ? true : undefined),
      90_000,
    );
    await stack.redisServer.kill(true);
    await new Promise((r) => setTimeout(r, 3_000));
    // While Redis is down the api says so instead of hanging.
    const down = await fetch(`http://127.0.0.1:${api.port}/readyz`);
    expect(down.status).toBe(503);
    await stack.redisServer.start();

    const rec = await waitForBackupEnd(stack.state, 'redis-restart', 150_000);
    expect(rec.phase).toBe('Completed');
    const facts = await backupFacts(stack, 'redis-restart');
    expect(facts.totalItems).toBeGreaterThanOrEqual(PODS + 40);
    expect(facts.itemsBackedUp).toBe(facts.totalItems);
    expect(facts.tarballItems).toBe(facts.totalItems);
    expect(facts.pvbs).toBe(PODS);
    expect(facts.pvbsCompleted).toBe(PODS);
    const counters = await stack.state.counters('redis-restart');
    expect(counters.pvbsCompleted).toBe(PODS);
    expect(facts.hooksAttempted).toBe(PODS * 2);
    expect(facts.hooksFailed).toBe(0);
    for (let i = 0; i < PODS; i++) expect(execsOf(stack, 'shop', `db-${i}`, UNFREEZE, since).length).toBeGreaterThanOrEqual(1);
    // Both processes are still the ones started before the restart, and ready again.
    expect(api.child.exitCode).toBeNull();
    expect(worker.child.exitCode).toBeNull();
    for (const p of [api, worker]) {
      await waitFor(`${p.name} ready again`, async () =>
        (await fetch(`http://127.0.0.1:${p.port}/readyz`).then((r) => r.status)) === 200 ? true : undefined,
      );
    }
    const view = await fetch(`http://127.0.0.1:${api.port}/v1/backups/redis-restart`, {
      headers: { authorization: `Bearer ${stack.token}` },
    });
    expect(view.status).toBe(200);
    expect(((await view.json()) as { phase: string }).phase).toBe('Completed');
    recordRun('redis-restart', { faults: 1, backups: 1, completed: 1, itemsLost: facts.totalItems - facts.itemsBackedUp });
  }, 300_000);
});
