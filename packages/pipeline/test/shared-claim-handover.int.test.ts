import { pvbName } from '@stowage/core';
import { pvbLabels } from '@stowage/kube';
import type { BlockPlan, RunningWorkers } from '@stowage/pipeline';
import { startWorkers, submitBackup } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { useTestRedis } from '@stowage/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readFinishedBackup } from './support/finished-backup.js';
import { backupSpec, namespace, node, pod, pvc } from './support/fixtures.js';
import { type Harness, startHarness, waitForBackupEnd } from './support/harness.js';
import { sidecar } from './support/inspect.js';
import { TestPvbController } from './support/test-pvb-controller.js';

/*
 * Two pods of one block mount one PVC; the pod that took the claim at plan time fails its pre
 * hook with onError: Fail. The PVC must still be backed up, through the pod that survives — or,
 * when no pod that mounts it survives, be reported as an error naming it.
 */

const ALL_QUEUES = [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks];
const PRE = ['/bin/pre'];
const POST = ['/bin/post'];

const hooked = (failPre: boolean) => ({
  annotations: {
    'pre.hook.backup.velero.io/command': JSON.stringify(PRE),
    'pre.hook.backup.velero.io/on-error': 'Fail',
    'post.hook.backup.velero.io/command': JSON.stringify(POST),
    'backup.velero.io/backup-volumes': 'data',
  },
  ...(failPre ? { exec: { '*': { rules: [{ command: PRE, exitCode: 1, stderr: 'freeze failed' }] } } } : {}),
});
const mountsClaim = (claimName: string) => [{ name: 'data', persistentVolumeClaim: { claimName } }];

const objects: unknown[] = [
  namespace('stowage'),
  node('node-a'),
  // share-a takes the claim at plan time (pods are decided in key order) and fails its pre hook.
  namespace('share'),
  pvc('shared', 'share'),
  pod({ name: 'share-a', namespace: 'share', volumes: mountsClaim('shared'), ...hooked(true) }),
  pod({ name: 'share-b', namespace: 'share', volumes: mountsClaim('shared'), ...hooked(false) }),
  // Every pod that mounts the claim fails its pre hook.
  namespace('lost'),
  pvc('orphaned', 'lost'),
  pod({ name: 'lost-a', namespace: 'lost', volumes: mountsClaim('orphaned'), ...hooked(true) }),
  pod({ name: 'lost-b', namespace: 'lost', volumes: mountsClaim('orphaned'), ...hooked(true) }),
];

function uidOf(name: string): string {
  const found = objects.find(
    (o) => (o as { kind: string; metadata: { name: string } }).metadata.name === name && (o as { kind: string }).kind === 'Pod',
  );
  return (found as { metadata: { uid: string } }).metadata.uid;
}

describe('a shared PVC whose claiming pod fails its pre hook (real workers, simulator, redis)', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;
  let controller: TestPvbController | undefined;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: ['node-a'] });
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

  const submit = (name: string, ns: string) =>
    submitBackup(
      { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
      { name, spec: backupSpec({ includedNamespaces: [ns] }) },
    );
  const execs = (ns: string, podName: string, command: string[]) =>
    h.sim.execLog({ namespace: ns, pod: podName }).filter((e) => e.command.join(' ') === command.join(' '));

  it('the claim goes to the surviving pod: its PVB exists and completes, its post hook runs after it', async () => {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 300 });
    await controller.start();
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES });
    const name = 'handover-1';
    await submit(name, 'share');
    expect(await waitForBackupEnd(h.deps.state, name)).toBe('PartiallyFailed');

    // The plan gave the claim to share-a (the situation of the defect). Read back from storage: a
    // finished backup's plan and log live there, not in Redis.
    const finished = await readFinishedBackup(h.deps.storage, name);
    const plan = finished.blocks.find((b) => b.pods.includes('share/share-a'))?.plan as BlockPlan | undefined;
    expect(plan?.pods.map((p) => [p.name, p.volumes[0]?.action])).toEqual([
      ['share-a', 'fs-backup'],
      ['share-b', 'skip'],
    ]);

    const pvbs = await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${name}` });
    expect(pvbs.map((p) => p.metadata.name)).toEqual([pvbName(name, uidOf('share-b'), 'data')]);
    expect(pvbs[0]?.spec.pod.name).toBe('share-b');
    expect(pvbs[0]?.status?.phase).toBe('Completed');

    // share-b's post hook ran once, after its PVB completed; share-a is not backed up at all.
    const posts = execs('share', 'share-b', POST);
    expect(posts).toHaveLength(1);
    expect(Date.parse(posts[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(pvbs[0]?.status?.completionTimestamp ?? ''));
    expect(execs('share', 'share-a', POST)).toEqual([]);

    // The log says what happened to the PVC; the only error is share-a's hook.
    const logs = finished.logs;
    expect(
      logs.some((l) => l.msg.includes('PVC share/shared is backed up through pod share/share-b') && l.msg.includes('share/share-a')),
    ).toBe(true);
    const errors = logs.filter((l) => l.level === 'error').map((l) => l.msg);
    expect(errors.length).toBeGreaterThan(0);
    for (const m of errors) expect(m).toContain('share/share-a');
    expect(errors.some((m) => m.includes('PVC'))).toBe(false);
    expect(await h.deps.state.counters(name)).toMatchObject({ pvbsCompleted: 1 });
  });

  it('no pod that mounts the claim survives: a recorded error names the PVC and why', async () => {
    controller = new TestPvbController({ pvbs: h.pvbs, durationMs: 100 });
    await controller.start();
    workers = startWorkers({ deps: h.deps, queues: ALL_QUEUES });
    const name = 'handover-2';
    await submit(name, 'lost');
    expect(await waitForBackupEnd(h.deps.state, name)).toBe('PartiallyFailed');
    expect(await h.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${name}` })).toEqual([]);

    const errors = (await readFinishedBackup(h.deps.storage, name)).logs.filter((l) => l.level === 'error').map((l) => l.msg);
    const lost = errors.filter((m) => m.startsWith('PVC lost/orphaned not backed up'));
    expect(lost).toHaveLength(1);
    expect(lost[0]).toContain('lost/lost-a');
    expect(lost[0]).toContain('lost/lost-b');
    expect(lost[0]).toContain('pre hook');
    expect((await h.deps.state.counters(name)).errors).toBe(errors.length);
    const results = await sidecar<{ errors: { namespaces?: Record<string, string[]> } }>(h.deps.storage, name, '-results.gz');
    expect(results.errors.namespaces?.lost?.some((m) => m.startsWith('PVC lost/orphaned not backed up'))).toBe(true);
  });
});
