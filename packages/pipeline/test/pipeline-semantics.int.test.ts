import { blockJobId, isPostHooksJobIdOf, postHooksJobId, pvbName } from '@stowage/core';
import type { PvbClient } from '@stowage/kube';
import { pvbLabels } from '@stowage/kube';
import type { BackupState, BlockPlan, PipelineDeps, RunningWorkers } from '@stowage/pipeline';
import { cancelBackup, startWorkers, submitBackup } from '@stowage/pipeline';
import { JobName, promoteParked, QueueName } from '@stowage/queue';
import { stagedItemPaths } from '@stowage/storage';
import { useTestRedis } from '@stowage/testing';
import { Job, Queue, UnrecoverableError } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readFinishedBackup } from './support/finished-backup.js';
import { backupSpec, configMap, namespace, node, pod, pvc } from './support/fixtures.js';
import { type Harness, startHarness, waitFor, waitForBackupEnd } from './support/harness.js';
import { sidecar, tarballEntries } from './support/inspect.js';
import { TestPvbController } from './support/test-pvb-controller.js';

const ALL_QUEUES = [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks];
const POST = ['/bin/post'];
const PRE = ['/bin/pre'];

function uidOf(fixtureObjects: unknown[], name: string): string {
  const found = fixtureObjects.find(
    (o) =>
      (o as { kind: string; metadata: { name: string } }).kind === 'Pod' && (o as { metadata: { name: string } }).metadata.name === name,
  );
  return (found as { metadata: { uid: string } }).metadata.uid;
}

const hookAnnotations = (extra: Record<string, string> = {}) => ({
  'pre.hook.backup.velero.io/command': JSON.stringify(PRE),
  'post.hook.backup.velero.io/command': JSON.stringify(POST),
  ...extra,
});

const objects: unknown[] = [
  namespace('shop'),
  namespace('stowage'),
  node('node-a'),
  node('node-b'),
  node('node-c'),
  pvc('shared-data'),
  configMap('settings'),
  // Two pods sharing a PVC: one block, one PVB, both post hooks after it.
  pod({
    name: 'db-0',
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'shared-data' } }],
    annotations: hookAnnotations({ 'backup.velero.io/backup-volumes': 'data' }),
  }),
  pod({
    name: 'db-1',
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'shared-data' } }],
    annotations: hookAnnotations({ 'backup.velero.io/backup-volumes': 'data' }),
  }),
  // Opt-in picks `cache`, not `logs`.
  pod({
    name: 'web-0',
    node: 'node-b',
    volumes: [
      { name: 'cache', emptyDir: {} },
      { name: 'logs', emptyDir: {} },
    ],
    annotations: { 'backup.velero.io/backup-volumes': 'cache' },
  }),
  // Opted in, but its node has no agent.
  pod({
    name: 'lonely-0',
    node: 'node-c',
    volumes: [{ name: 'scratch', emptyDir: {} }],
    annotations: { 'backup.velero.io/backup-volumes': 'scratch' },
  }),
  // Secrets are never backed up; a finished pod gets no PVB.
  pod({
    name: 'cfg-0',
    volumes: [{ name: 'creds', secret: { secretName: 'x' } }],
    annotations: { 'backup.velero.io/backup-volumes': 'creds' },
  }),
  pod({
    name: 'done-0',
    phase: 'Succeeded',
    volumes: [{ name: 'out', emptyDir: {} }],
    annotations: { 'backup.velero.io/backup-volumes': 'out' },
  }),
  // Pre hook fails with onError: Fail → no item, no PVB, no post hook.
  pod({
    name: 'fail-0',
    node: 'node-b',
    volumes: [{ name: 'data', emptyDir: {} }],
    annotations: hookAnnotations({ 'backup.velero.io/backup-volumes': 'data', 'pre.hook.backup.velero.io/on-error': 'Fail' }),
    exec: { '*': { rules: [{ command: PRE, exitCode: 1, stderr: 'freeze failed' }] } },
  }),
  // Namespace ops: one pod per scenario, picked by label.
  namespace('ops'),
  pod({
    name: 'bad-0',
    namespace: 'ops',
    labels: { app: 'bad' },
    volumes: [{ name: 'data', emptyDir: {} }],
    annotations: hookAnnotations({ 'backup.velero.io/backup-volumes': 'data' }),
  }),
  pod({
    name: 'slow-0',
    namespace: 'ops',
    node: 'node-b',
    labels: { app: 'slow' },
    volumes: [{ name: 'data', emptyDir: {} }],
    annotations: hookAnnotations({ 'backup.velero.io/backup-volumes': 'data' }),
  }),
  pod({
    name: 'dupe-0',
    namespace: 'ops',
    labels: { app: 'dupe' },
    volumes: [{ name: 'data', emptyDir: {} }],
    annotations: hookAnnotations({ 'backup.velero.io/backup-volumes': 'data' }),
  }),
  ...[0, 1, 2].map((i) =>
    pod({
      name: `cxl-${i}`,
      namespace: 'ops',
      labels: { app: 'cxl' },
      volumes: [{ name: 'data', emptyDir: {} }],
      annotations: hookAnnotations({ 'backup.velero.io/backup-volumes': 'data' }),
      exec: { '*': { rules: [{ command: PRE, durationMs: 800 }] } },
    }),
  ),
  ...['orphan', 'stuck', 'instant', 'midlook', 'blip'].map((app) =>
    pod({
      name: `${app}-0`,
      namespace: 'ops',
      labels: { app },
      volumes: [{ name: 'data', emptyDir: {} }],
      annotations: hookAnnotations({ 'backup.velero.io/backup-volumes': 'data' }),
    }),
  ),
  // Two volumes, two PVBs in one block: its post hooks wait for both.
  pod({
    name: 'pair-0',
    namespace: 'ops',
    labels: { app: 'pair' },
    volumes: [
      { name: 'data', emptyDir: {} },
      { name: 'logs', emptyDir: {} },
    ],
    annotations: hookAnnotations({ 'backup.velero.io/backup-volumes': 'data,logs' }),
  }),
  // Resource policies as Velero users store them: one key holding a YAML document.
  {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'bronze-skip', namespace: 'stowage' },
    data: {
      'policy.yaml':
        'version: v1\nvolumePolicies:\n  - conditions:\n      pvcLabels:\n        tier: bronze\n    action:\n      type: skip\n',
    },
  },
  {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'broken-policy', namespace: 'stowage' },
    data: { 'policy.yaml': 'version: v1\nvolumePolicies: [\n' },
  },
  pvc('pol-gold', 'ops', { tier: 'gold' }),
  pvc('pol-cold', 'ops', { tier: 'bronze' }),
  pod({
    name: 'pol-0',
    namespace: 'ops',
    labels: { app: 'pol' },
    volumes: [
      { name: 'gold', persistentVolumeClaim: { claimName: 'pol-gold' } },
      { name: 'cold', persistentVolumeClaim: { claimName: 'pol-cold' } },
      { name: 'tmp', emptyDir: {} },
      { name: 'skipme', emptyDir: {} },
    ],
    annotations: { 'backup.velero.io/backup-volumes-excludes': 'skipme' },
  }),
];

const opsSpec = (app: string, extra: Record<string, unknown> = {}) =>
  backupSpec({ includedNamespaces: ['ops'], labelSelector: { matchLabels: { app }, matchExpressions: [] }, ...extra });

/**
 * The block job's last attempt dies right after its PVB create reached the API server (the create
 * is real; the failure is injected after it): the PVB runs on with nobody watching it.
 */
function failingAfterCreate(deps: PipelineDeps, config: Partial<PipelineDeps['config']> = {}): PipelineDeps {
  const pvbs: PvbClient = Object.create(deps.pvbs);
  pvbs.createPvb = async (pvb) => {
    await deps.pvbs.createPvb(pvb);
    throw new UnrecoverableError(`injected: the item-block job died after creating ${pvb.metadata.name}`);
  };
  return { ...deps, pvbs, config: { ...deps.config, ...config } };
}

const execsOf = (h: Harness, ns: string, podName: string, command: string[]) =>
  h.sim.execLog({ namespace: ns, pod: podName }).filter((e) => e.command.join(' ') === command.join(' '));

describe('backup pipeline semantics (all queues in this process, test PVB controller)', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;
  let controller: TestPvbController | undefined;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: ['node-a', 'node-b'] });
  });
  afterEach(async () => {
    await workers?.close();
    await controller?.stop();
    workers = undefined;
    controller = undefined;
  });
  afterAll(async () => {
    await h?.close();
    await redisHandle?.stop();
  });

  it('opt-in, shared PVCs, skips with reasons, failing pre hook, post hooks after PVBs, Velero layout', async () => {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 400 });
    await controller.start();
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES, concurrency: { itemBlocks: 2 } });
    const name = 'nightly-1';
    const { created } = await submitBackup(
      { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
      { name, spec: backupSpec() },
    );
    expect(created).toBe(true);
    const phase = await waitForBackupEnd(h.deps.state, name);
    expect(h.logs.filter((l) => l.startsWith('ERROR'))).toEqual([]);
    // The failing pre hook makes it PartiallyFailed (Velero: any error-level log line).
    expect(phase).toBe('PartiallyFailed');

    // Which PVBs exist is decided by opt-in, shared PVCs, node agents, volume kinds and pod phase.
    const pvbs = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${name}` });
    const sharedPvb = pvbName(name, uidOf(objects, 'db-0'), 'data');
    expect(pvbs.map((p) => p.metadata.name).sort()).toEqual([sharedPvb, pvbName(name, uidOf(objects, 'web-0'), 'cache')].sort());
    expect(pvbs.every((p) => p.status?.phase === 'Completed')).toBe(true);

    // db-0 and db-1 share one block.
    const finished = await readFinishedBackup(h.deps.storage, name);
    const blockIds = finished.blocks.map((b) => b.id);
    const plans = finished.blocks.map((b) => b.plan as BlockPlan | undefined);
    const dbBlock = plans.find((p) => p?.pods.some((x) => x.name === 'db-0'));
    expect(dbBlock?.pods.map((p) => p.name).sort()).toEqual(['db-0', 'db-1']);

    // Both post hooks ran after the shared PVB completed.
    const completedAt = Date.parse(pvbs.find((p) => p.metadata.name === sharedPvb)?.status?.completionTimestamp ?? '');
    for (const podName of ['db-0', 'db-1']) {
      const posts = h.sim.execLog({ namespace: 'shop', pod: podName }).filter((e) => e.command.join(' ') === POST.join(' '));
      expect(posts.length).toBeGreaterThanOrEqual(1);
      for (const e of posts) expect(Date.parse(e.startedAt)).toBeGreaterThanOrEqual(completedAt);
    }

    // fail-0: pre hook ran and failed; no post hook, no PVB, no item.
    const failExecs = h.sim.execLog({ namespace: 'shop', pod: 'fail-0' }).map((e) => e.command.join(' '));
    expect(failExecs).toEqual([PRE.join(' ')]);

    // Every skip is recorded with its reason.
    const logs = finished.logs.map((l) => l.msg);
    const expectSkip = (text: string) =>
      expect(
        logs.some((m) => m.includes(text)),
        `log mentions: ${text}`,
      ).toBe(true);
    expectSkip('pods/shop/db-1 volume data: PVC shared-data is already backed up through pod shop/db-0');
    expectSkip('pods/shop/web-0 volume logs: not listed in backup.velero.io/backup-volumes');
    expectSkip('pods/shop/lonely-0 volume scratch: no node agent runs on node node-c');
    expectSkip('pods/shop/cfg-0 volume creds: secret volumes are never backed up');
    expectSkip('pods/shop/done-0 volume out: pod is not running');
    expectSkip('pod shop/fail-0 not backed up');

    // Counters: hooks attempted/failed, items, PVBs.
    const counters = await h.deps.state.counters(name);
    // pre+post for db-0, db-1, fail-0 (its post is never attempted: the pod is not backed up)
    expect(counters.hooksAttempted).toBe(5);
    expect(counters.hooksFailed).toBe(1);
    expect(counters.pvbsCompleted).toBe(2);

    // The tarball holds every selected item at its Velero path — but not fail-0.
    const entries = tarballEntries(h.storageDir, name);
    expect(entries[0]).toBe('metadata/version');
    for (const p of ['db-0', 'db-1', 'web-0', 'lonely-0', 'cfg-0', 'done-0'])
      expect(entries).toContain(`resources/pods/namespaces/shop/${p}.json`);
    expect(entries).not.toContain('resources/pods/namespaces/shop/fail-0.json');
    expect(entries).toContain('resources/configmaps/namespaces/shop/settings.json');
    expect(entries).toContain('resources/persistentvolumeclaims/namespaces/shop/shared-data.json');
    expect(entries.some((e) => /^resources\/persistentvolumes\/cluster\/pvc-.*\.json$/.test(e))).toBe(true);
    expect(counters.itemsBackedUp).toBe(entries.filter((e) => e.startsWith('resources/') && !e.includes('-preferredversion/')).length);
    expect(counters.totalItems).toBe((counters.itemsBackedUp ?? 0) + 1);

    // Sidecars list every PVB and every resource.
    const pvbList = await sidecar<{ metadata: { name: string } }[]>(h.deps.storage, name, '-podvolumebackups.json.gz');
    expect(pvbList.map((p) => p.metadata.name).sort()).toEqual(pvbs.map((p) => p.metadata.name).sort());
    const resources = await sidecar<Record<string, string[]>>(h.deps.storage, name, '-resource-list.json.gz');
    expect(resources['v1/Pod']).toEqual(['shop/cfg-0', 'shop/db-0', 'shop/db-1', 'shop/done-0', 'shop/lonely-0', 'shop/web-0']);
    expect(resources['v1/ConfigMap']).toEqual(['shop/settings']);
    const results = await sidecar<{ errors: { namespaces?: Record<string, string[]> } }>(h.deps.storage, name, '-results.gz');
    expect(results.errors.namespaces?.shop?.some((m) => m.includes('fail-0'))).toBe(true);
    const meta = JSON.parse(String(await h.deps.storage.getObject(`backups/${name}/velero-backup.json`)));
    expect(meta.status).toMatchObject({ phase: 'PartiallyFailed', hookStatus: { hooksAttempted: 5, hooksFailed: 1 } });
    // Redis keeps only the catalogue entry: no manifests, blocks or logs.
    expect(await h.deps.state.getBlockItems(name, blockIds[0] ?? '')).toBeUndefined();
    expect(await h.deps.state.blockCount(name)).toBe(0);
    expect(await h.deps.state.readLogs(name)).toEqual([]);
  });

  /** Every queue here, with parks far beyond a test's waits (only a wake-up brings a job back in time), once the PVB informer synced. */
  const startLongParkingWorkers = async (overrides: Partial<PipelineDeps>) => {
    const running = startWorkers({
      deps: { ...h.deps, ...overrides, config: { ...h.deps.config, pvbRealReadEveryMs: 600_000 } },
      queues: ALL_QUEUES,
    });
    workers = running;
    await waitFor('the informer to sync', async () => (running.pipeline.runtime.hub?.healthy() ? true : undefined));
  };
  /** Submits a backup of the `pair` pod (one block, two PVBs left New) and returns once its post-hooks job is parked after the item-block job. */
  const submitPairParked = async (name: string) => {
    await submit(name, opsSpec('pair'));
    const created = await waitFor('both PVBs', async () => {
      const found = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${name}` });
      return found.length === 2 ? found : undefined;
    });
    const block = created[0]?.spec.tags?.block ?? '';
    const queues = [QueueName.itemBlocks, QueueName.hooks].map((q) => new Queue(q, { connection: h.redis, prefix: h.queuePrefix }));
    const [itemBlocksQueue, hooksQueue] = queues as [Queue, Queue];
    const jobId = postHooksJobId(name, block);
    try {
      await waitFor('the item-block job to be done', async () =>
        (await itemBlocksQueue.getJobState(blockJobId(name, block))) === 'completed' ? true : undefined,
      );
      await new Promise((r) => setTimeout(r, 300)); // what the job's 'completed' handler does is done
      expect(await hooksQueue.getJobState(jobId)).toBe('delayed');
    } finally {
      await Promise.all(queues.map((q) => q.close()));
    }
    return { created, jobId };
  };
  /** Both PVBs of the `pair` backup are asked to cancel; stopped, the backup ends Canceled and the started block's post hook runs once. */
  const expectPvbsCanceledThenPostHook = async (name: string, postsBefore: number) => {
    const asked = await waitFor('both PVBs asked to cancel', async () => {
      const found = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${name}` });
      return found.length === 2 && found.every((p) => p.spec.cancel === true) ? found : undefined;
    });
    for (const pvb of asked) {
      await h.pvbs.patchPvbStatus(pvb.metadata.name, { phase: 'Canceled', completionTimestamp: new Date().toISOString() });
    }
    expect(await waitForBackupEnd(h.deps.state, name, 20_000)).toBe('Canceled');
    expect(execsOf(h, 'ops', 'pair-0', POST)).toHaveLength(postsBefore + 1);
  };
  const submit = (name: string, spec: Record<string, unknown>) =>
    submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name, spec });

  it('a failed PVB: the post hooks still run, after it; the backup is PartiallyFailed', async () => {
    controller = new TestPvbController({
      pvbs: h.pvbs,
      durationMs: 300,
      failWith: (p) => (p.spec.pod.name === 'bad-0' ? 'disk on fire' : undefined),
    });
    await controller.start();
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES });
    await submit('bad-1', opsSpec('bad'));
    expect(await waitForBackupEnd(h.deps.state, 'bad-1')).toBe('PartiallyFailed');
    const [pvb] = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=bad-1` });
    expect(pvb?.status).toMatchObject({ phase: 'Failed', message: 'disk on fire' });
    const posts = execsOf(h, 'ops', 'bad-0', POST);
    expect(posts).toHaveLength(1);
    expect(Date.parse(posts[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(pvb?.status?.completionTimestamp ?? ''));
    const counters = await h.deps.state.counters('bad-1');
    expect(counters).toMatchObject({ pvbsFailed: 1, hooksAttempted: 2, errors: 1 });
    expect(
      (await readFinishedBackup(h.deps.storage, 'bad-1')).logs.some(
        (l) => l.level === 'error' && l.msg === 'pod volume backup failed: disk on fire',
      ),
    ).toBe(true);
  });

  it('PVB reads that fail more often than the post-hooks job has attempts: its looks are retried, the post hooks run once, after the PVB', async () => {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 1_000 });
    await controller.start();
    const FAILURES = 5; // the hooks queue gives a job 3 attempts
    let failed = 0;
    const pvbs: PvbClient = Object.create(h.deps.pvbs);
    pvbs.getPvb = async (pvbName) => {
      if (failed < FAILURES) {
        failed++;
        throw new Error('503 Service Unavailable (injected)');
      }
      return h.deps.pvbs.getPvb(pvbName);
    };
    // Every look at the running PVB reads the API (its GET is always due), so each one fails until
    // the sixth; looks come often enough for all five to fall within the PVB's second (an end the
    // cache shows needs no GET).
    const config = { ...h.deps.config, pvbRealReadEveryMs: 0, pvbPollBaseMs: 20, pvbPollMaxMs: 100 };
    workers = startWorkers({ deps: { ...h.deps, pvbs, config }, queues: ALL_QUEUES });
    await submit('blip-1', opsSpec('blip'));
    expect(await waitForBackupEnd(h.deps.state, 'blip-1', 60_000)).toBe('Completed');
    expect(failed).toBe(FAILURES);
    const [pvb] = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=blip-1` });
    const posts = execsOf(h, 'ops', 'blip-0', POST);
    expect(posts).toHaveLength(1);
    expect(Date.parse(posts[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(pvb?.status?.completionTimestamp ?? ''));
    expect(await h.deps.state.counters('blip-1')).toMatchObject({ pvbsCompleted: 1, hooksAttempted: 2 });
  });

  it('the fs-backup deadline: the PVB is asked to cancel, post hooks still run, errors recorded', async () => {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 120_000 });
    await controller.start();
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES });
    await submit('slow-1', opsSpec('slow', { fsBackupTimeoutMs: 1_500 }));
    expect(await waitForBackupEnd(h.deps.state, 'slow-1')).toBe('PartiallyFailed');
    const [pvb] = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=slow-1` });
    expect(pvb?.spec.cancel).toBe(true);
    expect(pvb?.status?.phase).toBe('Canceled');
    const posts = execsOf(h, 'ops', 'slow-0', POST);
    expect(posts).toHaveLength(1);
    expect(Date.parse(posts[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(pvb?.status?.completionTimestamp ?? ''));
    const { logs } = await readFinishedBackup(h.deps.storage, 'slow-1');
    expect(logs.some((l) => l.level === 'error' && l.msg.includes('fs-backup deadline passed'))).toBe(true);
    expect(logs.some((l) => l.level === 'error' && l.msg.startsWith('pod volume backup canceled'))).toBe(true);
    const counters = await h.deps.state.counters('slow-1');
    expect(counters).toMatchObject({ pvbsCanceled: 1, hooksAttempted: 2 });
    expect(counters.hooksFailed ?? 0).toBe(0);
  });

  it('an item-block job that fails for good after creating a PVB: the PVB is asked to cancel and post hooks wait until it stops', async () => {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 120_000 });
    await controller.start();
    workers = startWorkers({ deps: failingAfterCreate(h.deps), queues: ALL_QUEUES });
    await submit('orphan-1', opsSpec('orphan'));
    expect(await waitForBackupEnd(h.deps.state, 'orphan-1')).toBe('PartiallyFailed');
    const [pvb] = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=orphan-1` });
    expect(pvb?.spec.cancel).toBe(true);
    expect(pvb?.status?.phase).toBe('Canceled');
    const posts = execsOf(h, 'ops', 'orphan-0', POST);
    expect(posts).toHaveLength(1);
    expect(Date.parse(posts[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(pvb?.status?.completionTimestamp ?? ''));
    const msgs = (await readFinishedBackup(h.deps.storage, 'orphan-1')).logs.filter((l) => l.level === 'error').map((l) => l.msg);
    expect(msgs.some((m) => m.includes('item-block job of') && m.includes('injected: the item-block job died'))).toBe(true);
    expect(msgs.some((m) => m.startsWith('pod volume backup canceled'))).toBe(true);
    expect(await h.deps.state.counters('orphan-1')).toMatchObject({ pvbsCanceled: 1 });
  });

  it('an orphaned PVB that ignores the cancel: post hooks wait the bounded cancel wait, then run; the PVB is recorded as given up', async () => {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 120_000, ignoreCancel: true });
    await controller.start();
    const cancelWaitMs = 1_500;
    workers = startWorkers({ deps: failingAfterCreate(h.deps, { pvbCancelWaitMs: cancelWaitMs }), queues: ALL_QUEUES });
    await submit('stuck-1', opsSpec('stuck'));
    expect(await waitForBackupEnd(h.deps.state, 'stuck-1')).toBe('PartiallyFailed');
    const [pvb] = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=stuck-1` });
    expect(pvb?.spec.cancel).toBe(true);
    expect(pvb?.status?.phase).toBe('InProgress');
    const record = (await readFinishedBackup(h.deps.storage, 'stuck-1')).pvb(pvb?.metadata.name ?? '');
    const askedAt = record?.cancelAskedAt;
    expect(typeof askedAt).toBe('number');
    const posts = execsOf(h, 'ops', 'stuck-0', POST);
    expect(posts).toHaveLength(1);
    expect(Date.parse(posts[0]?.startedAt ?? '') - (askedAt as number)).toBeGreaterThanOrEqual(cancelWaitMs);
    const msgs = (await readFinishedBackup(h.deps.storage, 'stuck-1')).logs.filter((l) => l.level === 'error').map((l) => l.msg);
    expect(msgs.some((m) => m.includes('was asked to cancel') && m.includes('did not stop within'))).toBe(true);
    expect(await h.deps.state.counters('stuck-1')).toMatchObject({ pvbsTimedOut: 1 });
  });

  it('a PVB that ends before its block post-hooks job is parked: the post hooks follow at once, not after the poll cap, and the PVB is never read back', async () => {
    // The post-hooks job is parked the poll cap once its item-block child is done (the informer
    // promotes it when the block's PVBs end). Here the PVB ends right after its create, and the
    // informer has seen that before the job is parked: nothing would promote it for a minute.
    let running: RunningWorkers | undefined;
    const pvbs: PvbClient = Object.create(h.deps.pvbs);
    pvbs.createPvb = async (pvb) => {
      const res = await h.deps.pvbs.createPvb(pvb);
      const name = pvb.metadata.name;
      const now = new Date().toISOString();
      await h.pvbs.patchPvbStatus(name, {
        phase: 'Completed',
        startTimestamp: now,
        completionTimestamp: now,
        progress: { totalBytes: 1, bytesDone: 1 },
      });
      await waitFor('the informer to see the PVB end', async () =>
        running?.pipeline.runtime.hub?.cached(name)?.status?.phase === 'Completed' ? true : undefined,
      );
      return res;
    };
    const pollCapMs = 60_000;
    workers = running = startWorkers({
      deps: { ...h.deps, pvbs, config: { ...h.deps.config, pvbPollMaxMs: pollCapMs } },
      queues: ALL_QUEUES,
    });
    await waitFor('the informer to sync', async () => (running?.pipeline.runtime.hub?.healthy() ? true : undefined));
    h.sim.resetRequests();
    await submit('instant-1', opsSpec('instant'));
    expect(await waitForBackupEnd(h.deps.state, 'instant-1', 20_000)).toBe('Completed');
    const [pvb] = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=instant-1` });
    const posts = execsOf(h, 'ops', 'instant-0', POST);
    expect(posts).toHaveLength(1);
    const lagMs = Date.parse(posts[0]?.startedAt ?? '') - Date.parse(pvb?.status?.completionTimestamp ?? '');
    expect(lagMs).toBeGreaterThanOrEqual(0);
    expect(lagMs).toBeLessThan(pollCapMs / 4);
    // The create's answer was the last real read; the end came from the informer.
    expect(h.sim.requests().byResource['podvolumebackups.stowage.dev']?.get ?? 0).toBe(0);
  });

  it('a PVB that ends while its post-hooks job is looking at it: the job, parked again, is promoted at once, not after the poll cap', async () => {
    // The look reads the PVB InProgress; its end arrives (and every informer's promotion finds the
    // job running) before the job parks itself for the whole poll cap.
    const pollCapMs = 60_000;
    const name = 'midlook-1';
    let running: RunningWorkers | undefined;
    let endDuringLook: ((pvbName: string) => Promise<void>) | undefined;
    const state: BackupState = Object.create(h.deps.state);
    state.updatePvb = async (backup, pvb, patch) => {
      const hold = patch.phase === 'InProgress' ? endDuringLook : undefined;
      endDuringLook = undefined;
      await hold?.(pvb);
      return h.deps.state.updatePvb(backup, pvb, patch);
    };
    const hub = () => running?.pipeline.runtime.hub;
    const phaseInCache = (pvb: string, phase: string) => async () => (hub()?.cached(pvb)?.status?.phase === phase ? true : undefined);
    workers = running = startWorkers({
      deps: { ...h.deps, state, config: { ...h.deps.config, pvbPollMaxMs: pollCapMs } },
      queues: ALL_QUEUES,
    });
    await waitFor('the informer to sync', async () => (hub()?.healthy() ? true : undefined));
    await submit(name, opsSpec('midlook'));
    const [created] = await waitFor('the PVB', async () => {
      const found = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${name}` });
      return found.length > 0 ? found : undefined;
    });
    const pvb = created?.metadata.name ?? '';
    const hooksQueue = new Queue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    try {
      // The PVB names its block; the block's post-hooks job watches it.
      const jobId = postHooksJobId(name, created?.spec.tags?.block ?? '');
      await waitFor('the post-hooks job to be parked', async () =>
        (await hooksQueue.getJobState(jobId)) === 'delayed' ? true : undefined,
      );
      const now = new Date().toISOString();
      await h.pvbs.patchPvbStatus(pvb, { phase: 'InProgress', startTimestamp: now, progress: { totalBytes: 2, bytesDone: 1 } });
      await waitFor('the informer to see it start', phaseInCache(pvb, 'InProgress'));
      let endedAt = 0;
      endDuringLook = async (seen) => {
        endedAt = Date.now();
        await h.pvbs.patchPvbStatus(seen, {
          phase: 'Completed',
          completionTimestamp: new Date().toISOString(),
          progress: { totalBytes: 2, bytesDone: 2 },
        });
        await waitFor('the informer to see it end', phaseInCache(seen, 'Completed'));
        await new Promise((r) => setTimeout(r, 200)); // its promotion finds the job running
      };
      // Something wakes the job early (as a promotion does): its look reads InProgress.
      await new Job(hooksQueue, JobName.runPostHooks, {}, {}, jobId).promote();
      expect(await waitForBackupEnd(h.deps.state, name, 20_000)).toBe('Completed');
      expect(endedAt).toBeGreaterThan(0);
      const posts = execsOf(h, 'ops', 'midlook-0', POST);
      expect(posts).toHaveLength(1);
      expect(Date.parse(posts[0]?.startedAt ?? '') - endedAt).toBeLessThan(pollCapMs / 4);
    } finally {
      await hooksQueue.close();
    }
  });

  it('a block with two PVBs: its parked post-hooks job is not woken by the first end, and is promoted at once by the last', async () => {
    // No PVB controller: the test ends each PVB itself. A poll cap far beyond the test's waits, so
    // only a promotion can release the post hooks in time.
    const pollCapMs = 60_000;
    const name = 'pair-1';
    workers = startWorkers({ deps: { ...h.deps, config: { ...h.deps.config, pvbPollMaxMs: pollCapMs } }, queues: ALL_QUEUES });
    const running = workers;
    const hub = () => running.pipeline.runtime.hub;
    await waitFor('the informer to sync', async () => (hub()?.healthy() ? true : undefined));
    await submit(name, opsSpec('pair'));
    const pvbs = await waitFor('both PVBs', async () => {
      const found = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${name}` });
      return found.length === 2 ? found : undefined;
    });
    const [first, second] = pvbs.map((p) => p.metadata.name).sort();
    const block = pvbs[0]?.spec.tags?.block ?? '';
    expect(pvbs.every((p) => p.spec.tags?.block === block)).toBe(true);
    const hooksQueue = new Queue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    const end = async (pvb: string) => {
      const now = new Date().toISOString();
      await h.pvbs.patchPvbStatus(pvb, {
        phase: 'Completed',
        startTimestamp: now,
        completionTimestamp: now,
        progress: { totalBytes: 1, bytesDone: 1 },
      });
      await waitFor(`the informer to see ${pvb} end`, async () => (hub()?.cached(pvb)?.status?.phase === 'Completed' ? true : undefined));
      return Date.now();
    };
    try {
      const jobId = postHooksJobId(name, block);
      await waitFor('the post-hooks job to be parked', async () =>
        (await hooksQueue.getJobState(jobId)) === 'delayed' ? true : undefined,
      );
      await end(first ?? '');
      await new Promise((r) => setTimeout(r, 500));
      expect(await hooksQueue.getJobState(jobId)).toBe('delayed');
      expect(hub()?.promotions).toBe(0);
      expect(execsOf(h, 'ops', 'pair-0', POST)).toHaveLength(0);
      const lastEndedAt = await end(second ?? '');
      expect(await waitForBackupEnd(h.deps.state, name, 20_000)).toBe('Completed');
      expect(hub()?.promotions).toBe(1);
      const posts = execsOf(h, 'ops', 'pair-0', POST);
      expect(posts).toHaveLength(1);
      expect(Date.parse(posts[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(lastEndedAt - 1_000);
      expect(Date.parse(posts[0]?.startedAt ?? '') - lastEndedAt).toBeLessThan(pollCapMs / 4);
      expect(await h.deps.state.counters(name)).toMatchObject({ pvbsCompleted: 2 });
    } finally {
      await hooksQueue.close();
    }
  });

  it('a parked post-hooks job sleeps until its next real read is due where an informer will promote it, and only the poll cap where none will', async () => {
    // No PVB controller: the PVBs stay New until the test ends them, so each post-hooks job stays parked.
    const config = { ...h.deps.config, pvbPollMaxMs: 2_000, pvbRealReadEveryMs: 600_000 };
    const hooksQueue = new Queue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    const itemBlocksQueue = new Queue(QueueName.itemBlocks, { connection: h.redis, prefix: h.queuePrefix });
    // When the parked job wakes by its timer, from now (BullMQ scores a delayed job timestamp × 0x1000).
    const wakesInMs = async (jobId: string) => {
      const score = await h.redis.zscore(hooksQueue.toKey('delayed'), jobId);
      return score === null ? undefined : Math.floor(Number(score) / 0x1000) - Date.now();
    };
    const pvbsOf = (name: string) =>
      waitFor(`the PVBs of ${name}`, async () => {
        const found = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${name}` });
        return found.length === 2 ? found : undefined;
      });
    const blockOf = (pvbs: Awaited<ReturnType<typeof pvbsOf>>) => pvbs[0]?.spec.tags?.block ?? '';
    try {
      // Item-block jobs hosted where no informer runs (no hooks or pvb-watch queue in the process):
      // nothing here would promote the job when its PVBs end, so its park is cut to the poll cap.
      workers = startWorkers({ deps: { ...h.deps, config }, queues: [QueueName.backups, QueueName.itemBlocks] });
      expect(workers.pipeline.runtime.hub).toBeUndefined();
      await submit('park-bare-1', opsSpec('pair'));
      const barePvbs = await pvbsOf('park-bare-1');
      const bare = postHooksJobId('park-bare-1', blockOf(barePvbs));
      await waitFor('the park cut to the poll cap', async () => {
        const ms = await wakesInMs(bare);
        return ms !== undefined && ms <= 2_000 ? true : undefined;
      });
      await workers.close();

      // With a healthy informer in the process: parked until a real read of its PVBs is due.
      workers = startWorkers({ deps: { ...h.deps, config }, queues: ALL_QUEUES });
      const running = workers;
      await waitFor('the informer to sync', async () => (running.pipeline.runtime.hub?.healthy() ? true : undefined));
      await submit('park-watched-1', opsSpec('pair'));
      const watchedPvbs = await pvbsOf('park-watched-1');
      const block = blockOf(watchedPvbs);
      await waitFor('the item-block job to be done', async () =>
        (await itemBlocksQueue.getJobState(blockJobId('park-watched-1', block))) === 'completed' ? true : undefined,
      );
      await new Promise((r) => setTimeout(r, 300)); // what the job's 'completed' handler does is done
      expect(await wakesInMs(postHooksJobId('park-watched-1', block))).toBeGreaterThan(60_000);

      // Either way the PVBs' ends release the post hooks (the informer promotes both jobs).
      for (const pvb of [...barePvbs, ...watchedPvbs]) {
        const now = new Date().toISOString();
        await h.pvbs.patchPvbStatus(pvb.metadata.name, {
          phase: 'Completed',
          startTimestamp: now,
          completionTimestamp: now,
          progress: { totalBytes: 1, bytesDone: 1 },
        });
      }
      expect(await waitForBackupEnd(h.deps.state, 'park-bare-1', 20_000)).toBe('Completed');
      expect(await waitForBackupEnd(h.deps.state, 'park-watched-1', 20_000)).toBe('Completed');
    } finally {
      await hooksQueue.close();
      await itemBlocksQueue.close();
    }
  });

  it('a cancel asked while the item-block job creates its PVBs (before the post-hooks job is parked, so the cancel wakes nothing) is still seen at once', async () => {
    // No PVB controller, and a park far beyond the test's waits: only the item-block worker's own
    // check can wake the post-hooks job in time.
    const name = 'park-cxl-1';
    const postsBefore = execsOf(h, 'ops', 'pair-0', POST).length; // earlier tests back the same pod up
    const hooksQueue = new Queue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    const pvbs: PvbClient = Object.create(h.deps.pvbs);
    let canceled = false;
    pvbs.createPvb = async (pvb) => {
      const res = await h.deps.pvbs.createPvb(pvb);
      if (!canceled) {
        canceled = true;
        expect(await cancelBackup({ state: h.deps.state, hooksQueue }, name)).toMatchObject({ outcome: 'requested' });
      }
      return res;
    };
    try {
      await startLongParkingWorkers({ pvbs });
      await submit(name, opsSpec('pair'));
      await expectPvbsCanceledThenPostHook(name, postsBefore);
      expect(canceled).toBe(true);
    } finally {
      await hooksQueue.close();
    }
  });

  it('a cancel asked while a parked post-hooks job looks at its PVBs (after it read the flag, so the wake-up finds it running) is still seen at once, not at its next timer', async () => {
    // No PVB controller, and re-parks far beyond the test's waits: only the job's own look after
    // parking can bring the cancel to its PVBs in time.
    const name = 'park-cxl-2';
    const postsBefore = execsOf(h, 'ops', 'pair-0', POST).length; // earlier tests back the same pod up
    const hooksQueue = new Queue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    const state: BackupState = Object.create(h.deps.state);
    let armedFor: string | undefined;
    const canceledWhile: string[] = [];
    state.cancelRequestedAt = async (backupName) => {
      const read = await h.deps.state.cancelRequestedAt(backupName);
      if (armedFor !== undefined) {
        // The look has its answer (no cancel yet); the cancel comes now, before the job re-parks.
        canceledWhile.push(await hooksQueue.getJobState(armedFor));
        armedFor = undefined;
        expect(await cancelBackup({ state: h.deps.state, hooksQueue }, name)).toMatchObject({ outcome: 'requested' });
      }
      return read;
    };
    try {
      await startLongParkingWorkers({ state });
      const { jobId } = await submitPairParked(name);
      // The job wakes for a look, as its timer would make it.
      armedFor = jobId;
      expect(await promoteParked(hooksQueue, JobName.runPostHooks, jobId)).toBe(true);
      await expectPvbsCanceledThenPostHook(name, postsBefore);
      expect(canceledWhile).toEqual(['active']);
    } finally {
      await hooksQueue.close();
    }
  });

  it('a look for a cancel after parking that fails (a Redis blip) leaves the post-hooks job parked until its timer, with a warning; the PVB ends still release it', async () => {
    const name = 'park-cxl-3';
    const hooksQueue = new Queue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    const state: BackupState = Object.create(h.deps.state);
    let reads = 0;
    let armed = false;
    state.cancelRequestedAt = async (backupName) => {
      // The look's own read answers; the one after parking fails.
      if (armed && ++reads === 2) throw new Error('simulated Redis blip');
      return h.deps.state.cancelRequestedAt(backupName);
    };
    try {
      await startLongParkingWorkers({ state });
      const { created, jobId } = await submitPairParked(name);
      armed = true;
      expect(await promoteParked(hooksQueue, JobName.runPostHooks, jobId)).toBe(true);
      await waitFor('the warning', async () =>
        h.logs.some((l) => l.includes('could not look for a cancel after parking') && l.includes('simulated Redis blip'))
          ? true
          : undefined,
      );
      expect(reads).toBe(2);
      expect(await hooksQueue.getJobState(jobId)).toBe('delayed');
      for (const pvb of created) {
        const now = new Date().toISOString();
        await h.pvbs.patchPvbStatus(pvb.metadata.name, { phase: 'Completed', startTimestamp: now, completionTimestamp: now });
      }
      expect(await waitForBackupEnd(h.deps.state, name, 20_000)).toBe('Completed');
    } finally {
      await hooksQueue.close();
    }
  });

  it('volume policies and opt-out decide which PVBs exist, each skip recorded with its reason', async () => {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 100, perNodeConcurrency: 4 });
    await controller.start();
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES });
    const policy = { kind: 'Inline', volumePolicies: [{ conditions: { pvcLabels: { tier: 'bronze' } }, action: { type: 'skip' } }] };
    await submit('pol-1', opsSpec('pol', { defaultVolumesToFsBackup: true, resourcePolicy: policy }));
    expect(await waitForBackupEnd(h.deps.state, 'pol-1')).toBe('Completed');
    const pvbs = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=pol-1` });
    const uid = uidOf(objects, 'pol-0');
    expect(pvbs.map((p) => p.metadata.name).sort()).toEqual([pvbName('pol-1', uid, 'gold'), pvbName('pol-1', uid, 'tmp')].sort());
    const msgs = (await readFinishedBackup(h.deps.storage, 'pol-1')).logs.map((l) => l.msg);
    expect(msgs).toContain('skipped pods/ops/pol-0 volume cold: volume policy #1 says skip');
    expect(msgs).toContain('skipped pods/ops/pol-0 volume skipme: listed in backup.velero.io/backup-volumes-excludes');
    const plan = (await readFinishedBackup(h.deps.storage, 'pol-1')).blocks[0]?.plan as BlockPlan | undefined;
    expect(plan?.skips.map((s) => s.what).sort()).toEqual(['pods/ops/pol-0 volume cold', 'pods/ops/pol-0 volume skipme']);
  });

  it('a resource policy from a ConfigMap (a YAML document, as Velero stores it) decides like the inline one; a broken one fails validation, saying why', async () => {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 100, perNodeConcurrency: 4 });
    await controller.start();
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES });
    await submit(
      'pol-cm-1',
      opsSpec('pol', { defaultVolumesToFsBackup: true, resourcePolicy: { kind: 'ConfigMap', name: 'bronze-skip' } }),
    );
    expect(await waitForBackupEnd(h.deps.state, 'pol-cm-1')).toBe('Completed');
    const uid = uidOf(objects, 'pol-0');
    const pvbs = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=pol-cm-1` });
    expect(pvbs.map((p) => p.metadata.name).sort()).toEqual([pvbName('pol-cm-1', uid, 'gold'), pvbName('pol-cm-1', uid, 'tmp')].sort());
    expect((await readFinishedBackup(h.deps.storage, 'pol-cm-1')).logs.map((l) => l.msg)).toContain(
      'skipped pods/ops/pol-0 volume cold: volume policy #1 says skip',
    );

    await submit(
      'pol-cm-2',
      opsSpec('pol', { defaultVolumesToFsBackup: true, resourcePolicy: { kind: 'ConfigMap', name: 'broken-policy' } }),
    );
    expect(await waitForBackupEnd(h.deps.state, 'pol-cm-2')).toBe('FailedValidation');
    const record = await h.deps.state.getBackup('pol-cm-2');
    expect(record?.failureReason).toMatch(/^resource policy ConfigMap broken-policy, key policy\.yaml: not a YAML document: /);
    expect(await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=pol-cm-2` })).toHaveLength(0);
  });

  it('a block job delivered twice creates no second PVB and writes no item twice', async () => {
    // Long enough that the duplicate arrives while the PVB is still running.
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 2_000 });
    await controller.start();
    // No hooks queue yet: the backup stays open while the block job is delivered again.
    workers = startWorkers({ deps: h.deps, queues: [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch] });
    const name = 'dup-1';
    await submit(name, opsSpec('dupe'));
    const [blockId] = await waitFor('the block to be planned', async () => {
      const ids = await h.deps.state.blockIds(name);
      return ids.length > 0 ? ids : undefined;
    });
    const blockQueue = new Queue(QueueName.itemBlocks, { connection: h.redis, prefix: h.queuePrefix });
    try {
      const job = await waitFor('the block job to complete', async () => {
        const j = await blockQueue.getJob(blockJobId(name, blockId ?? ''));
        return j && (await j.isCompleted()) ? j : undefined;
      });
      // Every planned item written (the Namespace object is a block of its own, planned last).
      await waitFor('every item to be written', async () => {
        const c = await h.deps.state.counters(name);
        const planned = (await h.deps.state.getBackup(name))?.planCompletedAt !== undefined;
        return planned && c.itemsBackedUp === c.totalItems ? true : undefined;
      });
      const before = { counters: await h.deps.state.counters(name), staged: await stagedItemPaths(h.deps.storage, name) };
      const creates = () => h.sim.requests().byResource['podvolumebackups.stowage.dev']?.create ?? 0;
      const createsBefore = creates();

      const again = await workers.pipeline.processorFor(QueueName.itemBlocks)(job, undefined);
      expect(again).toMatchObject({ failedPods: [], pvbs: [pvbName(name, uidOf(objects, 'dupe-0'), 'data')] });
      expect(creates()).toBe(createsBefore + 1); // asked again, answered 409
      expect(await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${name}` })).toHaveLength(1);
      expect(await stagedItemPaths(h.deps.storage, name)).toEqual(before.staged);
      const after = await h.deps.state.counters(name);
      expect(after.itemsBackedUp).toBe(before.counters.itemsBackedUp);
      // Nothing watches it before the hooks queue runs (its post-hooks job does): its object ends.
      await waitFor('the PVB to complete', async () =>
        (await h.pvbs.getPvb(pvbName(name, uidOf(objects, 'dupe-0'), 'data')))?.status?.phase === 'Completed' ? true : undefined,
      );
      // The re-run re-ran the pre hook (at-least-once) and counted it once.
      expect(execsOf(h, 'ops', 'dupe-0', PRE)).toHaveLength(2);
      expect(after.hooksAttempted).toBe(before.counters.hooksAttempted);
    } finally {
      await blockQueue.close();
    }
    await workers.close();
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES });
    expect(await waitForBackupEnd(h.deps.state, name)).toBe('Completed');
    const entries = tarballEntries(h.storageDir, name);
    expect(entries.filter((e) => e === 'resources/pods/namespaces/ops/dupe-0.json')).toHaveLength(1);
    expect(execsOf(h, 'ops', 'dupe-0', POST)).toHaveLength(1);
  });

  it('cancel: outstanding PVBs get spec.cancel, blocks not started skip, started ones still run post hooks; Canceled', async () => {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 120_000, perNodeConcurrency: 4 });
    await controller.start();
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES, concurrency: { itemBlocks: 1 } });
    const name = 'cxl-1';
    await submit(name, opsSpec('cxl'));
    await waitFor('the first PVB', async () => ((await h.deps.state.allPvbNames(name)).length > 0 ? true : undefined));
    // A post-hooks job parked while its PVBs copy (the informer promotes it when they end; the
    // cancel changes no PVB): the cancel itself wakes it, so the PVBs are asked to stop now, not at
    // the job's timer.
    const hooksQueue = new Queue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    try {
      const parked = await waitFor('a post-hooks job of the backup parked', async () => {
        const ids = await hooksQueue.getRanges(['delayed'], 0, -1, true);
        return ids.find((id) => isPostHooksJobIdOf(name, id));
      });
      const canceledAt = Date.now();
      expect(await cancelBackup({ state: h.deps.state, hooksQueue }, name)).toEqual({ outcome: 'requested', phase: 'InProgress' });
      // Woken: no longer parked, or already ran again (and parked anew, watching its PVBs stop).
      const woken = await hooksQueue.getJob(parked);
      const state = await hooksQueue.getJobState(parked);
      expect(state !== 'delayed' || (woken?.processedOn ?? 0) >= canceledAt).toBe(true);
      expect(await cancelBackup({ state: h.deps.state, hooksQueue }, name)).toEqual({ outcome: 'already-requested', phase: 'InProgress' });
    } finally {
      await hooksQueue.close();
    }
    expect(await waitForBackupEnd(h.deps.state, name)).toBe('Canceled');

    const pvbs = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${name}` });
    expect(pvbs.length).toBeGreaterThanOrEqual(1);
    for (const p of pvbs) expect(p).toMatchObject({ spec: { cancel: true }, status: { phase: 'Canceled' } });
    // Blocks that started still ran their post hooks (after their PVBs stopped); blocks that had
    // not started when the cancel came did nothing at all.
    const finished = await readFinishedBackup(h.deps.storage, name);
    const blockIds = finished.blocks.map((b) => b.id);
    const blocks = finished.blocks.map((b) => b.block);
    const plans = finished.blocks.map((b) => b.plan as BlockPlan | undefined);
    const podOf = (i: number) => plans[i]?.pods[0]?.name ?? '';
    const canceled = blockIds.map((_, i) => i).filter((i) => blocks[i]?.state === 'Canceled');
    const started = blockIds.map((_, i) => i).filter((i) => blocks[i]?.state !== 'Canceled');
    expect(canceled.length).toBeGreaterThanOrEqual(1);
    expect(started.length).toBeGreaterThanOrEqual(1);
    for (const i of canceled) expect(h.sim.execLog({ namespace: 'ops', pod: podOf(i) })).toEqual([]);
    for (const i of started) expect(execsOf(h, 'ops', podOf(i), POST)).toHaveLength(1);
    for (const i of started) {
      const own = pvbs.filter((p) => blocks[i]?.pvbs?.includes(p.metadata.name));
      for (const p of own) {
        expect(Date.parse(execsOf(h, 'ops', podOf(i), POST)[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(
          Date.parse(p.status?.completionTimestamp ?? ''),
        );
      }
    }
    expect(await cancelBackup({ state: h.deps.state }, name)).toEqual({ outcome: 'already-ended', phase: 'Canceled' });
    expect(await cancelBackup({ state: h.deps.state }, 'no-such-backup')).toEqual({ outcome: 'not-found' });
  });

  it('a job whose payload fails its schema fails at once, with the reason', async () => {
    workers = startWorkers({ deps: h.deps, queues: [QueueName.itemBlocks] });
    const queue = new Queue(QueueName.itemBlocks, { connection: h.redis, prefix: h.queuePrefix });
    try {
      const job = await queue.add(JobName.backupItemBlock, { backupName: 'x' }, { jobId: 'bad-payload', attempts: 5 });
      const failed = await waitFor('the job to fail', async () => ((await job.isFailed()) ? await queue.getJob('bad-payload') : undefined));
      expect(failed?.attemptsMade).toBe(1);
      expect(failed?.failedReason).toContain('QUEUE_BAD_PAYLOAD');
      expect(failed?.failedReason).toContain('blockId');
    } finally {
      await queue.close();
    }
  });
});
