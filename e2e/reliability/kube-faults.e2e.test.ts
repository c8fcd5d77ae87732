/*
 * Kubernetes API faults from the simulator while whole backups run through the api and worker
 * processes and two node agents: 20 % of answers 429/500/503 (Retry-After: 1 on 429), 100 ms
 * latency on every request, watches dropped every 3 s. Then PVB watches refused outright: the
 * pvb-watch jobs must complete by polling. The node agents run in this process with a kube client
 * whose sleeps are recorded, so the test sees the backoff and Retry-After being honoured.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKubeClients, type KubeClients } from '../../packages/kube/src/index.js';
import { createLogger } from '../../packages/platform/src/index.js';
import type { NodeAgent } from '../../services/node-agent/src/index.js';
import { backupFacts, execsOf, shopOfDatabases, UNFREEZE } from './support/fixtures.js';
import { recordRun } from './support/run-figures.js';
import { finishedBackup, type ServiceProcess, type Stack, startAgents, startStack, waitFor, waitForBackupEnd } from './support/stack.js';

const NODES = ['node-a', 'node-b'];
const PODS = 6;
const fixture = shopOfDatabases({ nodes: NODES, pods: PODS, mib: 1, configMaps: 30 });

let stack: Stack;
let api: ServiceProcess;
const agents: NodeAgent[] = [];
const agentSleeps: number[] = [];
let agentKube: KubeClients;

beforeAll(async () => {
  stack = await startStack({ fixture });
  const logger = createLogger({ level: 'warn', name: 'reliability-agents' });
  agentKube = createKubeClients({
    kubeconfigPath: stack.kubeconfigOf('node-agent'),
    retryDeps: {
      sleep: (ms) => {
        agentSleeps.push(ms);
        return new Promise((resolve) => setTimeout(resolve, ms));
      },
    },
  });
  agents.push(
    ...(await startAgents(stack, NODES, { kube: agentKube, loadConcurrency: { globalConfig: 2 }, progressIntervalMs: 250, logger })),
  );
  [api] = await Promise.all([stack.spawn('api', 'api'), stack.spawn('worker', 'worker')]);
}, 180_000);

afterAll(async () => {
  stack?.sim.clearFaults();
  await Promise.allSettled(agents.map((a) => a.stop()));
  await stack?.close();
});

const submit = async (name: string) => {
  // The API's own Kubernetes calls are not on this path; Redis is healthy: one POST suffices.
  const res = await fetch(`http://127.0.0.1:${api.port}/v1/backups`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name, spec: { includedNamespaces: ['shop'] } }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
};

async function expectWhole(name: string, since: number) {
  const rec = await waitForBackupEnd(stack.state, name, 180_000);
  const facts = await backupFacts(stack, name);
  // The recorded errors travel with the assertion so a failure says what went wrong.
  const errors = (await finishedBackup(stack, name)).logs.filter((l) => l.level === 'error').map((l) => l.msg);
  expect({ phase: rec.phase, errors }).toEqual({ phase: 'Completed', errors: [] });
  expect(facts.totalItems).toBeGreaterThanOrEqual(PODS + 30);
  expect(facts.itemsBackedUp).toBe(facts.totalItems);
  expect(facts.tarballItems).toBe(facts.totalItems);
  expect(facts.pvbs).toBe(PODS);
  expect(facts.pvbsCompleted).toBe(PODS);
  expect(facts.hooksAttempted).toBe(PODS * 2);
  expect(facts.hooksFailed).toBe(0);
  for (let i = 0; i < PODS; i++) {
    const posts = execsOf(stack, 'shop', `db-${i}`, UNFREEZE, since);
    expect(posts.length).toBeGreaterThanOrEqual(1);
    expect(posts.at(-1)?.exitCode).toBe(0);
  }
  return facts;
}

describe('Kubernetes API faults', () => {
  it('20 % 429/500/503, 100 ms latency, watches dropped every 3 s: the backup completes whole', async () => {
    stack.sim.resetRequests();
    agentSleeps.length = 0;
    stack.sim.setFaults({ latencyMs: 100, errorRate: 0.2, statuses: [429, 500, 503], retryAfterSeconds: 1, dropWatchesEveryMs: 3_000 });
    const since = Date.now();
    try {
      // The backup starts once the first round of dropped watches has been reopened, so the
      // whole backup runs under faults however quickly it finishes.
      await waitFor('a dropped watch to be reopened', () => (stack.sim.requests().watches.opened > 0 ? true : undefined), 30_000);
      await submit('kube-faults');
      const facts = await expectWhole('kube-faults', since);
      const counts = stack.sim.requests();
      const faulted = Object.values(counts.faulted).reduce((a, b) => a + b, 0);
      expect(counts.faulted['429'] ?? 0).toBeGreaterThan(0);
      expect(counts.faulted['500'] ?? 0).toBeGreaterThan(0);
      expect(counts.faulted['503'] ?? 0).toBeGreaterThan(0);
      // Watches were dropped and reopened (every open watch is cut every 3 s).
      expect(counts.watches.opened).toBeGreaterThan(0);
      // The agents' client retried: with jittered backoff (varied waits) and Retry-After (1000 ms) on 429.
      expect(agentKube.retryStats.retries).toBeGreaterThan(0);
      expect(agentKube.retryStats.exhausted).toBe(0);
      const computed = agentSleeps.filter((ms) => ms !== 1_000);
      if ((agentKube.retryStats.retriesByReason['status-429'] ?? 0) > 0) expect(agentSleeps).toContain(1_000);
      if (computed.length >= 3) expect(new Set(computed).size).toBeGreaterThan(1);
      recordRun('kube-faults/mixed', {
        faults: faulted,
        backups: 1,
        completed: 1,
        itemsLost: facts.totalItems - facts.itemsBackedUp,
        requests: counts.total,
        watchesOpened: counts.watches.opened,
        agentRetries: agentKube.retryStats.retries,
      });
    } finally {
      stack.sim.clearFaults();
    }
  }, 300_000);

  it('every PVB watch refused: pvb-watch jobs complete by polling (GETs), the post hooks still follow', async () => {
    stack.sim.resetRequests();
    // Only the PVB watches fail: open ones are cut every second and every new one is refused, so
    // the workers' informers deliver no events and promote nothing.
    stack.sim.setFaults({
      errorRate: 1,
      statuses: [503],
      dropWatchesEveryMs: 1_000,
      appliesTo: { resources: ['podvolumebackups.stowage.dev'], verbs: ['watch'] },
    });
    const since = Date.now();
    try {
      // Only once a PVB watch has been refused are the informers really blind.
      await waitFor('a refused PVB watch', () => ((stack.sim.requests().faulted['503'] ?? 0) > 0 ? true : undefined), 30_000);
      await submit('kube-no-watch');
      const facts = await expectWhole('kube-no-watch', since);
      const counts = stack.sim.requests();
      expect(counts.faulted['503'] ?? 0, JSON.stringify(counts)).toBeGreaterThan(0);
      // The watch jobs read the PVBs themselves.
      expect(counts.byResource['podvolumebackups.stowage.dev']?.get ?? 0).toBeGreaterThanOrEqual(PODS);
      recordRun('kube-faults/no-pvb-watch', {
        faults: counts.faulted['503'] ?? 0,
        backups: 1,
        completed: 1,
        itemsLost: facts.totalItems - facts.itemsBackedUp,
        pvbGets: counts.byResource['podvolumebackups.stowage.dev']?.get ?? 0,
      });
    } finally {
      stack.sim.clearFaults();
    }
  }, 300_000);
});
