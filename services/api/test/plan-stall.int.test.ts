/*
 * The largest spec the api accepts, planned (and dry-run) by the real api process against a
 * generated cluster, while /readyz is probed every 100 ms: every probe answers and the api's
 * longest event-loop stall (perf_hooks monitorEventLoopDelay, read from the api's own /metrics
 * as `nodejs_eventloop_lag_max_seconds`) stays under a second. Then a cancel mid-plan ends the
 * plan: a backup-level pre hook is held in its pod, the backup is canceled, and the plan stops
 * there (no further hook runs, no block is planned). The backup-level hooks run in a backup
 * worker (the api may not exec): this process hosts the hooks queue, as the worker service does.
 *
 * The stall bound is a correctness property (a stalled api fails its probes and its locks), not
 * a speed measure: the margin is wide for a loaded machine.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_SPEC_LIMITS } from '@stowage/core';
import { generateCluster, type Simulator, startSimulator } from '@stowage/kube-sim';
import { BackupState, NodeAgentRegistry, statePrefixFor } from '@stowage/pipeline';
import { type ServiceProcess, uniquePrefix, useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnApi } from './api-process.js';
import { startHooksQueueWorkers } from './hooks-queue-workers.js';
import { openSse } from './sse-client.js';

const TOKEN = 'stall-token-0123456789abcdef';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const NAMESPACES = 40;
const PODS_PER_NAMESPACE = 50;
/** The body limit of every write route (app.ts): the largest spec must fit in it. */
const BODY_LIMIT = 1024 * 1024;

let redis: { url: string; stop: () => Promise<void> };
let sim: Simulator;
let storageDir: string;
let probe: Redis;
let state: BackupState;
let api: ServiceProcess | undefined;
let hookWorkers: { close: () => Promise<void> } | undefined;
let base: string;

const apiOutput = () => api?.output.join('') ?? '';

async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}; api output:\n${apiOutput().slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * A backup spec at every bound the api holds a spec to (namespaces, resources, selectors, hook
 * sets, hooks per list and in all), as large as the body limit allows. Its lists name the cluster's
 * namespaces among many that do not exist, so each list is scanned in full for every item.
 */
function largestSpec(name: string): Record<string, unknown> {
  const L = DEFAULT_SPEC_LIMITS;
  const real = Array.from({ length: NAMESPACES }, (_, i) => `bench-${i}`);
  const fill = (prefix: string, n: number, keep: string[] = []) => [
    ...keep,
    ...Array.from({ length: n - keep.length }, (_, i) => `${prefix}-${i}`),
  ];
  const terms = (tag: string) =>
    Object.fromEntries(Array.from({ length: L.labelSelectorTerms }, (_, i) => [`t${i}.example.com/${tag}`, 'x']));
  const hookSets = Array.from({ length: L.hookSets }, (_, i) => {
    const hooks = (phase: string, n: number) =>
      Array.from({ length: n }, (_, j) => ({
        exec: { command: ['/bin/true', `${phase}-${i}-${j}`], onError: 'Continue', timeout: '30s' },
      }));
    // 450 hooks across the sets: 50 sets of 5 and 50 of 4 (each list within hooksPerList).
    const perSet = i < 50 ? 5 : 4;
    return {
      name: `set-${i}`,
      includedNamespaces: fill(`hook-ns-${i}`, 360, [real[i % NAMESPACES] as string]),
      includedResources: ['pods'],
      labelSelector: { matchLabels: { 'stowage.dev/bench': 'true' } },
      pre: hooks('pre', perSet - 2),
      post: hooks('post', 2),
    };
  });
  const levelHooks = (phase: string) =>
    Array.from({ length: 25 }, (_, i) => ({
      name: `${phase}-${i}`,
      namespace: 'bench-0',
      labelSelector: { matchLabels: { app: 'app-0' } },
      mode: 'one',
      command: ['/bin/true', `${phase}-${i}`],
      onError: 'Continue',
      timeout: '30s',
    }));
  return {
    name,
    spec: {
      includedNamespaces: fill('absent-ns', L.namespaces, real),
      excludedNamespaces: fill('other-ns', L.namespaces),
      includedResources: fill('things', L.resources, ['pods', 'persistentvolumeclaims', 'persistentvolumes', 'namespaces']).map((r) =>
        r.startsWith('things-') ? `${r}.example.com` : r,
      ),
      orLabelSelectors: [
        { matchLabels: { 'stowage.dev/bench': 'true' } },
        ...Array.from({ length: L.orLabelSelectors - 1 }, (_, i) => ({ matchLabels: terms(`s${i}`) })),
      ],
      defaultVolumesToFsBackup: true,
      hooks: { resources: hookSets, backup: { pre: levelHooks('pre'), post: levelHooks('post') } },
    },
  };
}

/** The api's longest event-loop delay since the last scrape (prom-client's monitorEventLoopDelay histogram). */
async function maxEventLoopDelayS(): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => /^stowage_api_nodejs_eventloop_lag_max_seconds\b/.test(l));
  if (!line) throw new Error(`no event-loop lag in /metrics:\n${text.slice(0, 2000)}`);
  return Number(line.split(' ').pop());
}

/** /readyz every 100 ms until stopped: each probe's status (or error), never more than one in flight. */
function probeReadiness(): { stop: () => Promise<Array<number | string>> } {
  const results: Array<number | string> = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = Date.now();
      results.push(
        await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(30_000) }).then(
          (r) => r.status,
          (err: Error) => err.message,
        ),
      );
      await new Promise((r) => setTimeout(r, Math.max(0, 100 - (Date.now() - started))));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return results;
    },
  };
}

beforeAll(async () => {
  redis = await useTestRedis();
  sim = await startSimulator({
    fixture: generateCluster({
      namespaces: NAMESPACES,
      podsPerNamespace: PODS_PER_NAMESPACE,
      volumesPerPod: 1,
      bytesPerVolume: 0,
      nodes: 3,
    }),
    port: 0,
    materializeVolumes: 'none',
  });
  storageDir = await mkdtemp(join(tmpdir(), 'stowage-plan-stall-'));
  const prefix = uniquePrefix();
  probe = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  state = new BackupState({ redis: probe, prefix: statePrefixFor(prefix) });
  const agents = new NodeAgentRegistry({ redis: probe, prefix: statePrefixFor(prefix) });
  for (const node of ['node-0', 'node-1', 'node-2']) await agents.registerNodeAgent(node, 30 * 60_000);
  // The backup-level hooks' jobs (queue hooks), as the worker service runs them.
  hookWorkers = startHooksQueueWorkers({ redisUrl: redis.url, prefix, kubeconfigPath: sim.kubeconfigPath, storageDir });
  api = await spawnApi({
    redisUrl: redis.url,
    kubeconfigPath: sim.kubeconfigPath,
    storageDir,
    token: TOKEN,
    queuePrefix: prefix,
  });
  base = `http://127.0.0.1:${api.port}`;
}, 150_000);

afterAll(async () => {
  await api?.stop();
  await hookWorkers?.close();
  probe?.disconnect();
  await sim?.close();
  await redis?.stop();
  if (storageDir) await rm(storageDir, { recursive: true, force: true });
});

describe('the largest accepted spec never stalls the api', () => {
  it('a dry run and a plan of it: every /readyz probe answers, the longest stall is under a second', async () => {
    const body = JSON.stringify(largestSpec('largest'));
    expect(body.length).toBeLessThanOrEqual(BODY_LIMIT);

    await maxEventLoopDelayS(); // starts the measured window
    const probes = probeReadiness();
    const dry = await fetch(`${base}/v1/backups?dryRun=true`, { method: 'POST', headers, body });
    const dryText = await dry.text();
    expect(dry.status, dryText.slice(0, 2000)).toBe(200);
    const plan = JSON.parse(dryText) as { summary: { pods: number; preHooks: number } };
    expect(plan.summary.pods).toBe(NAMESPACES * PODS_PER_NAMESPACE);
    expect(plan.summary.preHooks).toBeGreaterThan(0);
    const dryStallS = await maxEventLoopDelayS();
    console.log(`dry run: longest api event-loop stall ${(dryStallS * 1000).toFixed(0)} ms`);

    const created = await fetch(`${base}/v1/backups`, { method: 'POST', headers, body });
    expect(created.status, await created.clone().text()).toBe(201);
    await waitFor(
      'the plan to complete',
      async () => {
        const rec = await state.getBackup('largest');
        if (rec?.phase === 'FailedValidation' || rec?.phase === 'Failed') throw new Error(`backup ${rec.phase}: ${rec.failureReason}`);
        return rec?.planCompletedAt !== undefined ? rec : undefined;
      },
      300_000,
    );
    const planStallS = await maxEventLoopDelayS();
    const results = await probes.stop();

    console.log(
      `largest spec (${(body.length / 1024).toFixed(0)} KiB, ${NAMESPACES * PODS_PER_NAMESPACE} pods): longest api event-loop stall ` +
        `dry run ${(dryStallS * 1000).toFixed(0)} ms, plan ${(planStallS * 1000).toFixed(0)} ms; ${results.length} /readyz probes`,
    );
    expect(results.length).toBeGreaterThan(0);
    expect(results.filter((r) => r !== 200)).toEqual([]);
    expect(dryStallS).toBeLessThan(1);
    expect(planStallS).toBeLessThan(1);
  }, 420_000);

  it('a cancel mid-plan ends the plan: the held backup pre hook is the last to run and no block is planned', async () => {
    // The first backup-level pre hook is held in its pod until the test lets it go.
    sim.setExecBehaviour('bench-0', 'app-0', { '*': { rules: [{ command: ['/bin/true', 'pre-0'], hold: true }] } });
    // The first test's backup ran its hooks in the same pod: only the execs after these count.
    const before = Math.max(0, ...sim.execLog().map((e) => e.id));
    const created = await fetch(`${base}/v1/backups`, { method: 'POST', headers, body: JSON.stringify(largestSpec('canceled-mid-plan')) });
    expect(created.status, await created.clone().text()).toBe(201);
    const preExecs = () =>
      sim.execLog({ namespace: 'bench-0', pod: 'app-0' }).filter((e) => e.id > before && e.command[1]?.startsWith('pre-'));
    await waitFor('the first backup pre hook to run', async () => (preExecs().length > 0 ? true : undefined), 120_000);

    const cancel = await fetch(`${base}/v1/backups/canceled-mid-plan/cancel`, {
      method: 'POST',
      headers: { authorization: headers.authorization },
    });
    expect(cancel.status).toBe(202);
    sim.releaseExecs('bench-0', 'app-0');
    const ended = await waitFor(
      'the canceled backup to end',
      async () => {
        const rec = await state.getBackup('canceled-mid-plan');
        return rec && ['Canceled', 'Completed', 'PartiallyFailed', 'Failed'].includes(rec.phase) ? rec : undefined;
      },
      120_000,
    );
    expect(ended.phase).toBe('Canceled');
    expect(ended.planCompletedAt).toBeUndefined();
    // Of the 25 backup pre hooks only the held one ran; nothing was planned after the cancel.
    expect(preExecs().map((e) => e.command[1])).toEqual(['pre-0']);
    const counters = await state.counters('canceled-mid-plan');
    expect(counters.blocksPlanned ?? 0).toBe(0);
    // Through the API: an ended backup's events move from Redis to storage once it is archived.
    const events = openSse(`${base}/v1/backups/canceled-mid-plan/events`, { authorization: headers.authorization });
    await events.ended;
    expect(events.messages.map((m) => m.event)).toContain('plan.canceled');
    expect(events.messages.map((m) => m.event)).not.toContain('plan.progress');
  }, 300_000);
});
