import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisCluster, startRedisCluster } from '../packages/testing/src/index.js';
import { type DemoRun, runDemo } from './support/demo-run.js';

/*
 * `pnpm demo --json` (api, two workers, three node agents and the simulator as separate
 * processes; a backup, then a restore of shop, through the REST API) with REDIS_URL naming a real
 * Redis Cluster of 3 masters and 3 replicas.
 */

describe('pnpm demo on a Redis Cluster', () => {
  let cluster: RedisCluster;
  let run: DemoRun;

  beforeAll(async () => {
    cluster = await startRedisCluster();
    run = await runDemo([], { REDIS_URL: cluster.url });
  }, 450_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('backs up and restores, every item, PVB, hook and restored volume file accounted for', () => {
    expect(run.code, run.stderr).toBe(0);
    const s = JSON.parse(run.stdout) as {
      ok: boolean;
      phase: string;
      items: { total: number; backedUp: number };
      pvbs: { total: number; byPhase: Record<string, number> };
      hooks: { failed: number; runs: Array<{ phase: string }> };
      restore: { phase: string; volumes: Array<{ equal: boolean }>; objects: { failed: number } } | null;
    };
    expect(s.ok).toBe(true);
    expect(s.phase).toBe('Completed');
    expect(s.items.total).toBeGreaterThan(0);
    expect(s.items.backedUp).toBe(s.items.total);
    expect(s.pvbs.total).toBeGreaterThan(0);
    expect(s.pvbs.byPhase.Completed).toBe(s.pvbs.total);
    expect(s.hooks.failed).toBe(0);
    expect(s.hooks.runs.map((r) => r.phase).sort()).toEqual(['post', 'pre']);
    expect(s.restore?.phase).toBe('Completed');
    expect(s.restore?.objects.failed).toBe(0);
    expect(s.restore?.volumes.length).toBeGreaterThan(0);
    for (const v of s.restore?.volumes ?? []) expect(v.equal).toBe(true);
  });
});
