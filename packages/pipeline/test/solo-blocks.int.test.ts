import { execFileSync } from 'node:child_process';
import { readdir, rm, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { blockJobId, postHooksJobId } from '@stowage/core';
import type { BlockPlan, PipelineDeps, RunningWorkers } from '@stowage/pipeline';
import { startWorkers, submitBackup } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { type BackupStorage, stagedItemPaths } from '@stowage/storage';
import { useTestRedis } from '@stowage/testing';
import { Queue, UnrecoverableError } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readFinishedBackup } from './support/finished-backup.js';
import { backupSpec, configMap, namespace, node, pod } from './support/fixtures.js';
import { type Harness, startHarness, waitForBackupEnd } from './support/harness.js';
import { tarballEntries } from './support/inspect.js';

const POST = ['/bin/post'];
const objects: unknown[] = [
  namespace('shop'),
  node('node-a'),
  configMap('settings'),
  pod({ name: 'plain-0' }),
  pod({ name: 'plain-1' }),
  pod({ name: 'hooked-0', annotations: { 'post.hook.backup.velero.io/command': JSON.stringify(POST) } }),
];
const WORKER_QUEUES = [QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks];

/** Storage whose calls can be intercepted (the rest is the harness' filesystem storage). */
function storageWith(base: BackupStorage, over: Partial<BackupStorage>): BackupStorage {
  return {
    putObject: over.putObject ?? ((k, d, o) => base.putObject(k, d, o)),
    putStream: over.putStream ?? ((k, b) => base.putStream(k, b)),
    getObject: over.getObject ?? ((k) => base.getObject(k)),
    exists: over.exists ?? ((k) => base.exists(k)),
    list: over.list ?? ((p) => base.list(p)),
    deletePrefix: over.deletePrefix ?? ((p) => base.deletePrefix(p)),
  };
}

describe('solo blocks (no fs-backup volume, no post hook): one job, straight under finalize', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  const running: RunningWorkers[] = [];

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: ['node-a'] });
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((w) => w.close()));
  });
  afterAll(async () => {
    await h?.close();
    await redisHandle?.stop();
  });

  const submit = (name: string) =>
    submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name, spec: backupSpec() });
  const start = (deps: PipelineDeps, queues: Parameters<typeof startWorkers>[0]['queues']) => {
    running.push(startWorkers({ deps, queues }));
  };
  /** A finished backup's block ids by the name of their first pod. */
  const blocksByPod = async (name: string) => {
    const out = new Map<string, string>();
    for (const { id, plan } of (await readFinishedBackup(h.deps.storage, name)).blocks) {
      out.set((plan as BlockPlan | undefined)?.pods[0]?.name ?? `(no pod) ${id}`, id);
    }
    return out;
  };
  const finishedBlock = async (name: string, id: string) =>
    (await readFinishedBackup(h.deps.storage, name)).blocks.find((b) => b.id === id)?.block;

  it('a hook-less, volume-less pod gets no post-hooks job; its block ends Completed with block.done; a pod with a post hook keeps the pair', async () => {
    start(h.deps, [QueueName.backups, ...WORKER_QUEUES]);
    await submit('solo-1');
    expect(await waitForBackupEnd(h.deps.state, 'solo-1')).toBe('Completed');

    const blocks = await blocksByPod('solo-1');
    const itemBlocks = new Queue(QueueName.itemBlocks, { connection: h.redis, prefix: h.queuePrefix });
    const hooks = new Queue(QueueName.hooks, { connection: h.redis, prefix: h.queuePrefix });
    try {
      for (const podName of ['plain-0', 'plain-1']) {
        const id = blocks.get(podName) as string;
        const job = await itemBlocks.getJob(blockJobId('solo-1', id));
        expect(job?.data.solo).toBe(true);
        expect(job?.parentKey).toBe(`${h.queuePrefix}:${QueueName.backups}:solo-1.finalize`);
        expect(await hooks.getJob(postHooksJobId('solo-1', id))).toBeUndefined();
        expect((await finishedBlock('solo-1', id))?.state).toBe('Completed');
      }
      const hookedId = blocks.get('hooked-0') as string;
      expect((await itemBlocks.getJob(blockJobId('solo-1', hookedId)))?.data.solo).toBeUndefined();
      expect(await hooks.getJob(postHooksJobId('solo-1', hookedId))).toBeDefined();
      expect(h.sim.execLog({ namespace: 'shop', pod: 'hooked-0' }).filter((e) => e.command.join(' ') === POST.join(' '))).toHaveLength(1);
    } finally {
      await Promise.all([itemBlocks.close(), hooks.close()]);
    }

    const counters = await h.deps.state.counters('solo-1');
    expect(counters.blocksDone).toBe(counters.blocksPlanned);
    expect(counters.itemsBackedUp).toBe(counters.totalItems);
    const { events } = await readFinishedBackup(h.deps.storage, 'solo-1');
    const done = events.filter((e) => e.type === 'block.done').map((e) => e.data.blockId);
    expect(new Set(done)).toEqual(new Set(blocks.values()));
    expect(done).toHaveLength(blocks.size);
    expect(tarballEntries(h.storageDir, 'solo-1')).toEqual(
      expect.arrayContaining([
        'resources/pods/namespaces/shop/plain-0.json',
        'resources/pods/namespaces/shop/plain-1.json',
        'resources/configmaps/namespaces/shop/settings.json',
      ]),
    );
  });

  it('staged items lost or cut by a machine crash (segments are written without fsync) are staged again by finalize, never packed cut', async () => {
    start(h.deps, WORKER_QUEUES);
    // finalize's storage: when it first lists the staged items, the newest segment is cut in the
    // middle of a line and the oldest is gone — what unflushed writes can look like after a power loss.
    let damaged = false;
    const damaging = storageWith(h.deps.storage, {
      async list(prefix) {
        if (!damaged && prefix.includes('/items/')) {
          damaged = true;
          expect(await stagedItemPaths(h.deps.storage, 'lost-1')).toEqual(
            expect.arrayContaining([
              'pods/namespaces/shop/hooked-0.json',
              'pods/namespaces/shop/plain-0.json',
              'pods/namespaces/shop/plain-1.json',
            ]),
          );
          const dir = join(h.storageDir, 'backups', 'lost-1', 'items');
          const segments = (await readdir(dir)).filter((f) => f.endsWith('.jsonl')).sort();
          const newest = join(dir, segments.at(-1) ?? '');
          await truncate(newest, Math.floor((await stat(newest)).size / 2));
          if (segments.length > 1) await rm(join(dir, segments[0] ?? ''));
        }
        return h.deps.storage.list(prefix);
      },
    });
    start({ ...h.deps, storage: damaging }, [QueueName.backups]);
    await submit('lost-1');
    expect(await waitForBackupEnd(h.deps.state, 'lost-1')).toBe('Completed');
    expect(damaged).toBe(true);

    const tarball = join(h.storageDir, 'backups', 'lost-1', 'lost-1.tar.gz');
    for (const name of ['plain-0', 'plain-1']) {
      const text = execFileSync('tar', ['-xzOf', tarball, `resources/pods/namespaces/shop/${name}.json`], { encoding: 'utf8' });
      expect((JSON.parse(text) as { metadata: { name: string } }).metadata.name).toBe(name);
    }
    const warns = (await readFinishedBackup(h.deps.storage, 'lost-1')).logs.filter((l) => l.level === 'warn').map((l) => l.msg);
    expect(warns.some((m) => m.startsWith('staged items not whole'))).toBe(true);
  });

  it('a solo block whose job fails for good: finalize ends the block PartiallyFailed and counts it done, with the reason', async () => {
    const failing = storageWith(h.deps.storage, {
      async putObject(key, data, opts) {
        // The segment holding plain-1 (staged alone once a shared segment is refused).
        if (data.toString().includes('/plain-1.json')) throw new UnrecoverableError('injected: disk refused plain-1');
        return h.deps.storage.putObject(key, data, opts);
      },
    });
    start({ ...h.deps, storage: failing }, WORKER_QUEUES);
    start(h.deps, [QueueName.backups]);
    await submit('fail-1');
    expect(await waitForBackupEnd(h.deps.state, 'fail-1')).toBe('PartiallyFailed');

    const id = (await blocksByPod('fail-1')).get('plain-1') as string;
    const block = await finishedBlock('fail-1', id);
    expect(block?.state).toBe('PartiallyFailed');
    const counters = await h.deps.state.counters('fail-1');
    expect(counters.blocksDone).toBe(counters.blocksPlanned);
    expect(counters.errors).toBe(1);
    const errors = (await readFinishedBackup(h.deps.storage, 'fail-1')).logs.filter((l) => l.level === 'error').map((l) => l.msg);
    expect(errors).toEqual([`item-block job of ${id} failed: injected: disk refused plain-1`]);
  });
});
