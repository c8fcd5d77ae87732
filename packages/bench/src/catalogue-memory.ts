import { join } from 'node:path';
import { generateCluster } from '@stowage/kube-sim';
import { statePrefixFor } from '@stowage/pipeline';
import { FileSystemStorage, stowageSidecarLayout } from '@stowage/storage';
import type { Redis } from 'ioredis';
import { BenchEnv } from './bench-env.js';
import { fsNamespaces } from './fs-backup-run.js';

/*
 * Redis memory of one finished backup (docs/architecture.md#where-a-backup-lives-once-it-has-ended: Redis keeps a small catalogue entry, storage the
 * rest). A real backup — worker process, node agents, hooks, one fs-backup volume per pod — runs
 * to its end; then every key of the backup's state is weighed with MEMORY USAGE. While it runs,
 * the same is sampled every 2 s, for the size of its live state (what the drop frees).
 */

export interface CatalogueMemoryResult {
  pods: number;
  phase: string;
  blocks: number;
  pvbs: number;
  hookRuns: number;
  /** Keys of the backup's state left in Redis once finished, with their MEMORY USAGE. */
  finishedKeys: Record<string, number>;
  finishedBytes: number;
  /** The backup's share of the catalogue index (a sorted set of every backup name). */
  indexEntryBytes: number;
  /** Largest sampled size of the backup's live state while it ran. */
  peakLiveBytes: number;
  peakLiveKeys: number;
  /** BullMQ's job hashes of this backup still retained (removeOnComplete: 24 h / 10,000 per queue). */
  retainedJobBytes: number;
  retainedJobKeys: number;
  /** Bytes of Stowage's sidecars in storage (backups/<name>/stowage/). */
  sidecarBytes: number;
  makespanMs: number;
}

/** MEMORY USAGE (every element sampled) of the keys matching `pattern`, by key. */
async function weigh(redis: Redis, pattern: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length === 0) continue;
    const pipe = redis.pipeline();
    for (const k of keys) pipe.memory('USAGE', k, 'SAMPLES', 0);
    const rows = (await pipe.exec()) ?? [];
    for (const [i, k] of keys.entries()) out.set(k, Number(rows[i]?.[1] ?? 0));
  } while (cursor !== '0');
  return out;
}

const total = (m: Map<string, number>): number => [...m.values()].reduce((a, b) => a + b, 0);

export async function runCatalogueMemory(pods: number, logDir: string, say: (line: string) => void): Promise<CatalogueMemoryResult> {
  const { namespaces, podsPerNamespace } = fsNamespaces(pods);
  const nodes = Array.from({ length: 4 }, (_, i) => `node-${i}`);
  const fixture = generateCluster({
    namespaces,
    podsPerNamespace,
    volumesPerPod: 1,
    bytesPerVolume: 4096,
    nodes: nodes.length,
    preHook: { durationMs: 5 },
    postHook: { durationMs: 5 },
  });
  const env = await BenchEnv.start(fixture, 'all', join(logDir, `catalogue-${pods}`));
  const onExit = () => env.killChildren();
  process.once('exit', onExit);
  try {
    await env.startNodeAgents({ nodes, perProcess: nodes.length, loadConcurrency: 4, bandwidthBytesPerSec: 1024 * 1024 * 1024 });
    await env.startWorkers({ count: 1, blockConcurrency: 8, hookConcurrency: 8, waitMode: 'decoupled' });
    env.hostBackupsQueue();
    const name = `catalogue-${pods}`;
    const statePrefix = statePrefixFor(env.queuePrefix);
    const pattern = `${statePrefix}:bk:{${name}}:*`;
    say(`  catalogue memory: backing up ${pods} pods (one 4 KiB fs-backup volume each, pre and post hooks)`);

    let peakLiveBytes = 0;
    let peakLiveKeys = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const live = await weigh(env.redis, pattern);
        if (total(live) > peakLiveBytes) {
          peakLiveBytes = total(live);
          peakLiveKeys = live.size;
        }
        await new Promise((r) => setTimeout(r, 2_000));
      }
    })();
    const run = await env.runBackup(
      name,
      Array.from({ length: namespaces }, (_, i) => `bench-${i}`),
      60 * 60_000,
    );
    // runBackup returns at the final phase; finalize archives and drops the live state right after.
    for (const until = Date.now() + 120_000; (await env.state.getBackup(name))?.archivedAt === undefined; ) {
      if (Date.now() > until) throw new Error(`backup ${name} was not archived within 120 s of its end`);
      await new Promise((r) => setTimeout(r, 100));
    }
    sampling = false;
    await sampler;

    const finished = await weigh(env.redis, pattern);
    const index = `${statePrefix}:backups`;
    const indexEntryBytes = Number(await env.redis.memory('USAGE', index, 'SAMPLES', 0)) / Math.max(1, await env.redis.zcard(index));
    const jobs = await weigh(env.redis, `${env.queuePrefix}:*:${name}*`);
    const storage = new FileSystemStorage(env.storageDir);
    let sidecarBytes = 0;
    for (const key of await storage.list(stowageSidecarLayout(name).dir)) sidecarBytes += (await storage.getObject(key))?.length ?? 0;
    const counters = await env.state.counters(name);
    const rec = await env.state.getBackup(name);
    return {
      pods,
      phase: run.phase,
      blocks: counters.blocksPlanned ?? 0,
      pvbs: Object.values(rec?.pvbPhases ?? {}).reduce((a, b) => a + b, 0),
      hookRuns: counters.hooksAttempted ?? 0,
      finishedKeys: Object.fromEntries([...finished].map(([k, v]) => [k.slice(pattern.length - 1), v])),
      finishedBytes: total(finished),
      indexEntryBytes: Math.round(indexEntryBytes),
      peakLiveBytes,
      peakLiveKeys,
      retainedJobBytes: total(jobs),
      retainedJobKeys: jobs.size,
      sidecarBytes,
      makespanMs: run.completedAt - run.submittedAt,
    };
  } finally {
    process.off('exit', onExit);
    await env.close(false);
  }
}
