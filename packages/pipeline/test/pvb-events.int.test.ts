import type { PodVolumeBackup } from '@stowage/kube';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordPvbGaveUp, recordPvbMissing, recordPvbObservation } from '../src/pvb/pvb-observation.js';
import { BackupState, type PvbStateRecord } from '../src/state/backup-state.js';

const pvb = (name: string, status: PodVolumeBackup['status']): PodVolumeBackup =>
  ({
    metadata: { name },
    spec: { node: 'node-a', pod: { namespace: 'shop', name: 'db-0', uid: 'u' }, volume: 'data', backupStorageLocation: 'default' },
    status,
  }) as PodVolumeBackup;

describe('pvb.phase events: a PVB that ended badly says why', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let redis: Redis;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    redis = new Redis(redisHandle.url);
  });
  afterAll(async () => {
    redis.disconnect();
    await redisHandle.stop();
  });

  it('Failed and Canceled carry the status message, a give-up and a vanished PVB theirs; Completed none', async () => {
    const state = new BackupState({ redis, prefix: uniquePrefix() });
    await state.createBackup({ name: 'b1', uid: 'u1', spec: {}, phase: 'InProgress', createdAt: 1 });
    const running = { name: 'x', phase: 'InProgress', blockId: 'blk-1' } as PvbStateRecord;
    const deps = { state };

    await recordPvbObservation(deps, 'b1', pvb('pvb-failed', { phase: 'Failed', message: 'no space left on device' }), running);
    await recordPvbObservation(deps, 'b1', pvb('pvb-canceled', { phase: 'Canceled', message: 'canceled on request' }), running);
    await recordPvbObservation(deps, 'b1', pvb('pvb-done', { phase: 'Completed', message: '2 entries were left out' }), running);
    await recordPvbGaveUp(deps, 'b1', 'pvb-stuck', running, 'deadline', 60_000);
    await recordPvbMissing(deps, 'b1', 'pvb-gone', running, 'the PVB was deleted');

    const phases = (await state.readEvents('b1', '0')).filter((e) => e.type === 'pvb.phase');
    const messages = Object.fromEntries(phases.map((e) => [e.data.pvb, e.data.message]));
    expect(messages).toEqual({
      'pvb-failed': 'no space left on device',
      'pvb-canceled': 'canceled on request',
      'pvb-done': undefined,
      'pvb-stuck': 'fs-backup deadline passed; PVB pvb-stuck was asked to cancel and did not stop within 60000 ms',
      'pvb-gone': 'the PVB was deleted',
    });
  });
});
