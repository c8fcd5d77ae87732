import { statePrefixFor } from '@stowage/queue';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PlannedRestoreItem, RestorePodPlan, RestoreTierPlan } from '../src/restore/restore-plan-types.js';
import { PLAN_WRITE_BYTES, RestoreState } from '../src/restore/restore-state.js';

let redis: { url: string; stop: () => Promise<void> };
let client: Redis;

beforeAll(async () => {
  redis = await useTestRedis();
  client = new Redis(redis.url);
});
afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
});

async function multiCalls(): Promise<number> {
  const stats = (await client.info('commandstats')).match(/cmdstat_multi:calls=(\d+)/);
  return Number(stats?.[1] ?? 0);
}

function item(i: number): PlannedRestoreItem {
  return {
    key: `configmaps/app/cm-${i}`,
    groupResource: 'configmaps',
    group: '',
    version: 'v1',
    resource: 'configmaps',
    kind: 'ConfigMap',
    namespace: 'app',
    name: `cm-${i}`,
    sourceNamespace: 'app',
    object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}`, namespace: 'app' }, data: { v: 'x'.repeat(1_000) } },
  };
}

describe("a restore's plan goes to Redis in bounded transactions", () => {
  it('a plan of ~8 MiB is written in transactions of at most PLAN_WRITE_BYTES each (not one MULTI) and reads back whole', async () => {
    const restores = new RestoreState({ redis: client, prefix: statePrefixFor(uniquePrefix()) });
    const batches = new Map<string, PlannedRestoreItem[]>();
    for (let b = 0; b < 80; b++)
      batches.set(
        `1.${b}`,
        Array.from({ length: 100 }, (_, i) => item(b * 100 + i)),
      );
    const pods: RestorePodPlan[] = [{ namespace: 'app', name: 'db-0', sourceNamespace: 'app', volumes: [], hooks: [] }];
    const tiers: RestoreTierPlan[] = [
      { index: 1, groupResources: ['configmaps'], waitUntil: null, batches: 80, items: 8_000, waitFor: [] },
    ];
    const bytes = [...batches.values()].reduce((n, items) => n + JSON.stringify(items).length, 0);
    expect(bytes).toBeGreaterThan(8 * PLAN_WRITE_BYTES);

    const before = await multiCalls();
    const { transactions } = await restores.putPlan('big', { tiers, batches, pods });
    expect((await multiCalls()) - before).toBe(transactions);
    // Each transaction holds at most PLAN_WRITE_BYTES (plus one batch that would not fit).
    expect(transactions).toBeGreaterThanOrEqual(Math.ceil(bytes / PLAN_WRITE_BYTES));
    expect(transactions).toBeLessThanOrEqual(Math.ceil(bytes / PLAN_WRITE_BYTES) * 2 + 1);

    for (let b = 0; b < 80; b++) expect(await restores.getBatch('big', 1, b)).toEqual(batches.get(`1.${b}`));
    expect(await restores.getTiers('big')).toEqual(tiers);
    expect(await restores.getPodPlan('big', 'app', 'db-0')).toEqual(pods[0]);
  });
});
