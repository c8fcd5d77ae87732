// Worker drain throughput: plan 3000 solo blocks with the item-blocks queue paused, then resume and
// time the workers alone. Usage: tsx tmp/drain.ts [workers] [rounds]
import { join } from 'node:path';
import { generateCluster } from '@stowage/kube-sim';
import { submitBackup } from '@stowage/pipeline';
import { createQueue, QueueName } from '@stowage/queue';
import { BenchEnv } from '../src/bench-env.js';
const workers = Number(process.argv[2] ?? 1);
const rounds = Number(process.argv[3] ?? 3);
const env = await BenchEnv.start(generateCluster({ namespaces: 6, podsPerNamespace: 500, volumesPerPod: 0, bytesPerVolume: 0, nodes: 4 }), 'none', '/tmp/drain-logs');
try {
  const ws = await env.startWorkers({ count: workers, blockConcurrency: 32, hookConcurrency: 32, waitMode: 'decoupled' });
  env.hostBackupsQueue();
  const q = createQueue(QueueName.itemBlocks, { connection: env.redis, prefix: env.queuePrefix });
  for (let r = 0; r < rounds; r++) {
    await q.pause();
    const name = `drain-${r}`;
    const spec = { includedNamespaces: Array.from({ length: 6 }, (_, i) => `bench-${i}`), excludedNamespaces: [], includedResources: [], excludedResources: [], includeClusterResources: null, labelSelector: null, orLabelSelectors: [], defaultVolumesToFsBackup: true, hooks: { resources: [] }, resourcePolicy: null, fsBackupTimeoutMs: 4 * 3_600_000, ttlMs: 720 * 3_600_000, storageLocation: 'default' };
    await submitBackup({ state: env.state, connection: env.redis, queuePrefix: env.queuePrefix }, { name, spec });
    for (;;) { const rec = await env.state.getBackup(name); if (rec?.planCompletedAt) break; await new Promise((res) => setTimeout(res, 50)); }
    const blocks = (await env.state.counters(name)).blocksPlanned ?? 0;
    await new Promise((res) => setTimeout(res, 300));
    const cpu0 = await Promise.all(ws.map((w) => w.cpuSeconds())); const r0 = await env.redisCpuSeconds(); const t0 = Date.now();
    await q.resume();
    for (;;) { const c = await env.state.counters(name); if ((c.blocksDone ?? 0) >= blocks) break; await new Promise((res) => setTimeout(res, 20)); }
    const ms = Date.now() - t0; const cpu1 = await Promise.all(ws.map((w) => w.cpuSeconds())); const r1 = await env.redisCpuSeconds();
    const wcpu = cpu1.reduce((s, c, i) => s + (c ?? 0) - (cpu0[i] ?? 0), 0);
    console.log(`round ${r}: ${blocks} blocks drained in ${ms} ms = ${Math.round(blocks / (ms / 1000))}/s; worker CPU ${(wcpu * 1000 / blocks).toFixed(3)} ms/block, redis ${(((r1 - r0) * 1000) / blocks).toFixed(3)} ms/block`);
    for (;;) { const rec = await env.state.getBackup(name); if (rec?.completedAt) break; await new Promise((res) => setTimeout(res, 50)); }
  }
  await q.close();
} finally { await env.close(false); }
process.exit(0);
