/*
 * Hostile input to the workers and agents (hostile input to the API is covered by
 * services/api/test/hostile-input.int.test.ts and auth-and-ops.int.test.ts):
 * - a raw job whose payload fails its schema, on every queue, is failed at once as unrecoverable
 *   with a reason naming the problem — no retry storm even with attempts to spare;
 * - a PVB whose volume directory is missing fails with a message (the post hook still runs, the
 *   backup says PartiallyFailed);
 * - a pod referencing a missing PVC gets a recorded warning, not a crash.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../packages/platform/src/index.js';
import { createQueue, JobName, QueueName } from '../../packages/queue/src/index.js';
import { type NodeAgent, startNodeAgent } from '../../services/node-agent/src/index.js';
import { backupFacts, execsOf, namespace, node, pod, pvbsOf, UNFREEZE } from './support/fixtures.js';
import { recordRun } from './support/run-figures.js';
import { finishedBackup, type ServiceProcess, type Stack, startStack, waitFor, waitForBackupEnd } from './support/stack.js';

const fixture = {
  objects: [
    namespace('hostile'),
    namespace('stowage'),
    node('node-a'),
    pod({ name: 'healthy-0', namespace: 'hostile', node: 'node-a', volumes: [{ name: 'data', mib: 1 }], post: UNFREEZE }),
    pod({ name: 'ghost-0', namespace: 'hostile', node: 'node-a', volumes: [{ name: 'data', mib: 1 }], post: UNFREEZE }),
    pod({
      name: 'orphan-0',
      namespace: 'hostile',
      node: 'node-a',
      otherVolumes: [{ name: 'claim', persistentVolumeClaim: { claimName: 'no-such-claim' } }],
      post: UNFREEZE,
    }),
  ],
};

let stack: Stack;
let agent: NodeAgent;
let api: ServiceProcess;
let worker: ServiceProcess;

beforeAll(async () => {
  stack = await startStack({ fixture });
  agent = await startNodeAgent({
    nodeName: 'node-a',
    kube: stack.kube,
    namespace: 'stowage',
    repoDir: join(stack.storageDir, 'repository'),
    repoKey: stack.repoKey,
    kubeletRoot: join(stack.sim.dataRoot, 'node-a'),
    loadConcurrency: { globalConfig: 2 },
    logger: createLogger({ level: 'warn', name: 'reliability-agent' }),
  });
  await stack.agents.registerNodeAgent('node-a', 30 * 60_000);
  [api, worker] = await Promise.all([stack.spawn('api', 'api'), stack.spawn('worker', 'worker')]);
}, 180_000);

afterAll(async () => {
  await agent?.stop();
  await stack?.close();
});

describe('hostile input to workers and agents', () => {
  it('a payload that fails its schema is failed once, unrecoverable, with a clear reason, on every queue', async () => {
    const cases = [
      { queue: QueueName.itemBlocks, name: JobName.backupItemBlock },
      { queue: QueueName.pvbWatch, name: JobName.watchPvb },
      { queue: QueueName.hooks, name: JobName.runPostHooks },
      { queue: QueueName.backups, name: JobName.plan },
      { queue: QueueName.backups, name: JobName.finalize },
    ];
    const queues = new Map(cases.map((c) => [c.queue, createQueue(c.queue, { connection: stack.redis, prefix: stack.queuePrefix })]));
    try {
      const added: Array<{ queue: string; id: string }> = [];
      for (const [i, c] of cases.entries()) {
        const q = queues.get(c.queue)!;
        // Five attempts with a short backoff on offer: a retryable failure would use them all.
        const job = await q.add(
          c.name,
          { backupName: 42, blockId: ['x'], junk: '<script>' },
          {
            jobId: `hostile-${i}-${c.name}`,
            attempts: 5,
            backoff: { type: 'fixed', delay: 100 },
          },
        );
        added.push({ queue: c.queue, id: job.id! });
      }
      for (const { queue, id } of added) {
        const q = queues.get(queue as (typeof cases)[number]['queue'])!;
        // The state first, then the job: a job read before its move to failed has no failedReason
        // (the move writes both at once, so a read after it sees both).
        const failed = await waitFor(`${queue}/${id} to fail`, async () =>
          (await q.getJobState(id)) === 'failed' ? await q.getJob(id) : undefined,
        );
        // Picked up once and failed for good (BullMQ 6.7 leaves attemptsMade at 0 on an unrecoverable failure).
        expect(failed.attemptsStarted, `${queue}/${id} started`).toBe(1);
        expect(failed.attemptsMade, `${queue}/${id} attempts`).toBeLessThanOrEqual(1);
        expect(failed.failedReason).toMatch(/QUEUE_BAD_PAYLOAD|invalid|payload/i);
        expect(failed.failedReason).toMatch(/backupName/);
      }
      // No retry storm: a second later nothing went back to wait or delayed.
      await new Promise((r) => setTimeout(r, 1_000));
      for (const { queue, id } of added) {
        const job = await queues.get(queue as (typeof cases)[number]['queue'])!.getJob(id);
        expect(await job?.getState()).toBe('failed');
        expect(job?.attemptsStarted).toBe(1);
      }
      // The processes are still up and ready.
      for (const p of [api, worker]) expect((await fetch(`http://127.0.0.1:${p.port}/readyz`)).status).toBe(200);
      recordRun('hostile-input/bad-payloads', { faults: added.length, backups: 0, completed: 0, itemsLost: 0, attemptsPerJob: 1 });
    } finally {
      await Promise.all([...queues.values()].map((q) => q.close()));
    }
  }, 120_000);

  it('a missing volume directory fails its PVB with a message; a missing PVC is a warning; nothing crashes', async () => {
    const ghostDir = stack.sim.podVolumes('hostile', 'ghost-0').find((v) => v.volume === 'data')?.path;
    expect(ghostDir).toBeDefined();
    await rm(ghostDir!, { recursive: true, force: true });
    const since = Date.now();
    const res = await fetch(`http://127.0.0.1:${api.port}/v1/backups`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'hostile-volumes', spec: { includedNamespaces: ['hostile'] } }),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    const rec = await waitForBackupEnd(stack.state, 'hostile-volumes', 120_000);

    const pvbs = await pvbsOf(stack, 'hostile-volumes');
    const ghost = pvbs.find((p) => p.spec.pod.name === 'ghost-0');
    expect(ghost?.status?.phase).toBe('Failed');
    expect(ghost?.status?.message).toMatch(/director|not found|does not exist|ENOENT/i);
    expect(pvbs.find((p) => p.spec.pod.name === 'healthy-0')?.status?.phase).toBe('Completed');
    // The backup tells the truth, and every pod's post hook ran (the failed PVB is terminal too).
    expect(rec.phase).toBe('PartiallyFailed');
    for (const podName of ['healthy-0', 'ghost-0', 'orphan-0']) expect(execsOf(stack, 'hostile', podName, UNFREEZE, since)).toHaveLength(1);
    // The missing claim: a warning naming it, in the backup's logs.
    const counters = await stack.state.counters('hostile-volumes');
    expect(counters.warnings ?? 0).toBeGreaterThanOrEqual(1);
    const { logs } = await finishedBackup(stack, 'hostile-volumes');
    expect(logs.some((l) => l.level === 'warn' && /no-such-claim/.test(l.msg))).toBe(true);
    const viaApi = await fetch(`http://127.0.0.1:${api.port}/v1/backups/hostile-volumes/logs`, {
      headers: { authorization: `Bearer ${stack.token}` },
    });
    expect(viaApi.status).toBe(200);
    expect(await viaApi.text()).toMatch(/no-such-claim/);
    const facts = await backupFacts(stack, 'hostile-volumes');
    expect(facts.itemsBackedUp).toBe(facts.totalItems);
    for (const p of [api, worker]) expect(p.child.exitCode).toBeNull();
    recordRun('hostile-input/volumes', {
      faults: 2,
      backups: 1,
      completed: 0,
      partiallyFailed: 1,
      itemsLost: facts.totalItems - facts.itemsBackedUp,
    });
  }, 180_000);
});
