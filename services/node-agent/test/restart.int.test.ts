import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NodeAgentRegistry, statePrefixFor } from '@stowage/queue';
import { Repository } from '@stowage/repository';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AgentProcess,
  describeTree,
  type Harness,
  spawnAgent,
  startHarness,
  TEST_REPO_KEY,
  waitFor,
  waitForPhase,
  writeRandomFile,
} from './support.js';

let h: Harness;
let storage: string;
let redis: { url: string; stop: () => Promise<void> };
const children: AgentProcess[] = [];

beforeAll(async () => {
  h = await startHarness();
  storage = await mkdtemp(join(tmpdir(), 'stowage-node-agent-proc-'));
  redis = await useTestRedis();
});

afterAll(async () => {
  for (const c of children) {
    try {
      c.killHard();
    } catch {
      // already gone
    }
  }
  await h?.close();
  await redis?.stop();
  await rm(storage, { recursive: true, force: true });
});

describe('node agent process', () => {
  it('refuses to start without STOWAGE_REPO_KEY, naming the variable', async () => {
    const agent = spawnAgent({ KUBECONFIG: h.sim.kubeconfigPath, STOWAGE_NODE_NAME: 'node-a', STOWAGE_STORAGE: storage, PORT: '0' });
    children.push(agent);
    const { code } = await agent.exited;
    expect(code).toBe(1);
    expect(agent.stderr.join('')).toMatch(/STOWAGE_REPO_KEY: is required by the node agent/);
  }, 90_000);

  it('SIGKILLed mid-copy and started again: the PVB is resumed and ends Completed with the right bytes', async () => {
    const source = h.volumeDir('app', 'db', 'data');
    await writeRandomFile(join(source, 'large.bin'), 10 * 1024 * 1024);
    const queuePrefix = uniquePrefix();
    const env = {
      KUBECONFIG: h.sim.kubeconfigPath,
      STOWAGE_NODE_NAME: 'node-a',
      STOWAGE_NAMESPACE: 'stowage',
      STOWAGE_REPO_KEY: TEST_REPO_KEY,
      STOWAGE_STORAGE: storage,
      STOWAGE_KUBELET_ROOT: h.kubeletRoot('node-a'),
      STOWAGE_LOAD_CONCURRENCY: '{"globalConfig": 1}',
      REDIS_URL: redis.url,
      STOWAGE_QUEUE_PREFIX: queuePrefix,
      PORT: '0',
      LOG_LEVEL: 'info',
    };
    const first = spawnAgent({ ...env, STOWAGE_BANDWIDTH_LIMIT: '1MiB' });
    children.push(first);
    const port = await first.port();
    // Before any work: ready, and the heartbeat planners read to know node-a has an agent.
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    const client = new Redis(redis.url);
    try {
      const registry = new NodeAgentRegistry({ redis: client, prefix: statePrefixFor(queuePrefix) });
      await waitFor(
        () => registry.nodesWithAgent(),
        (nodes) => nodes.has('node-a'),
        5_000,
        'the node agent heartbeat',
      );
    } finally {
      client.disconnect();
    }

    await h.createPvb('pvb-restart', { node: 'node-a', namespace: 'app', pod: 'db', volume: 'data' });
    const running = await waitFor(
      () => h.pvbs.getPvb('pvb-restart'),
      (p) => p?.status?.phase === 'InProgress' && (p.status.progress?.bytesDone ?? 0) > 0,
      60_000,
      'the copy to be under way',
    );
    // While it runs: metrics by phase and bytes copied.
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toContain('stowage_node_agent_pvbs{node="node-a",phase="InProgress"} 1');
    expect(metrics).toMatch(/stowage_node_agent_copied_bytes_total\{node="node-a"\} [1-9]/);
    first.killHard();
    expect((await first.exited).signal).toBe('SIGKILL');
    // Nothing of the first agent writes any more (no stray process): the PVB stays as the kill left it.
    const orphan = await h.pvbs.getPvb('pvb-restart');
    await new Promise((r) => setTimeout(r, 2000));
    expect(orphan?.status?.phase).toBe('InProgress');
    expect((await h.pvbs.getPvb('pvb-restart'))?.metadata.resourceVersion).toBe(orphan?.metadata.resourceVersion);
    expect(orphan!.status!.progress!.bytesDone!).toBeLessThan(10 * 1024 * 1024);

    const second = spawnAgent(env);
    children.push(second);
    const done = (await waitForPhase(h.pvbs, 'pvb-restart', ['Completed', 'Failed'], 120_000))!;
    expect(done.status?.message).toBeUndefined();
    expect(done.status?.phase).toBe('Completed');
    expect(done.status?.startTimestamp).not.toBe(running?.status?.startTimestamp);

    const repo = await Repository.open({ dir: join(storage, 'repository'), key: TEST_REPO_KEY });
    const target = join(storage, 'restored');
    await repo.restore(done.status!.snapshotID!, target);
    expect(await describeTree(target)).toEqual(await describeTree(source));
    expect((await repo.listSnapshots()).filter((s) => s.tags.pvb === 'pvb-restart')).toHaveLength(1);

    second.child.kill('SIGTERM');
    expect((await second.exited).code).toBe(0);
  }, 240_000);
});
