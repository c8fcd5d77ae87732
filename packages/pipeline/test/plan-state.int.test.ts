import { generateCluster } from '@stowage/kube-sim';
import type { BlockPlan, RunningWorkers } from '@stowage/pipeline';
import { startWorkers, submitBackup } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backupSpec, namespace } from './support/fixtures.js';
import { type Harness, startHarness, waitFor } from './support/harness.js';

const NAMESPACES = 4;
const PODS_PER_NAMESPACE = 150;
/**
 * Issue #23: at most 2 KiB of Redis per queued block in all, of which the BullMQ job takes about
 * 1.7 KiB; the backup's plan state (block plans with their item manifests) must stay well under the rest.
 */
const PLAN_STATE_BUDGET_BYTES_PER_BLOCK = 384;

describe('plan state in Redis: compact, and readable across versions', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    // The bench's huge-scenario pods: each with a PVC and its PV, backed up as items.
    // (The harness loads the CRDs and the stowage namespace itself.)
    const fixture = generateCluster({
      namespaces: NAMESPACES,
      podsPerNamespace: PODS_PER_NAMESPACE,
      volumesPerPod: 1,
      bytesPerVolume: 0,
      nodes: 10,
      includeStowage: false,
    });
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects: [namespace('stowage'), ...fixture.objects] }, agentNodes: [] });
  });
  afterAll(async () => {
    await workers?.close();
    await h?.close();
    await redisHandle?.stop();
  });

  it(`a planned backup holds at most ${PLAN_STATE_BUDGET_BYTES_PER_BLOCK} bytes of plan state per block, and every block reads back whole`, async () => {
    // Only plan runs: the blocks stay queued, as in the bench's "every block queued" measure.
    workers = startWorkers({ deps: h.deps, queues: [QueueName.backups] });
    const namespaces = Array.from({ length: NAMESPACES }, (_, i) => `bench-${i}`);
    await submitBackup(
      { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
      { name: 'fleet', spec: backupSpec({ includedNamespaces: namespaces }) },
    );
    await waitFor('plan to complete', async () => (await h.deps.state.getBackup('fleet'))?.planCompletedAt, 60_000);
    const ids = await h.deps.state.blockIds('fleet');
    // A block per pod (with its PVC and PV), and one per namespace and storage class.
    expect(ids.length).toBeGreaterThanOrEqual(NAMESPACES * PODS_PER_NAMESPACE);

    let bytes = 0;
    for (const suffix of ['plan', 'items', 'dict', 'border', 'shape']) {
      bytes += ((await h.redis.call('MEMORY', 'USAGE', h.deps.state.key('fleet', suffix), 'SAMPLES', '0')) as number | null) ?? 0;
    }
    const perBlock = bytes / ids.length;
    expect(perBlock, `${Math.round(perBlock)} bytes of plan state per block`).toBeLessThanOrEqual(PLAN_STATE_BUDGET_BYTES_PER_BLOCK);

    const plans = await h.deps.state.getBlockPlans<BlockPlan>('fleet', ids);
    expect(plans.every((p, i) => p?.id === ids[i])).toBe(true);
    // What a block reads is what the cluster holds: the last pod's block has the pod, its PVC and its PV, with their manifests.
    const podBlock = plans.findLast((p) => p?.items[0]?.kind === 'Pod');
    const ctx = await h.deps.state.readBlockContext<BlockPlan, Array<{ kind: string; metadata: { name: string } }>>(
      'fleet',
      podBlock?.id ?? '',
    );
    expect(ctx.plan?.items.map((i) => i.kind)).toEqual(['Pod', 'PersistentVolumeClaim', 'PersistentVolume']);
    expect(ctx.items?.map((m) => `${m.kind}/${m.metadata.name}`)).toEqual(ctx.plan?.items.map((i) => `${i.kind}/${i.name}`));
  });

  it('reads plans stored by a version before the compact encoding (plain JSON, manifests apart)', async () => {
    const { state } = h.deps;
    await state.createBackup({ name: 'legacy', uid: 'u-legacy', spec: {}, phase: 'InProgress', createdAt: 1 });
    const plan = { id: 'blk-1', pods: [], items: [{ key: 'configmaps/shop/a', kind: 'ConfigMap', name: 'a' }], skips: [] };
    await h.redis.hset(state.key('legacy', 'plan'), 'blk-1', JSON.stringify(plan));
    await h.redis.hset(state.key('legacy', 'items'), 'blk-1', JSON.stringify([{ kind: 'ConfigMap', metadata: { name: 'a' } }]));
    await h.redis.rpush(state.key('legacy', 'border'), 'blk-1');

    const ctx = await state.readBlockContext('legacy', 'blk-1');
    expect(ctx.plan).toEqual(plan);
    expect(ctx.items).toEqual([{ kind: 'ConfigMap', metadata: { name: 'a' } }]);
    expect(await state.getBlockItems('legacy', 'blk-1')).toEqual([{ kind: 'ConfigMap', metadata: { name: 'a' } }]);
    expect(await state.getBlockPlans('legacy', ['blk-1', 'blk-none'])).toEqual([plan, undefined]);
    expect((await state.readBlockTail('legacy', 'blk-1')).plan).toEqual(plan);
  });

  it('refuses a plan of an unknown format, or one whose dictionary is gone, with an error naming the backup', async () => {
    const { state } = h.deps;
    await state.createBackup({ name: 'odd', uid: 'u-odd', spec: {}, phase: 'InProgress', createdAt: 1 });
    await h.redis.hset(state.key('odd', 'plan'), 'blk-new', Buffer.from([0x09, 1, 2, 3]));
    await expect(state.readBlockContext('odd', 'blk-new')).rejects.toThrow(
      /PIPELINE_PLAN_UNREADABLE: backup odd: .*unknown format \(first byte 0x09\)/,
    );
    const orphan = Buffer.concat([Buffer.from([0x02]), Buffer.from('00112233445566ff', 'hex'), Buffer.from([1, 2, 3])]);
    await h.redis.hset(state.key('odd', 'plan'), 'blk-orphan', orphan);
    await expect(state.getBlockPlan('odd', 'blk-orphan')).rejects.toThrow(/PIPELINE_PLAN_UNREADABLE: .*dictionary 00112233445566ff/);
  });
});
