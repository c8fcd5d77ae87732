import { PruneStatusStore } from '@stowage/pipeline';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from './api-harness.js';

let redisHandle: { url: string; stop: () => Promise<void> };
let redis: Redis;
let status: PruneStatusStore;
let h: Harness;

beforeAll(async () => {
  redisHandle = await useTestRedis();
  redis = new Redis(redisHandle.url, { maxRetriesPerRequest: null });
  status = new PruneStatusStore(redis, uniquePrefix());
  h = await startHarness(redisHandle.url, { overrides: { prune: status } });
});
afterAll(async () => {
  await h?.close();
  redis?.disconnect();
  await redisHandle?.stop();
});

describe('repository prune metrics', () => {
  it('report the last prune run (whichever process ran it) and the bytes freed in total; a failed run is flagged', async () => {
    const before = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(before).toContain('stowage_repository_prune_runs 0');
    // No run yet: zeros (an unlabelled gauge always has a value).
    expect(before).toContain('stowage_repository_prune_last_success_timestamp_seconds 0');

    const summary = {
      snapshots: 3,
      liveChunks: 120,
      packsRewritten: 2,
      packsRetired: 5,
      packsDeleted: 4,
      bytesRetired: 5_000_000,
      bytesDeleted: 4_000_000,
      bytesWritten: 1_000_000,
      bytesFreed: 3_000_000,
      chunksRescued: 1,
      batchesPending: 1,
      durationMs: 2_500,
    };
    await status.recordSuccess(summary, 1_700_000_000_000);
    await status.recordSuccess({ ...summary, bytesFreed: 500 }, 1_700_000_060_000);
    const text = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(text).toContain('stowage_repository_prune_runs 2');
    expect(text).toContain('stowage_repository_prune_freed_bytes 3000500');
    expect(text).toContain('stowage_repository_prune_last_bytes_freed 500');
    expect(text).toContain('stowage_repository_prune_last_packs_rewritten 2');
    expect(text).toContain('stowage_repository_prune_last_success_timestamp_seconds 1700000060');
    expect(text).toContain('stowage_repository_prune_last_failed 0');

    await status.recordFailure('REPO_PRUNE_LOCKED: another prune is running', 1_700_000_120_000);
    const failed = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(failed).toContain('stowage_repository_prune_last_failed 1');
    expect(failed).toContain('stowage_repository_prune_last_success_timestamp_seconds 1700000060');
  });
});
