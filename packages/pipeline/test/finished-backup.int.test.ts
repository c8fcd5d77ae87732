import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PipelineDeps, RunningWorkers } from '@stowage/pipeline';
import { BackupState, PipelineErrorCode, readLiveBlocks, startWorkers, submitBackup, writeBackupArchive } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { backupLayout, FileSystemStorage } from '@stowage/storage';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackupArchiveReader } from '../src/state/backup-archive.js';
import { storageFailingWrites } from './support/failing-storage.js';
import { readFinishedBackup } from './support/finished-backup.js';
import { backupSpec, configMap, namespace, node, pod } from './support/fixtures.js';
import { type Harness, startHarness, waitForBackupEnd } from './support/harness.js';

const POST = ['/bin/post'];
const objects: unknown[] = [
  namespace('shop'),
  node('node-a'),
  configMap('settings'),
  pod({ name: 'plain-0' }),
  pod({ name: 'hooked-0', annotations: { 'post.hook.backup.velero.io/command': JSON.stringify(POST) } }),
];
const ALL_QUEUES = [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks];

describe('a finished backup in storage (finalize writes it, then Redis drops all but the catalogue entry)', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: ['node-a'] });
  });
  afterAll(async () => {
    await workers?.close();
    await h?.close();
    await redisHandle?.stop();
  });

  it('finalize cut off before its final write runs again and finishes: marker last, nothing lost, the terminal event once, Redis keeps only rec, cnt and the dropped once-set', async () => {
    const storage = storageFailingWrites(h.deps.storage, '/velero-backup.json', 1);
    const deps: PipelineDeps = { ...h.deps, storage };
    workers = startWorkers({ deps, queues: ALL_QUEUES });
    await submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name: 'cut-1', spec: backupSpec() });
    expect(await waitForBackupEnd(h.deps.state, 'cut-1')).toBe('Completed');
    expect(storage.failed()).toBe(1);

    const finished = await readFinishedBackup(h.deps.storage, 'cut-1');
    expect(JSON.parse(String(await h.deps.storage.getObject(backupLayout('cut-1').metadata))).status.phase).toBe('Completed');
    expect(finished.manifest.record.phase).toBe('Completed');
    const terminal = finished.events.filter((e) => e.type === 'backup.phase' && e.data.to === 'Completed');
    expect(terminal).toHaveLength(1);
    expect(finished.events.at(-1)).toEqual(terminal[0]);
    expect(finished.blocks.map((b) => b.block?.state)).toEqual(finished.blocks.map(() => 'Completed'));
    expect(finished.blocks.flatMap((b) => b.hookRuns).map((r) => [r.podName, r.phase, r.outcome])).toEqual([
      ['hooked-0', 'post', 'exited'],
    ]);
    expect(finished.logs.length).toBe(finished.manifest.logLines);

    const keys = (await h.redis.keys(`${h.deps.state.prefix}:bk:{cut-1}:*`)).map((k) => k.split(':').at(-1)).sort();
    expect(keys).toEqual(['cnt', 'once', 'rec']);
    const rec = await h.deps.state.getBackup('cut-1');
    expect(rec).toMatchObject({ phase: 'Completed', pvbPhases: {} });
    expect(rec?.archivedAt).toBeGreaterThan(0);
  });
});

describe('what stays of a finished backup: its archive, page by page, and in Redis the catalogue entry', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let redis: Redis;
  let dir: string;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    redis = new Redis(redisHandle.url);
    dir = await mkdtemp(join(tmpdir(), 'stowage-archive-'));
  });
  afterAll(async () => {
    await redis?.quit();
    await redisHandle?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('counts after finalize dropped the live state (a stalled duplicate of a finished job) are refused with a clear error: the archived counters stay, no block state comes back; deleting the backup removes every key', async () => {
    const state = new BackupState({ redis, prefix: uniquePrefix() });
    const name = 'late-1';
    const keysLeft = async () => (await redis.keys(`${state.prefix}:bk:{${name}}:*`)).map((k) => k.split(':').at(-1)).sort();
    await state.createBackup({ name, uid: 'u', spec: {}, phase: 'InProgress', createdAt: 1 });
    await state.putBlockPlans(name, [{ id: 'blk-0', plan: { id: 'blk-0', pods: [], items: [], skips: [] }, items: [] }]);
    const itemStep = { set: { state: 'Completed' }, once: [{ onceKey: 'item:pods/ns/p-0', field: 'itemsBackedUp' }] };
    expect(await state.blockStep(name, 'blk-0', itemStep)).toBe(1);
    await state.transitionPhase(name, ['InProgress'], 'Completed', { completedAt: 9 });
    await state.updateBackup(name, { archivedAt: 10 });
    await state.dropInFlightState(name);
    const archived = await state.counters(name);
    expect(archived).toMatchObject({ itemsBackedUp: 1 });
    expect(await keysLeft()).toEqual(['cnt', 'once', 'rec']);

    // The duplicate's writes, as its job would make them: each refused, nothing counted twice.
    const refused = { code: PipelineErrorCode.runArchived };
    await expect(
      state.blockStep(name, 'blk-0', { ...itemStep, once: [{ onceKey: 'item:pods/ns/p-1', field: 'itemsBackedUp' }] }),
    ).rejects.toMatchObject(refused);
    await expect(state.countOnce(name, 'item:pods/ns/p-2', 'itemsBackedUp')).rejects.toMatchObject(refused);
    await expect(state.countOnceMany(name, [{ onceKey: 'item:pods/ns/p-3', field: 'itemsBackedUp' }])).rejects.toMatchObject(refused);
    await expect(state.recordProblem(name, { level: 'error', onceKey: 'late', msg: 'late' })).rejects.toMatchObject(refused);
    expect(await state.counters(name)).toEqual(archived);
    expect(await keysLeft()).toEqual(['cnt', 'once', 'rec']);

    // A re-run of finalize's drop is harmless; deleting the backup leaves nothing.
    await state.dropInFlightState(name);
    expect(await keysLeft()).toEqual(['cnt', 'once', 'rec']);
    await state.deleteBackup(name);
    expect(await keysLeft()).toEqual([]);
  });

  it('reads any block range and any event suffix back exactly as the live state had them, page by page', async () => {
    const state = new BackupState({ redis, prefix: uniquePrefix() });
    const storage = new FileSystemStorage(dir);
    const name = 'big-1';
    await state.createBackup({ name, uid: 'u', spec: {}, phase: 'InProgress', createdAt: 1 });
    const blocks = Array.from({ length: 457 }, (_, i) => ({
      id: `blk-${String(i).padStart(4, '0')}`,
      plan: { id: `blk-${i}`, pods: [{ namespace: 'ns', name: `p-${i}` }], items: [{ key: `pods/ns/p-${i}` }], skips: [] },
      items: [{}],
    }));
    await state.putBlockPlans(name, blocks);
    await state.setCounter(name, 'totalItems', blocks.length);
    for (const [i, b] of blocks.entries()) {
      const pvb = `pvb-${i}`;
      await state.updateBlock(name, b.id, { state: 'Completed', startedAt: i, completedAt: i + 1, pvbs: i % 3 === 0 ? [pvb] : [] });
      if (i % 3 === 0) await state.updatePvb(name, pvb, { blockId: b.id, phase: i % 2 ? 'Failed' : 'Completed', node: 'n', volume: 'v' });
      if (i % 5 === 0) {
        await state.recordHookRun(name, {
          blockId: b.id,
          podNamespace: 'ns',
          podName: `p-${i}`,
          container: 'c',
          phase: 'pre',
          source: 'annotation',
          index: 0,
          command: ['true'],
          outcome: 'exited',
          exitCode: 0,
        });
      }
    }
    for (let i = 0; i < 4_321; i++) await state.appendEvent(name, 'plan.progress', { i });
    await state.log(name, { level: 'warn', msg: 'a warning', namespace: 'ns' });
    await state.transitionPhase(name, ['InProgress'], 'Completed', { completedAt: 9 });
    const record = (await state.getBackup(name))!;

    const live = await readLiveBlocks(state, name, 0, 1_000);
    const liveEvents = await state.readEvents(name, '0', { count: 10_000 });
    const first = await writeBackupArchive(storage, state, record);
    // Written twice (finalize re-delivered): the same archive, in a generation of its own.
    const manifest = (await writeBackupArchive(storage, state, record))!;
    expect(manifest).toEqual({ ...first, generation: manifest.generation });
    expect(manifest.generation).not.toBe(first?.generation);
    expect(manifest.blocks).toEqual({ count: 457, perPage: 200, pages: 3 });
    expect(manifest.pvbPhases).toEqual({ Completed: 77, Failed: 76 });
    expect(manifest.events.count).toBe(liveEvents.length);
    expect(manifest.counters).toEqual({ totalItems: 457 });

    const reader = new BackupArchiveReader(storage);
    expect(await reader.manifest(name)).toEqual(manifest);
    for (const [offset, limit] of [
      [0, 1],
      [0, 457],
      [199, 2],
      [190, 230],
      [400, 500],
      [457, 10],
    ] as const) {
      expect(await reader.blocks(manifest, offset, limit), `${offset}+${limit}`).toEqual(live.slice(offset, offset + limit));
    }
    for (const after of ['0', liveEvents[0]!.id, liveEvents[1_999]!.id, liveEvents[2_000]!.id, liveEvents.at(-1)!.id]) {
      const got = [];
      for await (const segment of reader.events(manifest, after)) got.push(...segment);
      const from = after === '0' ? 0 : liveEvents.findIndex((e) => e.id === after) + 1;
      expect(got, `after ${after}`).toEqual(liveEvents.slice(from));
    }
    expect((await reader.logs(name)).map((l) => l.msg)).toEqual(['a warning']);

    await state.updateBackup(name, { archivedAt: 10 });
    await state.dropInFlightState(name);
    const left = (await redis.keys(`${state.prefix}:bk:{${name}}:*`)).map((k) => k.split(':').at(-1)).sort();
    expect(left).toEqual(['cnt', 'once', 'rec']);

    // A late run of finalize (stalled, still going after another run archived and dropped the
    // live state under its reads) writes no manifest: the archive still reads whole.
    expect(await writeBackupArchive(storage, state, record)).toBeUndefined();
    expect(await reader.manifest(name)).toEqual(manifest);
    expect(await reader.blocks(manifest, 0, 457)).toEqual(live);
  }, 60_000);
});
