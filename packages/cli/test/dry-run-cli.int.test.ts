/*
 * `stowage backup create --dry-run` (the real bin shim as a child process) against the API on a
 * private redis-server and the simulator with the demo cluster. No worker or node agent is needed:
 * a dry run runs nothing.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ApiService, startApiService } from '@stowage/api';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { NodeAgentRegistry, statePrefixFor } from '@stowage/pipeline';
import { createLogger, loadConfig } from '@stowage/platform';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runStowage, TOKEN } from './cli-harness.js';

let redis: { url: string; stop: () => Promise<void> };
let sim: Simulator;
let storageDir: string;
let api: ApiService;
let probe: Redis;
let env: { STOWAGE_API_URL: string; STOWAGE_API_TOKEN: string };

beforeAll(async () => {
  redis = await useTestRedis();
  sim = await startSimulator();
  storageDir = await mkdtemp(join(tmpdir(), 'stowage-cli-dry-run-'));
  const prefix = uniquePrefix();
  const loaded = loadConfig({
    REDIS_URL: redis.url,
    KUBECONFIG: sim.kubeconfigPath,
    STOWAGE_STORAGE: storageDir,
    STOWAGE_API_TOKENS: TOKEN,
    STOWAGE_QUEUE_PREFIX: prefix,
    LOG_LEVEL: 'error',
  });
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  api = await startApiService({
    config: loaded.config,
    logger: createLogger({ level: 'error', name: 'cli-dry-run' }),
    port: 0,
    host: '127.0.0.1',
  });
  api.markReady();
  probe = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  // The node agents' heartbeat: pods on these nodes get fs-backup decisions.
  const agents = new NodeAgentRegistry({ redis: probe, prefix: statePrefixFor(prefix) });
  for (const node of ['node-a', 'node-b', 'node-c']) await agents.registerNodeAgent(node, 10 * 60_000);
  env = { STOWAGE_API_URL: api.url, STOWAGE_API_TOKEN: TOKEN };
}, 60_000);

afterAll(async () => {
  await api?.stopHttp();
  await api?.stopWorkers();
  await api?.stopQueues();
  await api?.stopRedis();
  await probe?.quit().catch(() => undefined);
  await sim?.close();
  await redis?.stop();
  if (storageDir) await rm(storageDir, { recursive: true, force: true });
}, 60_000);

describe('stowage backup create --dry-run', { timeout: 90_000 }, () => {
  it('prints a readable plan and creates nothing', async () => {
    const keysBefore = (await probe.keys('*')).filter((k) => !k.endsWith(':stalled-check')).sort();
    const execsBefore = sim.execLog().length;
    const res = await runStowage(
      ['backup', 'create', 'shop-plan', '--include-namespaces', 'shop', '--default-volumes-to-fs-backup', '--dry-run'],
      env,
    );
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    const out = res.stdout;
    expect(out).toContain('Dry run of backup "shop-plan": nothing was created, stored or executed.');
    expect(out).toContain('pod shop/postgres-0 on node-a');
    expect(out).toMatch(
      /pre hook \(annotation\) in postgres: \["\/bin\/sh","-c","psql -c CHECKPOINT && fsfreeze -f \/var\/lib\/postgresql\/data"\] onError=Fail/,
    );
    expect(out).toContain('volume data (PVC data-postgres-0): fs-backup, ~10.0 GiB (pvc-request)');
    expect(out).toMatch(/volume scratch: skip — .*exclude/i);
    expect(out).toContain('Estimated bytes per node (an estimate:');
    expect(out).toMatch(/node-a: ~10\.0 GiB in 1 volume\(s\)/);
    expect(out).not.toContain('media/');

    expect(sim.execLog().length).toBe(execsBefore);
    expect((await probe.keys('*')).filter((k) => !k.endsWith(':stalled-check')).sort()).toEqual(keysBefore);
    const get = await runStowage(['backup', 'get', 'shop-plan'], env);
    expect(get.code).not.toBe(0);
    expect(get.stderr).toContain('does not exist');
  });

  it('-o json prints the API plan; a bad spec fails naming the field; --wait does not go with it', async () => {
    const res = await runStowage(
      ['backup', 'create', '--include-namespaces', 'media', '--default-volumes-to-fs-backup', '--dry-run', '-o', 'json'],
      env,
    );
    expect(res.code, res.stderr).toBe(0);
    const plan = JSON.parse(res.stdout) as {
      dryRun: boolean;
      blocks: Array<{ pods: Array<{ name: string }> }>;
      summary: { fsBackupVolumes: number };
    };
    expect(plan.dryRun).toBe(true);
    expect(plan.blocks.flatMap((b) => b.pods.map((p) => p.name)).sort()).toEqual(['thumbnailer', 'uploader']);
    expect(plan.summary.fsBackupVolumes).toBe(1); // two pods, one shared claim: one PVB

    const bad = await runStowage(['backup', 'create', 'bad-plan', '--fs-backup-timeout', 'soon', '--dry-run'], env);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('fsBackupTimeout');

    const both = await runStowage(['backup', 'create', '--dry-run', '--wait'], env);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--dry-run and --wait');
  });
});
