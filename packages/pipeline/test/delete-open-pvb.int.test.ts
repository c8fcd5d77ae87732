import { pvbLabels } from '@stowage/kube';
import { createQueue, QueueName } from '@stowage/queue';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { DelayedError, type Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { processDeleteBackup } from '../src/processors/delete-backup.processor.js';
import type { PipelineRuntime } from '../src/runtime.js';
import { namespace, node } from './support/fixtures.js';
import { type Harness, startHarness } from './support/harness.js';

describe('delete-backup and a PVB the backup gave up on', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({
      redisUrl: redisHandle.url,
      fixture: { objects: [namespace('shop'), namespace('stowage'), node('node-a')] },
      agentNodes: [],
    });
  });
  afterAll(async () => {
    await h?.close();
    await redisHandle?.stop();
  });

  it('asks it to cancel and waits for it before the forget, so no snapshot of the backup is written after it', async () => {
    const { state } = h.deps;
    await state.createBackup({ name: 'gave-up', uid: 'uid-1', spec: {}, phase: 'New', createdAt: 1 });
    await state.transitionPhase('gave-up', ['New'], 'PartiallyFailed');
    // Its agent still copies (post-hooks recorded it timed out and the backup ended).
    const labels = { [pvbLabels.backupName]: 'gave-up' };
    const spec = { node: 'node-a', pod: { namespace: 'shop', name: 'db-0', uid: 'u' }, volume: 'data', backupStorageLocation: 'default' };
    await h.pvbs.createPvb({ metadata: { name: 'gave-up-pvb', labels }, spec });
    await h.pvbs.patchPvbStatus('gave-up-pvb', { phase: 'InProgress' });

    const forget = vi.fn(async () => [] as string[]);
    const backupsQueue = createQueue(QueueName.backups, { connection: h.redis, prefix: h.queuePrefix });
    const repositoryQueue = createQueue(QueueName.repository, { connection: h.redis, prefix: uniquePrefix() });
    const rt = {
      deps: { ...h.deps, repository: { forget, prune: vi.fn(), graceMs: 1 } },
      backupsQueue,
      repositoryQueue: () => repositoryQueue,
    } as unknown as PipelineRuntime;
    let data: Record<string, unknown> = { backupName: 'gave-up', backupUid: 'uid-1', reason: 'ttl' };
    const moveToDelayed = vi.fn(async () => undefined);
    const job = () =>
      ({
        data,
        moveToDelayed,
        updateData: async (next: Record<string, unknown>) => {
          data = next;
        },
      }) as unknown as Job;
    try {
      await expect(processDeleteBackup(rt, job(), 'token')).rejects.toBeInstanceOf(DelayedError);
      expect(forget).not.toHaveBeenCalled();
      expect((await h.pvbs.getPvb('gave-up-pvb'))?.spec.cancel).toBe(true);
      expect(await state.getBackup('gave-up')).toBeDefined();
      expect(data.pvbsOpenSince).toEqual(expect.any(Number));

      // The agent stops it (no snapshot written); the next look deletes the backup.
      await h.pvbs.patchPvbStatus('gave-up-pvb', { phase: 'Canceled' });
      expect(await processDeleteBackup(rt, job(), 'token')).toEqual({ outcome: 'deleted' });
      expect(forget).toHaveBeenCalledWith({ backup: 'gave-up' });
      expect(await h.pvbs.getPvb('gave-up-pvb')).toBeUndefined();
      expect(await state.getBackup('gave-up')).toBeUndefined();
    } finally {
      await backupsQueue.close();
      await repositoryQueue.close();
    }
  });

  it('waits at most pvbCancelWaitMs: an agent that never answers does not keep the backup forever', async () => {
    const { state } = h.deps;
    await state.createBackup({ name: 'stuck', uid: 'uid-2', spec: {}, phase: 'New', createdAt: 1 });
    await state.transitionPhase('stuck', ['New'], 'PartiallyFailed');
    const labels = { [pvbLabels.backupName]: 'stuck' };
    const spec = { node: 'node-a', pod: { namespace: 'shop', name: 'db-0', uid: 'u' }, volume: 'data', backupStorageLocation: 'default' };
    await h.pvbs.createPvb({ metadata: { name: 'stuck-pvb', labels }, spec });
    await h.pvbs.patchPvbStatus('stuck-pvb', { phase: 'InProgress' });
    const backupsQueue = createQueue(QueueName.backups, { connection: h.redis, prefix: h.queuePrefix });
    const rt = { deps: h.deps, backupsQueue } as unknown as PipelineRuntime;
    // First found running longer ago than pvbCancelWaitMs.
    const data = { backupName: 'stuck', backupUid: 'uid-2', reason: 'ttl', pvbsOpenSince: Date.now() - h.deps.config.pvbCancelWaitMs - 1 };
    try {
      expect(await processDeleteBackup(rt, { data, moveToDelayed: vi.fn() } as unknown as Job, 'token')).toEqual({ outcome: 'deleted' });
      expect(await h.pvbs.getPvb('stuck-pvb')).toBeUndefined();
      expect(await state.getBackup('stuck')).toBeUndefined();
    } finally {
      await backupsQueue.close();
    }
  });
});
