/*
 * Hooks beyond Velero (issue #22): backup-level pre/post hooks, retries, executionPolicy and
 * FailBlock, through real BullMQ workers on a real redis-server, the kube-sim over HTTP (real
 * @kubernetes/client-node, real pod exec) and a test PVB controller standing in for node agents.
 */
import { backupHooksJobId, validateBackupRequest } from '@stowage/core';
import { pvbLabels } from '@stowage/kube';
import type { BlockPlan, HookRunRecord, RunningWorkers } from '@stowage/pipeline';
import { cancelBackup, startWorkers, submitBackup } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { deployIdentities, useTestRedis } from '@stowage/testing';
import { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type FinishedBackup, readFinishedBackup } from './support/finished-backup.js';
import { namespace, node, pod, pvc } from './support/fixtures.js';
import { depsAs, type Harness, startHarness, waitFor, waitForBackupEnd } from './support/harness.js';
import { tarballEntries } from './support/inspect.js';
import { TestPvbController } from './support/test-pvb-controller.js';

const ALL_QUEUES = [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks];
const SUSPEND = ['/bin/flux', 'suspend'];
const RESUME = ['/bin/flux', 'resume'];
const FREEZE = ['/bin/freeze'];
const THAW = ['/bin/thaw'];
const ALWAYS = ['/bin/always'];
const ON_SUCCESS = ['/bin/on-success'];
const ON_FAILURE = ['/bin/on-failure'];

const podHooks = {
  'pre.hook.backup.velero.io/command': JSON.stringify(FREEZE),
  'post.hook.backup.velero.io/command': JSON.stringify(THAW),
};

const labelled = (name: string, app: string) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: 'apps', labels: { app } },
  data: { k: 'v' },
});

const objects: unknown[] = [
  namespace('gitops'),
  namespace('apps'),
  namespace('stowage'),
  node('node-a'),
  // Where the backup-level hooks run: two flux pods (mode all / mode one) and a finished one.
  pod({ name: 'flux-0', namespace: 'gitops', labels: { app: 'flux' } }),
  pod({ name: 'flux-1', namespace: 'gitops', labels: { app: 'flux' } }),
  pod({ name: 'flux-old', namespace: 'gitops', labels: { app: 'flux' }, phase: 'Succeeded' }),
  // Its suspend is held until the test lets it go (a cancel while a backup pre hook runs).
  pod({
    name: 'hold-0',
    namespace: 'gitops',
    labels: { app: 'hold' },
    exec: { '*': { rules: [{ command: SUSPEND, hold: true }] } },
  }),
  pod({
    name: 'broken-0',
    namespace: 'gitops',
    labels: { app: 'broken' },
    exec: { '*': { rules: [{ command: SUSPEND, exitCode: 3, stderr: 'cannot suspend' }] } },
  }),
  // One pod with pod hooks and a volume per scenario, picked by label.
  ...['ok', 'bad', 'slow', 'prefail'].map((app) =>
    pod({
      name: `${app}-0`,
      namespace: 'apps',
      labels: { app },
      volumes: [{ name: 'data', emptyDir: {} }],
      annotations: { ...podHooks, 'backup.velero.io/backup-volumes': 'data' },
    }),
  ),
  ...[0, 1, 2].map((i) =>
    pod({
      name: `cxl-${i}`,
      namespace: 'apps',
      labels: { app: 'cxl' },
      volumes: [{ name: 'data', emptyDir: {} }],
      annotations: { ...podHooks, 'backup.velero.io/backup-volumes': 'data' },
      exec: { '*': { rules: [{ command: FREEZE, durationMs: 800 }] } },
    }),
  ),
  // Retries: a pre hook that fails twice then succeeds; one that always fails.
  pod({
    name: 'retry-0',
    namespace: 'apps',
    labels: { app: 'retry' },
    exec: { '*': { rules: [{ command: FREEZE, exitCode: 1, stderr: 'busy', times: 2 }] } },
  }),
  pod({
    name: 'retryx-0',
    namespace: 'apps',
    labels: { app: 'retryx' },
    exec: { '*': { rules: [{ command: FREEZE, exitCode: 1, stderr: 'busy' }] } },
  }),
  // FailBlock: two pods sharing a PVC (one block); fb-0's pre hook passes, fb-1's fails.
  pvc('fb-data', 'apps'),
  ...['fb-0', 'fb-1'].map((name) =>
    pod({
      name,
      namespace: 'apps',
      labels: { app: 'fb' },
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'fb-data' } }],
      annotations: { 'backup.velero.io/backup-volumes': 'data' },
      exec: name === 'fb-1' ? { '*': { rules: [{ command: FREEZE, exitCode: 2, stderr: 'lock held' }] } } : undefined,
    }),
  ),
  labelled('fb-settings', 'fb'),
  // executionPolicy: one pod whose PVB completes, one whose PVB fails.
  ...['pol-ok', 'pol-bad'].map((app) =>
    pod({
      name: `${app}-0`,
      namespace: 'apps',
      labels: { app },
      volumes: [{ name: 'data', emptyDir: {} }],
      annotations: { 'backup.velero.io/backup-volumes': 'data' },
    }),
  ),
];

const flux = (over: Record<string, unknown> = {}) => ({ namespace: 'gitops', labelSelector: { matchLabels: { app: 'flux' } }, ...over });

/** A spec as the API stores it: raw JSON through core's validation. */
function spec(app: string, raw: Record<string, unknown> = {}): Record<string, unknown> {
  const res = validateBackupRequest({
    spec: {
      includedNamespaces: ['apps'],
      labelSelector: { matchLabels: { app } },
      hooks: { backup: { pre: [flux({ command: SUSPEND })], post: [flux({ command: RESUME })] } },
      ...raw,
    },
  });
  if (!res.ok) throw new Error(JSON.stringify(res.problems));
  return res.value as unknown as Record<string, unknown>;
}

interface BackupHookPhase {
  failed?: string;
  hooksRun: number;
  hooksFailed: number;
  runs: HookRunRecord[];
}

const backupHooksOf = (finished: FinishedBackup) =>
  (finished.manifest.record as { backupHooks?: { pre?: BackupHookPhase; post?: BackupHookPhase } }).backupHooks ?? {};

/** Positions of events in the backup's single event stream (a total order). */
function eventOrder(finished: FinishedBackup) {
  const events = finished.events;
  const where = (pred: (e: (typeof events)[number]) => boolean) => events.flatMap((e, i) => (pred(e) ? [i] : []));
  const backupHook = (type: string, phase: string) => where((e) => e.type === type && e.data.phase === phase);
  return {
    preDone: backupHook('backup-hooks.done', 'pre'),
    postStarted: backupHook('backup-hooks.started', 'post'),
    blockHookStarts: where((e) => e.type === 'hook.started' && e.data.blockId !== 'backup-hooks'),
    blockHookDones: where((e) => e.type === 'hook.done' && e.data.blockId !== 'backup-hooks'),
    pvbsCreated: where((e) => e.type === 'pvb.created'),
    blocksDone: where((e) => e.type === 'block.done'),
    blocksStarted: where((e) => e.type === 'block.started'),
  };
}

/** Backup pre ran before every pod hook, block and PVB; backup post after every block and its post hooks. */
function expectBackupHooksAround(finished: FinishedBackup): void {
  const order = eventOrder(finished);
  expect(order.preDone).toHaveLength(1);
  expect(order.postStarted).toHaveLength(1);
  const pre = order.preDone[0] ?? -1;
  const post = order.postStarted[0] ?? -1;
  for (const i of [...order.blockHookStarts, ...order.pvbsCreated, ...order.blocksStarted]) expect(i).toBeGreaterThan(pre);
  for (const i of [...order.blockHookDones, ...order.blocksDone]) expect(i).toBeLessThan(post);
  const hooks = backupHooksOf(finished);
  expect(hooks.pre?.runs.map((r) => `${r.podName} ${r.outcome} ${r.exitCode}`)).toEqual(['flux-0 exited 0', 'flux-1 exited 0']);
  expect(hooks.post?.runs.map((r) => `${r.podName} ${r.outcome} ${r.exitCode}`)).toEqual(['flux-0 exited 0', 'flux-1 exited 0']);
}

const execs = (h: Harness, ns: string, podName: string, command: string[]) =>
  h.sim.execLog({ namespace: ns, pod: podName }).filter((e) => e.command.join(' ') === command.join(' '));

describe('backup-level hooks and hook policies (issue #22)', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;
  let controller: TestPvbController | undefined;
  let api: RunningWorkers | undefined;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: ['node-a'] });
  });
  afterEach(async () => {
    await api?.close();
    api = undefined;
    await workers?.close();
    await controller?.stop();
    workers = undefined;
    controller = undefined;
  });
  afterAll(async () => {
    await h?.close();
    await redisHandle?.stop();
  });

  const submit = (name: string, body: Record<string, unknown>) =>
    submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name, spec: body });

  async function start(opts: ConstructorParameters<typeof TestPvbController>[0] extends infer O ? Partial<O> : never = {}) {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 300, ...opts });
    await controller.start();
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES });
  }

  it('success: backup pre before any pod hook and PVB, backup post after every block post hook', async () => {
    await start();
    await submit('bh-ok', spec('ok'));
    expect(await waitForBackupEnd(h.deps.state, 'bh-ok')).toBe('Completed');
    const finished = await readFinishedBackup(h.deps.storage, 'bh-ok');
    expectBackupHooksAround(finished);
    // The pod's own hooks ran too, and the sim saw the backup hooks in both flux pods (not the finished one).
    expect(execs(h, 'apps', 'ok-0', THAW)).toHaveLength(1);
    expect(h.sim.execLog({ namespace: 'gitops', pod: 'flux-old' })).toEqual([]);
    const counters = await h.deps.state.counters('bh-ok');
    // 2 pod hooks + the backup pre and post hooks in each of the two flux pods (a hook run per pod, as pod hooks count)
    expect(counters).toMatchObject({ hooksAttempted: 6, pvbsCompleted: 1 });
    expect(counters.hooksFailed ?? 0).toBe(0);
  });

  it('a failed block (its PVB fails): backup post still runs, after the block post hooks', async () => {
    await start({ failWith: (p) => (p.spec.pod.name === 'bad-0' ? 'disk on fire' : undefined) });
    await submit('bh-bad', spec('bad'));
    expect(await waitForBackupEnd(h.deps.state, 'bh-bad')).toBe('PartiallyFailed');
    const finished = await readFinishedBackup(h.deps.storage, 'bh-bad');
    expectBackupHooksAround(finished);
    expect(execs(h, 'apps', 'bad-0', THAW)).toHaveLength(1);
  });

  it('the fs-backup deadline: backup post still runs, after the canceled PVB and the block post hooks', async () => {
    await start({ durationMs: 120_000 });
    await submit('bh-slow', spec('slow', { fsBackupTimeout: '2s' }));
    expect(await waitForBackupEnd(h.deps.state, 'bh-slow')).toBe('PartiallyFailed');
    const finished = await readFinishedBackup(h.deps.storage, 'bh-slow');
    expectBackupHooksAround(finished);
    const [pvb] = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=bh-slow` });
    expect(pvb?.status?.phase).toBe('Canceled');
    expect(execs(h, 'apps', 'slow-0', THAW)).toHaveLength(1);
  });

  it('a cancel: blocks not started stop, started blocks run their post hooks, then the backup post hooks; Canceled', async () => {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 120_000, perNodeConcurrency: 4 });
    await controller.start();
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES, concurrency: { itemBlocks: 1 } });
    await submit('bh-cxl', spec('cxl'));
    await waitFor('the first PVB', async () => ((await h.deps.state.allPvbNames('bh-cxl')).length > 0 ? true : undefined));
    // As the API cancels: the hooks queue lets the cancel wake the parked post-hooks jobs.
    const hooksQueue = new Queue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    try {
      expect((await cancelBackup({ state: h.deps.state, hooksQueue }, 'bh-cxl')).outcome).toBe('requested');
    } finally {
      await hooksQueue.close();
    }
    expect(await waitForBackupEnd(h.deps.state, 'bh-cxl')).toBe('Canceled');
    const finished = await readFinishedBackup(h.deps.storage, 'bh-cxl');
    expectBackupHooksAround(finished);
    const started = finished.blocks.filter((b) => b.block?.state !== 'Canceled');
    const canceled = finished.blocks.filter((b) => b.block?.state === 'Canceled');
    expect(started.length).toBeGreaterThanOrEqual(1);
    expect(canceled.length).toBeGreaterThanOrEqual(1);
    for (const b of started) expect(execs(h, 'apps', (b.plan as BlockPlan).pods[0]?.name ?? '', THAW)).toHaveLength(1);
    for (const b of canceled) expect(h.sim.execLog({ namespace: 'apps', pod: (b.plan as BlockPlan).pods[0]?.name ?? '' })).toEqual([]);
    // The cancel is reported: which blocks ran their post hooks, and the backup post hooks.
    expect(finished.logs.map((l) => l.msg)).toContain(
      `backup canceled: ${started.length} of ${finished.blocks.length} planned block(s) had started and ran their post hooks once their PVBs stopped; the others never started; the backup post hooks ran (2 run, 0 failed)`,
    );
  });

  it('a backup pre hook failing with onError: Fail fails the backup before any pod hook or PVB; backup post still runs', async () => {
    await start();
    const body = spec('prefail', {
      hooks: {
        backup: {
          pre: [{ namespace: 'gitops', labelSelector: { matchLabels: { app: 'broken' } }, command: SUSPEND }, flux({ command: SUSPEND })],
          post: [flux({ command: RESUME, mode: 'one' })],
        },
      },
    });
    await submit('bh-prefail', body);
    expect(await waitForBackupEnd(h.deps.state, 'bh-prefail')).toBe('Failed');
    expect(execs(h, 'apps', 'prefail-0', FREEZE)).toEqual([]);
    expect(await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=bh-prefail` })).toEqual([]);
    const finished = await readFinishedBackup(h.deps.storage, 'bh-prefail');
    expect(finished.blocks).toEqual([]);
    const hooks = backupHooksOf(finished);
    expect(hooks.pre?.failed).toContain('backup pre hook backup-pre-0 failed in gitops/broken-0');
    // The second pre hook never ran; the post hook ran in one pod (mode: one).
    expect(hooks.pre?.runs.map((r) => `${r.podName} ${r.outcome} ${r.exitCode}`)).toEqual(['broken-0 exited 3']);
    expect(hooks.post?.runs.map((r) => `${r.podName} ${r.outcome} ${r.exitCode}`)).toEqual(['flux-0 exited 0']);
    expect(finished.manifest.record.failureReason).toContain(
      'backup pre hook backup-pre-0 failed in gitops/broken-0 (onError: Fail): no block was run',
    );
    expect(finished.logs.map((l) => l.msg)).toContain(
      'backup not run: backup pre hook backup-pre-0 failed in gitops/broken-0 (onError: Fail)',
    );
    expect(finished.logs.some((l) => l.level === 'error' && l.msg.includes('error executing pre hook backup-pre-0'))).toBe(true);
    expect(await h.deps.state.counters('bh-prefail')).toMatchObject({ hooksAttempted: 2, hooksFailed: 1 });
  });

  it('a cancel while a backup pre hook runs: the later pre hooks never run, nothing is planned, the post hooks run; Canceled', async () => {
    await start();
    const body = spec('ok', {
      hooks: {
        backup: {
          pre: [{ namespace: 'gitops', labelSelector: { matchLabels: { app: 'hold' } }, command: SUSPEND }, flux({ command: SUSPEND })],
          post: [flux({ command: RESUME, mode: 'one' })],
        },
      },
    });
    await submit('bh-prehold', body);
    await waitFor('the held backup pre hook', async () => (execs(h, 'gitops', 'hold-0', SUSPEND).length > 0 ? true : undefined));
    expect((await cancelBackup({ state: h.deps.state }, 'bh-prehold')).outcome).toBe('requested');
    expect(h.sim.releaseExecs('gitops', 'hold-0')).toBe(1);
    expect(await waitForBackupEnd(h.deps.state, 'bh-prehold')).toBe('Canceled');
    const finished = await readFinishedBackup(h.deps.storage, 'bh-prehold');
    expect(finished.blocks).toEqual([]);
    const hooks = backupHooksOf(finished);
    expect(hooks.pre?.runs.map((r) => `${r.podName} ${r.outcome} ${r.exitCode}`)).toEqual(['hold-0 exited 0']);
    expect(hooks.post?.runs.map((r) => `${r.podName} ${r.outcome} ${r.exitCode}`)).toEqual(['flux-0 exited 0']);
    expect(finished.events.map((e) => e.type)).toContain('plan.canceled');
    expect(finished.logs.map((l) => l.msg)).toContain('plan stopped by the cancel before its backup pre hooks were all run');
  });

  it('the pre hooks job failing for good fails the backup: nothing is planned, the post hooks still run; Failed', async () => {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 300 });
    await controller.start();
    // Everything but the hooks queue first: the pre hooks' job waits there, and is spoiled before it runs.
    api = startWorkers({ deps: h.deps, queues: [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch] });
    await submit('bh-jobfail', spec('ok'));
    const hooksQueue = new Queue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    try {
      const job = await waitFor(
        'the pre hooks job',
        async () => (await hooksQueue.getJob(backupHooksJobId('bh-jobfail', 'pre'))) ?? undefined,
      );
      await job.updateData({ ...job.data, phase: 'during' });
    } finally {
      await hooksQueue.close();
    }
    workers = startWorkers({ deps: h.deps, queues: [QueueName.hooks] });
    expect(await waitForBackupEnd(h.deps.state, 'bh-jobfail')).toBe('Failed');
    const finished = await readFinishedBackup(h.deps.storage, 'bh-jobfail');
    expect(finished.blocks).toEqual([]);
    expect(finished.manifest.record.failureReason).toMatch(
      /^the job running the backup pre hooks failed for good: .*phase.*: no block was run$/,
    );
    const hooks = backupHooksOf(finished);
    expect(hooks.pre?.runs).toEqual([]);
    expect(hooks.post?.runs.map((r) => `${r.podName} ${r.outcome} ${r.exitCode}`)).toEqual(['flux-0 exited 0', 'flux-1 exited 0']);
    expect(finished.logs.filter((l) => l.level === 'error').map((l) => l.msg)).toEqual([
      expect.stringMatching(/^the job running the backup pre hooks failed for good: /),
      expect.stringMatching(/^backup not run: the job running the backup pre hooks failed for good: /),
    ]);
  });

  it('retries: fails twice then succeeds with max 2 → 3 tries, 1 success, no error; failing every time → 3 tries and the error', async () => {
    await start();
    const retrySpec = (app: string) =>
      spec(app, {
        hooks: {
          resources: [{ name: 'freeze', pre: [{ exec: { command: FREEZE, onError: 'Continue', retries: { max: 2, backoff: '50ms' } } }] }],
        },
      });
    await submit('bh-retry', retrySpec('retry'));
    await submit('bh-retryx', retrySpec('retryx'));
    expect(await waitForBackupEnd(h.deps.state, 'bh-retry')).toBe('Completed');
    expect(await waitForBackupEnd(h.deps.state, 'bh-retryx')).toBe('PartiallyFailed');

    const runsOf = async (name: string) =>
      (await readFinishedBackup(h.deps.storage, name)).blocks.flatMap((b) => b.hookRuns).filter((r) => r.phase === 'pre');
    const ok = await runsOf('bh-retry');
    expect(ok.map((r) => `${r.try}/${r.tries} ${r.outcome} ${r.exitCode}`)).toEqual(['1/3 exited 1', '2/3 exited 1', '3/3 exited 0']);
    expect(execs(h, 'apps', 'retry-0', FREEZE)).toHaveLength(3);
    const okCounters = await h.deps.state.counters('bh-retry');
    expect(okCounters.hooksAttempted).toBe(1); // one hook, however many tries (this spec has no backup hooks)
    expect(okCounters.hooksFailed ?? 0).toBe(0);
    expect(okCounters.errors ?? 0).toBe(0);

    const bad = await runsOf('bh-retryx');
    expect(bad.map((r) => `${r.try}/${r.tries} ${r.outcome} ${r.exitCode}`)).toEqual(['1/3 exited 1', '2/3 exited 1', '3/3 exited 1']);
    expect(await h.deps.state.counters('bh-retryx')).toMatchObject({ hooksAttempted: 1, hooksFailed: 1, errors: 1 });
    const { logs } = await readFinishedBackup(h.deps.storage, 'bh-retryx');
    expect(logs.filter((l) => l.level === 'error').map((l) => l.msg)).toEqual([
      'error executing pre hook freeze #0 in apps/retryx-0/app: exited with code 1 (after 3 tries)',
    ]);
  });

  it('FailBlock: the block gets no PVB and no item, the passing pod still runs its post hook; PartiallyFailed', async () => {
    await start();
    await submit(
      'bh-fb',
      spec('fb', {
        hooks: {
          resources: [{ name: 'db', pre: [{ exec: { command: FREEZE, onError: 'FailBlock' } }], post: [{ exec: { command: THAW } }] }],
        },
      }),
    );
    expect(await waitForBackupEnd(h.deps.state, 'bh-fb')).toBe('PartiallyFailed');
    expect(await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=bh-fb` })).toEqual([]);
    const finished = await readFinishedBackup(h.deps.storage, 'bh-fb');
    const block = finished.blocks.find((b) => (b.plan as BlockPlan).pods.length > 0);
    expect((block?.plan as BlockPlan | undefined)?.pods.map((p) => p.name)).toEqual(['fb-0', 'fb-1']);
    expect(block?.block).toMatchObject({
      state: 'PartiallyFailed',
      skipped: expect.stringContaining('apps/fb-1 failed: exited with code 2'),
    });
    // No item of the block (pods, PVC) is in the backup; the config map (its own block) is.
    const entries = tarballEntries(h.storageDir, 'bh-fb');
    expect(entries.filter((e) => /\/namespaces\/apps\/fb-(0|1|data)\.json$/.test(e))).toEqual([]);
    expect(entries).toContain('resources/configmaps/namespaces/apps/fb-settings.json');
    // fb-0's pre hook passed: its post hook ran; fb-1's failed: no post hook.
    expect(execs(h, 'apps', 'fb-0', THAW)).toHaveLength(1);
    expect(execs(h, 'apps', 'fb-1', THAW)).toEqual([]);
    expect(finished.logs.filter((l) => l.level === 'error').map((l) => l.msg)).toEqual([
      'error executing pre hook db #0 in apps/fb-1/app: exited with code 2',
      `block ${block?.id} skipped, onError: FailBlock: pre hook db #0 in apps/fb-1 failed: exited with code 2; none of its 4 items (its pods, PVCs and PVs included) is backed up and no PVB is created`,
    ]);
  });

  it('executionPolicy: Always runs either way, OnSuccess only when every PVB completed, OnFailure only when one did not', async () => {
    await start({ failWith: (p) => (p.spec.pod.name === 'pol-bad-0' ? 'disk on fire' : undefined) });
    const policySpec = (app: string) =>
      spec(app, {
        hooks: {
          resources: [
            {
              name: 'notify',
              post: [
                { exec: { command: ALWAYS } },
                { exec: { command: ON_SUCCESS, executionPolicy: 'OnSuccess' } },
                { exec: { command: ON_FAILURE, executionPolicy: 'OnFailure' } },
              ],
            },
          ],
        },
      });
    await submit('bh-pol-ok', policySpec('pol-ok'));
    await submit('bh-pol-bad', policySpec('pol-bad'));
    expect(await waitForBackupEnd(h.deps.state, 'bh-pol-ok')).toBe('Completed');
    expect(await waitForBackupEnd(h.deps.state, 'bh-pol-bad')).toBe('PartiallyFailed');
    const ran = (p: string) => h.sim.execLog({ namespace: 'apps', pod: p }).map((e) => e.command.join(' '));
    expect(ran('pol-ok-0')).toEqual([ALWAYS.join(' '), ON_SUCCESS.join(' ')]);
    expect(ran('pol-bad-0')).toEqual([ALWAYS.join(' '), ON_FAILURE.join(' ')]);
    // The hook its policy left out is recorded as skipped with why, and not counted as attempted.
    const skippedOf = async (name: string) =>
      (await readFinishedBackup(h.deps.storage, name)).blocks.flatMap((b) => b.hookRuns).filter((r) => r.outcome === 'skipped');
    expect((await skippedOf('bh-pol-ok')).map((r) => r.message)).toEqual(['executionPolicy OnFailure: every PVB of the block completed']);
    expect((await skippedOf('bh-pol-bad')).map((r) => r.message)).toEqual([
      'executionPolicy OnSuccess: a PVB of the block did not complete',
    ]);
    expect((await h.deps.state.counters('bh-pol-ok')).hooksAttempted).toBe(2);
    expect((await h.deps.state.counters('bh-pol-bad')).hooksAttempted).toBe(2);
  });

  it('under the deployed identities: the api, which may not exec, plans and finalizes; the backup workers run the backup hooks', async () => {
    // Last in this file: the dev overlay's RBAC stays applied (the other tests run as the admin).
    await deployIdentities(h.sim);
    const review = await h.kube.requestJson<{ status?: { allowed?: boolean } }>({
      method: 'POST',
      path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: 'system:serviceaccount:stowage:stowage-api',
          groups: ['system:serviceaccounts', 'system:serviceaccounts:stowage', 'system:authenticated'],
          resourceAttributes: { verb: 'create', resource: 'pods', subresource: 'exec', namespace: 'gitops' },
        },
      },
    });
    expect(review.status?.allowed).toBe(false);
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 300 });
    await controller.start();
    // As deployed: the api hosts backups (plan, finalize); the backup workers item-blocks, pvb-watch and hooks.
    api = startWorkers({ deps: depsAs(h, 'stowage-api'), queues: [QueueName.backups] });
    workers = startWorkers({ deps: depsAs(h, 'stowage-worker'), queues: [QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks] });
    await submit('bh-ids', spec('ok'));
    expect(await waitForBackupEnd(h.deps.state, 'bh-ids')).toBe('Completed');
    const finished = await readFinishedBackup(h.deps.storage, 'bh-ids');
    expectBackupHooksAround(finished);
    expect(await h.deps.state.counters('bh-ids')).toMatchObject({ hooksAttempted: 6 });
    expect((await h.deps.state.counters('bh-ids')).hooksFailed ?? 0).toBe(0);
  });
});
