import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisCluster, startRedisCluster } from '../packages/testing/src/index.js';

/*
 * `pnpm demo --json` (api, two workers, three node agents and the simulator as separate
 * processes; a backup, then a restore of shop, through the REST API) with REDIS_URL naming a real
 * Redis Cluster of 3 masters and 3 replicas.
 */

const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));
const DEMO = join(REPO_ROOT, 'packages/cli/src/demo.ts');
const TSX = pathToFileURL(createRequire(join(REPO_ROOT, 'packages/cli/package.json')).resolve('tsx')).href;

describe('pnpm demo on a Redis Cluster', () => {
  let cluster: RedisCluster;
  let run: { code: number | null; stdout: string; stderr: string };

  beforeAll(async () => {
    cluster = await startRedisCluster();
    const env: Record<string, string | undefined> = { ...process.env };
    for (const k of Object.keys(env))
      if (k.startsWith('STOWAGE_') || k === 'REDIS_URL' || k === 'KUBECONFIG' || k === 'PORT') delete env[k];
    env.REDIS_URL = cluster.url;
    run = await new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ['--conditions=@stowage/source', '--import', TSX, DEMO, '--json', '--timeout-s', '300'], {
        cwd: REPO_ROOT,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const timer = setTimeout(() => {
        child.kill('SIGTERM'); // the demo cleans up on SIGTERM
        reject(new Error(`the demo did not finish within 420 s\n${stderr}`));
      }, 420_000);
      child.once('error', reject);
      child.once('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
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
