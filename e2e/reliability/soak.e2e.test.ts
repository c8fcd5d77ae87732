/*
 * Soak: 50 backups submitted at once against a generated 2,000-pod cluster (20 namespaces × 100
 * pods, one PVC-backed volume each, zero bytes). Scaled to this 2-core machine: each backup takes
 * one namespace (100 pods), and every fifth one backs up its volumes (10 × 100 = 1,000 PVBs);
 * the 50 together cover the cluster 2.5 times. All must reach a terminal phase; Redis memory must
 * stay bounded (item manifests dropped, finished jobs removed by policy, state kept); the api and
 * worker processes must not leak file descriptors or listeners.
 */
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateCluster } from '../../packages/kube-sim/src/index.js';
import { createLogger } from '../../packages/platform/src/index.js';
import { createQueue, DEFAULT_JOB_OPTIONS, JobName, KEEP_FINISHED_JOBS, QUEUE_NAMES } from '../../packages/queue/src/index.js';
import { type NodeAgent, startNodeAgent } from '../../services/node-agent/src/index.js';
import { recordRun } from './support/run-figures.js';
import { type ServiceProcess, type Stack, startStack, waitFor } from './support/stack.js';

const NAMESPACES = 20;
const PODS_PER_NAMESPACE = 100;
const NODE_COUNT = 10;
const BACKUPS = 50;
const ENDED = new Set(['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled']);

let stack: Stack;
let api: ServiceProcess;
let worker: ServiceProcess;
const agents: NodeAgent[] = [];
const warningsHere: string[] = [];
const onWarning = (w: Error) => warningsHere.push(`${w.name}: ${w.message}`);

const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await stack.redis.info('memory'))?.[1] ?? Number.NaN);

async function submit(name: string, ns: string, fsBackup: boolean) {
  // A plain request without keep-alive: pooled idle client connections would otherwise sit in
  // the api's fd table until its keep-alive timeout and read as a leak.
  const body = JSON.stringify({ name, spec: { includedNamespaces: [ns], defaultVolumesToFsBackup: fsBackup } });
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: api.port,
        path: '/v1/backups',
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          data += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: data }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
  if (status !== 201) throw new Error(`POST ${name}: ${status} ${text}`);
}

async function waitAllEnded(names: string[], timeoutMs: number) {
  return waitFor(
    `${names.length} backups to end`,
    async () => {
      const recs = await Promise.all(names.map((n) => stack.state.getBackup(n)));
      // Ended and archived: finalize records the phase first and drops the in-flight state (item
      // manifests included) only after the archive is written, so a phase alone is not the end.
      return recs.every((r) => r && ENDED.has(r.phase) && r.archivedAt !== undefined) ? recs.map((r) => r!) : undefined;
    },
    timeoutMs,
    1_000,
  );
}

beforeAll(async () => {
  process.on('warning', onWarning);
  const fixture = generateCluster({
    namespaces: NAMESPACES,
    podsPerNamespace: PODS_PER_NAMESPACE,
    volumesPerPod: 1,
    bytesPerVolume: 0,
    nodes: NODE_COUNT,
  });
  stack = await startStack({ fixture, materializeVolumes: 'all', withCrd: false });
  const logger = createLogger({ level: 'error', name: 'soak-agents' });
  for (let i = 0; i < NODE_COUNT; i++) {
    const nodeName = `node-${i}`;
    agents.push(
      await startNodeAgent({
        nodeName,
        kube: stack.kube,
        namespace: 'stowage',
        repoDir: join(stack.storageDir, 'repository'),
        repoKey: stack.repoKey,
        kubeletRoot: join(stack.sim.dataRoot, nodeName),
        loadConcurrency: { globalConfig: 4 },
        logger,
      }),
    );
    await stack.agents.registerNodeAgent(nodeName, 60 * 60_000);
  }
  const tuning = { STOWAGE_BLOCK_CONCURRENCY: '8', STOWAGE_HOOK_CONCURRENCY: '8', STOWAGE_WATCH_CONCURRENCY: '100' };
  [api, worker] = await Promise.all([stack.spawn('api', 'api', tuning), stack.spawn('worker', 'worker', tuning)]);
}, 240_000);

afterAll(async () => {
  process.off('warning', onWarning);
  await Promise.allSettled(agents.map((a) => a.stop()));
  await stack?.close();
});

describe('soak', () => {
  it('50 backups at once on a 2,000-pod cluster: all end, Redis bounded, no fd or listener leak', async () => {
    // Warm-up: one backup, so lazily opened connections and caches count in the baseline.
    await submit('soak-warmup', 'bench-0', true);
    await waitAllEnded(['soak-warmup'], 180_000);
    const fdBefore = { api: await api.fdCount(), worker: await worker.fdCount() };
    const memBefore = await usedMemory();
    const simBefore = stack.sim.requests().watches.active;

    const names = Array.from({ length: BACKUPS }, (_, i) => `soak-${i}`);
    const startedAt = Date.now();
    await Promise.all(names.map((name, i) => submit(name, `bench-${i % NAMESPACES}`, i % 5 === 0)));
    const recs = await waitAllEnded(names, 600_000);
    const elapsedMs = Date.now() - startedAt;

    const phases: Record<string, number> = {};
    for (const r of recs) phases[r.phase] = (phases[r.phase] ?? 0) + 1;
    expect(phases).toEqual({ Completed: BACKUPS });
    let itemsLost = 0;
    let pvbsCompleted = 0;
    for (const name of names) {
      const c = await stack.state.counters(name);
      itemsLost += (c.totalItems ?? 0) - (c.itemsBackedUp ?? 0);
      pvbsCompleted += c.pvbsCompleted ?? 0;
      expect(c.totalItems ?? 0).toBeGreaterThanOrEqual(PODS_PER_NAMESPACE * 3);
    }
    expect(itemsLost).toBe(0);
    expect(pvbsCompleted).toBe((BACKUPS / 5) * PODS_PER_NAMESPACE);

    // Redis: item manifests are gone after finalize, finished jobs stay under the removal policy,
    // state is kept (every backup still readable), and growth per backup is small and bounded.
    const memAfter = await usedMemory();
    const perBackupBytes = Math.max(0, memAfter - memBefore) / BACKUPS;
    expect(perBackupBytes).toBeLessThan(2 * 1024 * 1024);
    const itemKeys = await stack.redis.keys('*:bk:*:items');
    expect(itemKeys).toHaveLength(0);
    for (const queueName of QUEUE_NAMES) {
      const q = createQueue(queueName, { connection: stack.redis, prefix: stack.queuePrefix });
      try {
        const counts = await q.getJobCounts('completed', 'failed', 'active', 'waiting', 'delayed', 'waiting-children');
        // The per-block queues' jobs leave it to the workers (KEEP_FINISHED_JOBS).
        const cap = ((DEFAULT_JOB_OPTIONS[queueName].removeOnComplete ?? KEEP_FINISHED_JOBS.removeOnComplete) as { count: number }).count;
        // Each backup keeps one delayed job: its TTL expiry. Nothing else may be left parked.
        const parked = (await q.getDelayed()).filter((job) => job.name !== JobName.deleteBackup);
        expect(
          parked.map((job) => job.id),
          queueName,
        ).toEqual([]);
        expect(counts.completed, queueName).toBeLessThanOrEqual(cap);
        expect({
          queue: queueName,
          failed: counts.failed,
          active: counts.active,
          waiting: counts.waiting,
        }).toEqual({
          queue: queueName,
          failed: 0,
          active: 0,
          waiting: 0,
        });
      } finally {
        await q.close();
      }
    }
    for (const name of names) expect((await stack.state.getBackup(name))?.phase).toBe('Completed');

    // No leak: the processes hold about as many fds as after the warm-up; no listener warnings.
    const fdAfter = { api: await api.fdCount(), worker: await worker.fdCount() };
    expect(fdAfter.api).toBeLessThanOrEqual(fdBefore.api + 10);
    expect(fdAfter.worker).toBeLessThanOrEqual(fdBefore.worker + 10);
    const processWarnings = [...api.output, ...worker.output].join('').match(/MaxListenersExceededWarning[^\n]*/g) ?? [];
    expect(processWarnings).toEqual([]);
    expect(warningsHere.filter((w) => w.includes('MaxListeners'))).toEqual([]);
    // Watches on the simulator do not pile up either.
    expect(stack.sim.requests().watches.active).toBeLessThanOrEqual(simBefore + 2);

    recordRun('soak', {
      faults: 0,
      backups: BACKUPS,
      completed: phases.Completed ?? 0,
      itemsLost,
      pvbsCompleted,
      elapsedS: Math.round(elapsedMs / 1000),
      redisUsedMemoryBeforeMiB: Math.round((memBefore / 1048576) * 10) / 10,
      redisUsedMemoryAfterMiB: Math.round((memAfter / 1048576) * 10) / 10,
      redisBytesPerBackup: Math.round(perBackupBytes),
      fdApi: `${fdBefore.api}→${fdAfter.api}`,
      fdWorker: `${fdBefore.worker}→${fdAfter.worker}`,
    });
  }, 900_000);
});
