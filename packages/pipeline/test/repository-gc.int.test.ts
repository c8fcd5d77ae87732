import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PipelineDeps, RepositoryGc, RunningWorkers } from '@stowage/pipeline';
import { PruneStatusStore, pruneJobId, requestBackupDeletion, startWorkers, statePrefixFor, submitBackup } from '@stowage/pipeline';
import { createFlowProducer, createQueue, QueueName } from '@stowage/queue';
import { Repository } from '@stowage/repository';
import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, namespace, node } from './support/fixtures.js';
import { type Harness, startHarness, waitFor, waitForBackupEnd } from './support/harness.js';

const KEY = 'pipeline gc key';
const GRACE_MS = 3_600_000;

describe('deleting a backup deletes its repository snapshots and a prune job follows', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;
  let apiSide: RunningWorkers | undefined;
  let work: string;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    h = await startHarness({
      redisUrl: redisHandle.url,
      fixture: { objects: [namespace('shop'), node('node-a')] },
      agentNodes: ['node-a'],
    });
    work = await mkdtemp(join(tmpdir(), 'stowage-gc-'));
  });
  afterAll(async () => {
    await workers?.close();
    await apiSide?.close();
    await h?.close();
    await redisHandle?.stop();
    await rm(work, { recursive: true, force: true });
  });

  it("only the deleted backup's snapshots go; prune retires its data, records the run for /metrics and asks for the run after the grace", async () => {
    const repoDir = join(work, 'repo');
    const repo = await Repository.init({ dir: repoDir, key: KEY, durable: false });
    // What the node agents would have written for two backups: snapshots tagged with the backup's name.
    const snapshotOf = async (backup: string) => {
      const dir = join(work, backup);
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, 'data.bin'), randomBytes(256 * 1024));
      return (await repo.backup(dir, { tags: { backup, ns: 'shop', pod: backup, volume: 'data' } })).snapshotId;
    };
    await snapshotOf('doomed');
    const keptSnapshot = await snapshotOf('kept');

    const gc: RepositoryGc = {
      forget: (tags) => repo.forget(tags),
      prune: () => repo.prune({ graceMs: GRACE_MS }),
      graceMs: GRACE_MS,
    };
    // As shipped: the api hosts backups (plan, finalize) without the repository; the backup
    // workers host the repository queue (deletions, prunes) with it.
    const deps: PipelineDeps = { ...h.deps, repository: gc };
    workers = startWorkers({ deps, queues: [QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks, QueueName.repository] });
    apiSide = startWorkers({ deps: h.deps, queues: [QueueName.backups] });
    await submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name: 'doomed', spec: backupSpec() });
    expect(await waitForBackupEnd(h.deps.state, 'doomed')).toBe('Completed');

    const flowProducer = createFlowProducer({ connection: h.redis, prefix: h.queuePrefix });
    try {
      expect(await requestBackupDeletion({ state: h.deps.state, flowProducer }, 'doomed')).toEqual({ outcome: 'deleted' });
    } finally {
      await flowProducer.close();
    }
    expect((await repo.listSnapshots()).map((s) => s.id)).toEqual([keptSnapshot]);

    const status = new PruneStatusStore(h.redis, statePrefixFor(h.queuePrefix));
    const ran = await waitFor('the prune job', async () => ((await status.read()).runs > 0 ? status.read() : undefined));
    expect(ran.last).toMatchObject({ snapshots: 1, packsRetired: 1, bytesFreed: 0, batchesPending: 1 });
    expect(ran.lastSuccessAt).toBeGreaterThan(0);

    // The run that deletes the retired pack is queued for after the grace period.
    const repositoryQueue = createQueue(QueueName.repository, { connection: h.redis, prefix: h.queuePrefix });
    try {
      const later = (await repositoryQueue.getDelayed()).filter((j) => j.name === 'prune-repository');
      expect(later).toHaveLength(1);
      expect(later[0]!.opts.delay).toBeGreaterThanOrEqual(GRACE_MS);
      expect(later[0]!.id).toBe(pruneJobId(later[0]!.timestamp + later[0]!.opts.delay!));
    } finally {
      await repositoryQueue.close();
    }
    const fresh = await Repository.open({ dir: repoDir, key: KEY });
    expect(await fresh.verify()).toMatchObject({ ok: true, snapshotsChecked: 1 });
  });
});
