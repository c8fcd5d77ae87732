import { RestoreState, statePrefixFor } from '@stowage/pipeline';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runStowage, type Stack, startStack } from './cli-harness.js';

/*
 * `stowage restore …` against the whole backend (API, worker, node agents, the demo cluster):
 * the media namespace (two pods sharing a claim with data) is backed up, deleted, and restored
 * with --wait; describe, list, logs and the errors a user meets.
 */
describe('stowage restore', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  }, 120_000);
  afterAll(async () => {
    await stack?.close();
  });
  const kube = (method: string, path: string) =>
    fetch(`${stack.sim.url}${path}`, { method, headers: { Authorization: `Bearer ${stack.sim.adminToken}` } });

  it('create --wait shows progress and ends Completed; describe, list and logs show it', async () => {
    const backup = await runStowage(
      ['backup', 'create', 'bk-media', '--include-namespaces', 'media', '--default-volumes-to-fs-backup', '--wait'],
      stack.env,
      120_000,
    );
    expect(backup.code, backup.stderr).toBe(0);
    await kube('DELETE', '/api/v1/namespaces/media');
    for (let i = 0; (await kube('GET', '/api/v1/namespaces/media')).status !== 404; i++) {
      if (i > 200) throw new Error('media was not deleted');
      await new Promise((r) => setTimeout(r, 100));
    }

    const restore = await runStowage(['restore', 'create', 'rs-media', '--from-backup', 'bk-media', '--wait'], stack.env, 120_000);
    expect(restore.code, `${restore.stdout}\n${restore.stderr}`).toBe(0);
    expect(restore.stdout).toMatch(/planned: \d+ items in \d+ tiers/);
    expect(restore.stdout).toMatch(/tier \d+ done/);
    expect(restore.stdout).toMatch(/Phase:\s+Completed/);
    expect(restore.stdout).toMatch(/Items:\s+(\d+)\/\1 restored/);

    const describeRes = await runStowage(['restore', 'describe', 'rs-media'], stack.env);
    expect(describeRes.code).toBe(0);
    expect(describeRes.stdout).toMatch(/Tiers \(\d+\):/);
    expect(describeRes.stdout).toMatch(/Pod volume restores \([1-9]\d*\):/);
    expect(describeRes.stdout).toContain('Completed');

    const list = await runStowage(['restore', 'list', '--json'], stack.env);
    expect(JSON.parse(list.stdout).items.map((r: { name: string }) => r.name)).toContain('rs-media');
    const logs = await runStowage(['restore', 'logs', 'rs-media', '--json'], stack.env);
    expect(logs.code).toBe(0);
    for (const line of logs.stdout
      .trim()
      .split('\n')
      .filter((l) => l.length > 0))
      expect(JSON.parse(line)).toHaveProperty('msg');

    const cancel = await runStowage(['restore', 'cancel', 'rs-media'], stack.env);
    expect(cancel.code).toBe(1);
    expect(cancel.stderr).toMatch(/already ended/);

    // Archived just after the phase moved (finalize's last step), and then its state in Redis
    // dropped (all but the record and counters): the CLI shows the same, from storage.
    const redis = new Redis(stack.redisUrl);
    try {
      const restores = new RestoreState({ redis, prefix: statePrefixFor(stack.queuePrefix) });
      for (let i = 0; (await restores.getRestore('rs-media'))?.archivedAt === undefined; i++) {
        if (i > 300) throw new Error('rs-media was not archived');
        await new Promise((r) => setTimeout(r, 100));
      }
      for (let i = 0; (await restores.readEvents('rs-media', '0')).length > 0; i++) {
        if (i > 300) throw new Error("rs-media's state was not dropped from Redis");
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(await restores.itemResults('rs-media')).toEqual({});
      const described = await runStowage(['restore', 'describe', 'rs-media'], stack.env);
      expect(described.stdout).toMatch(/Tiers \(\d+\):/);
      expect(described.stdout).toMatch(/Pod volume restores \([1-9]\d*\):/);
      expect(described.stdout).toContain('Completed');
      const got = await runStowage(['restore', 'get', 'rs-media'], stack.env);
      expect([got.code, got.stdout]).toEqual([0, expect.stringContaining('Completed')]);
      expect((await runStowage(['restore', 'list'], stack.env)).stdout).toContain('rs-media');
      const logsAfter = await runStowage(['restore', 'logs', 'rs-media', '--json'], stack.env);
      expect(logsAfter.stdout).toBe(logs.stdout);
    } finally {
      await redis.quit();
    }
  }, 300_000);

  it('the errors a user meets: no backup named, an unknown backup, a bad field', async () => {
    const noBackup = await runStowage(['restore', 'create', 'x'], stack.env);
    expect(noBackup.code).toBe(2);
    expect(noBackup.stderr).toMatch(/--from-backup/);
    const unknown = await runStowage(['restore', 'create', 'x', '--from-backup', 'nope'], stack.env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/backup "nope" does not exist/);
    const bad = await runStowage(['restore', 'create', 'x', '--from-backup', 'nope', '--existing-resource-policy', 'sometimes'], stack.env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/spec\.existingResourcePolicy/);
  });
});
