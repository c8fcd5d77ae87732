import { validateRestoreRequest } from '@stowage/core';
import {
  type PipelineDeps,
  PipelineErrorCode,
  type RunningWorkers,
  readRestoreArchive,
  readRestoreArchiveEvents,
  restoreLayout,
  startWorkers,
  submitBackup,
  submitRestore,
} from '@stowage/pipeline';
import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storageFailingWrites } from './support/failing-storage.js';
import { backupSpec, configMap, namespace, node } from './support/fixtures.js';
import { BACKUP_AND_RESTORE_QUEUES, type Harness, startHarness, waitFor, waitForBackupEnd } from './support/harness.js';

const ALL_QUEUES = BACKUP_AND_RESTORE_QUEUES;
const objects: unknown[] = [node('node-a'), namespace('shop'), configMap('settings'), configMap('flags')];

describe('a finished restore in storage: finalize archives its events and record', () => {
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

  it('finalize cut off after the final phase runs again and archives: restore.json last, every event with the terminal one once, then marked archived and dropped from Redis', async () => {
    const storage = storageFailingWrites(h.deps.storage, '/restore.json', 1);
    const deps: PipelineDeps = { ...h.deps, storage };
    workers = startWorkers({ deps, queues: ALL_QUEUES });
    await submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name: 'bk1', spec: backupSpec() });
    expect(await waitForBackupEnd(h.deps.state, 'bk1')).toBe('Completed');

    const validation = validateRestoreRequest({ name: 'rs-cut', spec: { backupName: 'bk1', includedNamespaces: ['shop'] } });
    if (!validation.ok) throw new Error(JSON.stringify(validation.problems));
    const restores = h.deps.restores!;
    await submitRestore({ restores, connection: h.redis, queuePrefix: h.queuePrefix }, { name: 'rs-cut', spec: validation.value });
    const rec = await waitFor(
      'rs-cut archived',
      async () => {
        const r = await restores.getRestore('rs-cut');
        return r?.archivedAt !== undefined ? r : undefined;
      },
      30_000,
    );
    expect(storage.failed()).toBe(1);

    const archive = await readRestoreArchive(h.deps.storage, 'rs-cut');
    expect(archive?.record).toMatchObject({ name: 'rs-cut', phase: rec.phase, completedAt: rec.completedAt });
    // The archive holds the counters Redis ended with: the storage requests of finalize itself
    // (writing that archive, twice here; restore.json last, its own put and bytes) included.
    const counted = await restores.counters('rs-cut');
    expect(counted.storagePut).toBeGreaterThan(0);
    expect(archive?.counters).toEqual(counted);
    const archived = [];
    for await (const segment of readRestoreArchiveEvents(h.deps.storage, archive!, '0')) archived.push(...segment);
    // Every event, from the first; Redis no longer holds them (dropped once the archive was in storage).
    expect(archived[0]?.type).toBe('restore.created');
    expect(archived.map((e) => e.type)).toEqual(expect.arrayContaining(['plan.done', 'tier.started', 'tier.done', 'items.batch-done']));
    expect(await restores.readEvents('rs-cut', '0')).toEqual([]);
    const terminal = archived.filter((e) => e.type === 'restore.phase' && e.data.to === rec.phase);
    expect(terminal).toHaveLength(1);
    expect(archived.at(-1)).toEqual(terminal[0]);
    expect(await h.deps.storage.exists(restoreLayout('rs-cut').eventsSegment(0))).toBe(true);

    // A stalled duplicate of a restore-items job, still writing after the drop: its count is refused.
    const countersArchived = await restores.counters('rs-cut');
    await expect(
      restores.recordItemResults('rs-cut', [{ key: 'configmaps/shop/late', result: { outcome: 'created', at: 1 } }]),
    ).rejects.toMatchObject({ code: PipelineErrorCode.runArchived });
    expect(await restores.counters('rs-cut')).toEqual(countersArchived);
  });
});
