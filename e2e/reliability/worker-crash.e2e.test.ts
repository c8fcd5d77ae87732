/*
 * A worker (or the api, which hosts finalize) SIGKILLed while each stage of the job graph runs:
 * the backup still ends Completed with every item and every PVB; no PVB is created twice; no post
 * hook starts before its block's PVBs are terminal; hook counters count once per hook key while
 * the simulator's exec log shows the at-least-once re-run of the hook that was cut off.
 *
 * One api process (hosting plan/finalize) and one worker process at a time; node agents run in
 * this process (they are not under test here) at ~1 MiB/s so volume copies last seconds.
 */
/** The promises every stage test checks once the backup has ended. */
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pvbLabels } from '../../packages/kube/src/index.js';
import { createLogger } from '../../packages/platform/src/index.js';
import type { NodeAgent } from '../../services/node-agent/src/index.js';
import { backupFacts, configMap, execsOf, FREEZE, namespace, node, pod, pvbsOf, UNFREEZE } from './support/fixtures.js';
import { recordRun } from './support/run-figures.js';
import { finishedBackup, type ServiceProcess, type Stack, startAgents, startStack, waitFor, waitForBackupEnd } from './support/stack.js';

const NODES = ['node-a', 'node-b'];
const BULK_CONFIGMAPS = 3_000;

const fixture = {
  objects: [
    namespace('shop'),
    namespace('bulk'),
    namespace('stowage'),
    ...NODES.map(node),
    pod({ name: 'db-0', node: 'node-a', volumes: [{ name: 'data', mib: 4 }], pre: FREEZE, post: UNFREEZE }),
    pod({ name: 'db-1', node: 'node-b', volumes: [{ name: 'data', mib: 4 }], pre: FREEZE, post: UNFREEZE }),
    pod({ name: 'web-0', node: 'node-a', volumes: [{ name: 'cache', mib: 1 }] }),
    ...Array.from({ length: 5 }, (_, i) => configMap(`settings-${i}`, 'shop')),
    // Enough items that assembling the tarball takes a moment, so finalize can be caught running.
    ...Array.from({ length: BULK_CONFIGMAPS }, (_, i) => configMap(`bulk-${i}`, 'bulk', 2_048)),
  ],
};
const FS_VOLUMES = 3; // db-0/data, db-1/data, web-0/cache
const HOOK_KEYS = 4; // pre and post of db-0 and db-1

let stack: Stack;
let api: ServiceProcess;
let worker: ServiceProcess;
const agents: NodeAgent[] = [];
let workerNo = 0;

const spawnWorker = () => stack.spawn('worker', `worker-${++workerNo}`);
const copiesStarted = () => agents.reduce((n, a) => n + a.metrics().copiesStarted, 0);

beforeAll(async () => {
  stack = await startStack({ fixture });
  const logger = createLogger({ level: 'warn', name: 'reliability-agents' });
  agents.push(
    ...(await startAgents(stack, NODES, {
      loadConcurrency: { globalConfig: 2 },
      bandwidthBytesPerSec: 1024 * 1024,
      progressIntervalMs: 250,
      logger,
    })),
  );
  [api, worker] = await Promise.all([stack.spawn('api', 'api-1'), spawnWorker()]);
}, 180_000);

afterAll(async () => {
  await Promise.allSettled(agents.map((a) => a.stop()));
  await stack?.close();
});

const submit = async (name: string, namespaces: string[]) => {
  const res = await fetch(`http://127.0.0.1:${api.port}/v1/backups`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name, spec: { includedNamespaces: namespaces } }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
};

/** The promises every stage test checks once the backup has ended. */
async function expectWholeBackup(name: string, since: number, copiesBefore: number, extraItems = 0) {
  const facts = await backupFacts(stack, name);
  expect(facts.phase).toBe('Completed');
  expect(facts.totalItems).toBeGreaterThanOrEqual(8 + extraItems);
  expect(facts.itemsBackedUp).toBe(facts.totalItems);
  expect(facts.tarballItems).toBe(facts.totalItems);
  // Every PVB, once: three names, three copies started by the agents (a second create is a 409).
  expect(facts.pvbs).toBe(FS_VOLUMES);
  expect(facts.pvbsCompleted).toBe(FS_VOLUMES);
  expect(copiesStarted() - copiesBefore).toBe(FS_VOLUMES);
  // Hook counters move once per hook key, whatever ran twice.
  expect(facts.hooksAttempted).toBe(HOOK_KEYS);
  expect(facts.hooksFailed).toBe(0);
  // No post hook before its block's PVBs are terminal.
  const pvbs = await pvbsOf(stack, name);
  for (const podName of ['db-0', 'db-1']) {
    const mine = pvbs.filter((p) => p.spec.pod.name === podName);
    expect(mine.length).toBe(1);
    const doneAt = Math.max(...mine.map((p) => Date.parse(p.status?.completionTimestamp ?? 'x')));
    expect(Number.isFinite(doneAt)).toBe(true);
    const posts = execsOf(stack, 'shop', podName, UNFREEZE, since);
    expect(posts.length).toBeGreaterThanOrEqual(1);
    for (const post of posts) expect(Date.parse(post.startedAt)).toBeGreaterThanOrEqual(doneAt);
    expect(posts.at(-1)?.exitCode).toBe(0);
  }
  // The REST view tells the same story.
  const view = (await (
    await fetch(`http://127.0.0.1:${api.port}/v1/backups/${name}`, { headers: { authorization: `Bearer ${stack.token}` } })
  ).json()) as { phase: string };
  expect(view.phase).toBe('Completed');
  return facts;
}

describe('a worker SIGKILLed mid-backup costs a retry, not the backup', () => {
  it('while item-block runs (pre hook in flight): pre hook re-runs (logged twice), counted once; backup whole', async () => {
    stack.sim.setExecBehaviour('shop', 'db-0', { '*': { rules: [{ command: FREEZE, exitCode: 0, durationMs: 5_000 }] } });
    const since = Date.now();
    const copiesBefore = copiesStarted();
    await submit('crash-item-block', ['shop']);
    await waitFor('db-0 pre hook to be running', () =>
      execsOf(stack, 'shop', 'db-0', FREEZE, since).some((e) => e.endedAt === null) ? true : undefined,
    );
    await worker.killHard();
    worker = await spawnWorker();
    const rec = await waitForBackupEnd(stack.state, 'crash-item-block', 120_000);
    expect(rec.phase).toBe('Completed');
    const facts = await expectWholeBackup('crash-item-block', since, copiesBefore);
    const freezes = execsOf(stack, 'shop', 'db-0', FREEZE, since);
    expect(freezes).toHaveLength(2);
    expect(freezes[0]).toMatchObject({ aborted: true, exitCode: null });
    expect(freezes[1]).toMatchObject({ aborted: false, exitCode: 0 });
    // The backup's own hook log shows both runs too: the cut-off one as interrupted.
    const runs = (await finishedBackup(stack, 'crash-item-block')).blocks
      .flatMap((b) => b.hookRuns)
      .filter((r) => r.podName === 'db-0' && r.phase === 'pre');
    expect(runs.map((r) => r.outcome)).toEqual(['interrupted', 'exited']);
    expect(runs[0]?.message).toContain('cut off before it finished');
    expect(runs[1]?.exitCode).toBe(0);
    stack.sim.setExecBehaviour('shop', 'db-0', undefined);
    recordRun('worker-crash/item-block', { faults: 1, backups: 1, completed: 1, itemsLost: facts.totalItems - facts.itemsBackedUp });
  }, 240_000);

  it('while pvb-watch jobs wait on PVBs in progress: the next worker completes the watches and the post hooks', async () => {
    const since = Date.now();
    const copiesBefore = copiesStarted();
    // New data in every volume: the repository backs up incrementally, so without it this second
    // backup of the same volumes would reuse their files unread and finish before the kill.
    for (const podName of ['db-0', 'db-1', 'web-0']) {
      for (const volume of stack.sim.podVolumes('shop', podName))
        await writeFile(join(volume.path, 'fresh.bin'), randomBytes(2 * 1024 * 1024));
    }
    await submit('crash-pvb-watch', ['shop']);
    await waitFor('all PVBs created and one still InProgress', async () => {
      const pvbs = await pvbsOf(stack, 'crash-pvb-watch');
      return pvbs.length === FS_VOLUMES && pvbs.some((p) => p.status?.phase === 'InProgress') ? true : undefined;
    });
    // Every post hook is still to come: the watches have not released any block yet.
    expect(execsOf(stack, 'shop', 'db-0', UNFREEZE, since)).toHaveLength(0);
    await worker.killHard();
    worker = await spawnWorker();
    const rec = await waitForBackupEnd(stack.state, 'crash-pvb-watch', 120_000);
    expect(rec.phase).toBe('Completed');
    const facts = await expectWholeBackup('crash-pvb-watch', since, copiesBefore);
    for (const podName of ['db-0', 'db-1']) expect(execsOf(stack, 'shop', podName, UNFREEZE, since)).toHaveLength(1);
    const counters = await stack.state.counters('crash-pvb-watch');
    expect(counters.pvbsCompleted).toBe(FS_VOLUMES);
    recordRun('worker-crash/pvb-watch', { faults: 1, backups: 1, completed: 1, itemsLost: facts.totalItems - facts.itemsBackedUp });
  }, 240_000);

  it('while post-hooks runs (post hook in flight): the post hook re-runs after the PVBs, counted once', async () => {
    stack.sim.setExecBehaviour('shop', 'db-1', { '*': { rules: [{ command: UNFREEZE, exitCode: 0, durationMs: 5_000 }] } });
    const since = Date.now();
    const copiesBefore = copiesStarted();
    await submit('crash-post-hooks', ['shop']);
    await waitFor(
      'db-1 post hook to be running',
      () => (execsOf(stack, 'shop', 'db-1', UNFREEZE, since).some((e) => e.endedAt === null) ? true : undefined),
      90_000,
    );
    await worker.killHard();
    worker = await spawnWorker();
    const rec = await waitForBackupEnd(stack.state, 'crash-post-hooks', 120_000);
    expect(rec.phase).toBe('Completed');
    const facts = await expectWholeBackup('crash-post-hooks', since, copiesBefore);
    const unfreezes = execsOf(stack, 'shop', 'db-1', UNFREEZE, since);
    expect(unfreezes).toHaveLength(2);
    expect(unfreezes[0]).toMatchObject({ aborted: true, exitCode: null });
    expect(unfreezes[1]).toMatchObject({ aborted: false, exitCode: 0 });
    const runs = (await finishedBackup(stack, 'crash-post-hooks')).blocks
      .flatMap((b) => b.hookRuns)
      .filter((r) => r.podName === 'db-1' && r.phase === 'post');
    expect(runs.map((r) => r.outcome)).toEqual(['interrupted', 'exited']);
    stack.sim.setExecBehaviour('shop', 'db-1', undefined);
    recordRun('worker-crash/post-hooks', { faults: 1, backups: 1, completed: 1, itemsLost: facts.totalItems - facts.itemsBackedUp });
  }, 240_000);

  it('the api (host of finalize) SIGKILLed while finalize assembles the tarball: another api finishes it', async () => {
    const since = Date.now();
    const copiesBefore = copiesStarted();
    await submit('crash-finalize', ['shop', 'bulk']);
    await waitFor(
      'finalize to start',
      async () => ((await stack.state.getBackup('crash-finalize'))?.phase === 'Finalizing' ? true : undefined),
      150_000,
      10,
    );
    await api.killHard();
    // The kill landed while finalize was running (else this test proved nothing).
    expect((await stack.state.getBackup('crash-finalize'))?.phase).toBe('Finalizing');
    api = await stack.spawn('api', 'api-2');
    const rec = await waitForBackupEnd(stack.state, 'crash-finalize', 150_000);
    expect(rec.phase).toBe('Completed');
    const facts = await expectWholeBackup('crash-finalize', since, copiesBefore, BULK_CONFIGMAPS);
    const pvbNames = (await pvbsOf(stack, 'crash-finalize')).map((p) => p.metadata.labels?.[pvbLabels.backupName]);
    expect(new Set(pvbNames)).toEqual(new Set(['crash-finalize']));
    recordRun('worker-crash/finalize', { faults: 1, backups: 1, completed: 1, itemsLost: facts.totalItems - facts.itemsBackedUp });
  }, 300_000);
});
