/**
 * One restore's plan in a process of its own, for `pnpm bench --scenario restore-memory`
 * (restore-memory.ts): the restores queue's processor (as the api hosts it) runs the restore-plan
 * job of the restore named by BENCH_RESTORE, already submitted by the driver; then the process
 * prints `RESULT <json>` — the plan's outcome, its time, the RSS before the plan and this process's
 * peak (VmHWM); where the plan runs in a process of its own (restore-plan-process.ts), that
 * process's V8 heap cap (BENCH_PLAN_HEAP_MB when set, else the config's default) and its peak
 * (the result's planPeakRssBytes) — and exits. The driver copies this file into the baseline's
 * tree as well and compiles it there with esbuild, which does not typecheck: the fields the
 * baseline lacks (restorePlanHeapMb, planPeakRssBytes) are simply absent there.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKubeClients, createPvbClient, createPvrClient } from '@stowage/kube';
import {
  BackupState,
  createPipeline,
  DEFAULT_PIPELINE_CONFIG,
  NodeAgentRegistry,
  type PipelineLogger,
  RestoreState,
  statePrefixFor,
} from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { FileSystemStorage } from '@stowage/storage';
import type { Job } from 'bullmq';
import { Redis } from 'ioredis';

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

async function procStatusBytes(field: 'VmRSS' | 'VmHWM'): Promise<number> {
  const status = await readFile('/proc/self/status', 'utf8');
  const m = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(status);
  return m?.[1] ? Number(m[1]) * 1024 : 0;
}

const logger: PipelineLogger = {
  debug: () => {},
  info: () => {},
  warn: (obj, msg) => process.stderr.write(`warn ${msg ?? ''} ${JSON.stringify(obj)}\n`),
  error: (obj, msg) => process.stderr.write(`error ${msg ?? ''} ${JSON.stringify(obj)}\n`),
  child: () => logger,
};

const name = required('BENCH_RESTORE');
const prefix = required('BENCH_QUEUE_PREFIX');
const redis = new Redis(required('REDIS_URL'), { maxRetriesPerRequest: null });
const statePrefix = statePrefixFor(prefix);
// The plan of a backup without CSI snapshots makes no API request: a kubeconfig naming nothing.
const kubeconfig = join(tmpdir(), `stowage-bench-restore-memory-${process.pid}.kubeconfig`);
await writeFile(
  kubeconfig,
  [
    'apiVersion: v1',
    'kind: Config',
    'clusters: [{name: none, cluster: {server: "https://127.0.0.1:9"}}]',
    'users: [{name: none, user: {token: none}}]',
    'contexts: [{name: none, context: {cluster: none, user: none}}]',
    'current-context: none',
    '',
  ].join('\n'),
);
// The plan process's V8 heap cap (MiB), when the driver sets one.
const planHeapMb = process.env.BENCH_PLAN_HEAP_MB ? Number(process.env.BENCH_PLAN_HEAP_MB) : undefined;
const config = planHeapMb ? { ...DEFAULT_PIPELINE_CONFIG, restorePlanHeapMb: planHeapMb } : DEFAULT_PIPELINE_CONFIG;
const kube = createKubeClients({ kubeconfigPath: kubeconfig });
const restores = new RestoreState({ redis, prefix: statePrefix });
const pipeline = createPipeline({
  connection: redis,
  queuePrefix: prefix,
  state: new BackupState({ redis, prefix: statePrefix }),
  agents: new NodeAgentRegistry({ redis, prefix: statePrefix }),
  kube,
  pvbs: createPvbClient(kube, { namespace: 'stowage' }),
  storage: new FileSystemStorage(required('BENCH_STORAGE')),
  logger,
  clock: { now: Date.now },
  config,
  restores,
  pvrs: createPvrClient(kube, { namespace: 'stowage' }),
});
const record = await restores.getRestore(name);
if (!record) throw new Error(`restore ${name} has no record`);
const rssBeforeBytes = await procStatusBytes('VmRSS');
const started = performance.now();
const result: { items?: number; skipped?: number; planPeakRssBytes?: number } = await pipeline.processorFor(QueueName.restores)({
  name: 'restore-plan',
  id: `bench-${name}`,
  data: { restoreName: name, restoreUid: record.uid },
} as unknown as Job);
const planMs = performance.now() - started;
const peakRssBytes = await procStatusBytes('VmHWM');
process.stdout.write(
  `RESULT ${JSON.stringify({
    result,
    planMs,
    rssBeforeBytes,
    peakRssBytes,
    planHeapMb: config.restorePlanHeapMb,
    planPeakRssBytes: result.planPeakRssBytes,
  })}\n`,
);
await pipeline.close();
redis.disconnect();
await rm(kubeconfig, { force: true });
process.exit(0);
