import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, type Harness, startHarness } from './api-harness.js';

// The repository's prune grace (STOWAGE_PRUNE_GRACE) here 2 h: a backup allowed to run longer
// could refer to packs prune deletes, so such a spec is refused where it is submitted.
let redis: { url: string; stop: () => Promise<void> };
let h: Harness;

beforeAll(async () => {
  redis = await useTestRedis();
  h = await startHarness(redis.url, { overrides: { pruneGraceMs: 2 * 3_600_000 } });
});
afterAll(async () => {
  await h?.close();
  await redis?.stop();
});

const post = (url: string, payload: unknown) => h.app.inject({ method: 'POST', url, headers: auth, payload: payload as object });

describe('fsBackupTimeout against the prune grace', () => {
  it('a backup whose fsBackupTimeout is not shorter than the grace is a 400 naming both; a shorter one is accepted', async () => {
    const refused = await post('/v1/backups', { name: 'too-long', spec: { fsBackupTimeout: '3h' } });
    expect(refused.statusCode).toBe(400);
    const { error } = refused.json();
    expect(error.code).toBe('API_VALIDATION');
    expect(error.problems).toEqual([{ path: 'spec.fsBackupTimeout', message: expect.stringContaining('fsBackupTimeout 3h0m0s') }]);
    expect(error.message).toContain('STOWAGE_PRUNE_GRACE 2h0m0s');
    expect(await h.state.getBackup('too-long')).toBeUndefined();

    // The default (4 h) is longer than this grace too: the user hears it, not a silent clamp.
    const byDefault = await post('/v1/backups', { name: 'default-timeout', spec: {} });
    expect(byDefault.statusCode).toBe(400);
    expect(byDefault.json().error.message).toContain('fsBackupTimeout 4h0m0s');

    const accepted = await post('/v1/backups', { name: 'short-enough', spec: { fsBackupTimeout: '90m' } });
    expect(accepted.statusCode).toBe(201);
  });

  it("a schedule's template is held to the same rule", async () => {
    const refused = await post('/v1/schedules', {
      name: 'nightly',
      spec: { schedule: '0 1 * * *', paused: true, template: { fsBackupTimeout: '2h' } },
    });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.problems).toEqual([
      { path: 'spec.template.fsBackupTimeout', message: expect.stringContaining('STOWAGE_PRUNE_GRACE 2h0m0s') },
    ]);
    const accepted = await post('/v1/schedules', {
      name: 'nightly',
      spec: { schedule: '0 1 * * *', paused: true, template: { fsBackupTimeout: '1h' } },
    });
    expect(accepted.statusCode).toBe(201);
    const patched = await h.app.inject({
      method: 'PATCH',
      url: '/v1/schedules/nightly',
      headers: auth,
      payload: { spec: { template: { fsBackupTimeout: '5h' } } },
    });
    expect(patched.statusCode).toBe(400);
  });

  it("a backup from a schedule's template is held to it too, however the schedule was stored", async () => {
    // Stored before the grace was what it is now (an older install, or STOWAGE_PRUNE_GRACE lowered since).
    const at = Date.now();
    await h.scheduleStore.create({
      name: 'older',
      spec: { schedule: '0 2 * * *', paused: true, template: { fsBackupTimeout: '3h' } },
      createdAt: at,
      updatedAt: at,
      skipped: 0,
    });
    const refused = await post('/v1/schedules/older/backups', undefined);
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.problems).toEqual([
      { path: 'spec.template.fsBackupTimeout', message: expect.stringContaining('STOWAGE_PRUNE_GRACE 2h0m0s') },
    ]);
    expect((await h.state.listBackups({ limit: 100 })).items.filter((b) => b.name.startsWith('older-'))).toEqual([]);
    const started = await post('/v1/schedules/nightly/backups', undefined);
    expect(started.statusCode, started.body).toBe(201);
  });
});
