/**
 * Backs up a generated cluster end to end in one process and reports what happened:
 *   tsx --conditions=@stowage/source packages/pipeline/scripts/scale-backup.ts [pods] [volumesPerPod]
 * Defaults: 10,000 pods, 1 volume each (bytes 0; the test PVB controller completes each PVB at
 * once). A private redis-server, the simulator and a temp storage dir; all queues hosted here.
 * Prints the final phase, counts, durations, and whether the first block started before the plan
 * finished (events of the backup's stream).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKubeClients, createPvbClient } from '@stowage/kube';
import { generateCluster, startSimulator } from '@stowage/kube-sim';
import {
  BackupState,
  DEFAULT_PIPELINE_CONFIG,
  loadBackupArchive,
  NodeAgentRegistry,
  startWorkers,
  statePrefixFor,
  submitBackup,
} from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { FileSystemStorage } from '@stowage/storage';
import { startRedisServer, uniquePrefix } from '@stowage/testing';
import { Redis } from 'ioredis';
import { quietLogger } from '../test/support/harness.js';
import { TestPvbController } from '../test/support/test-pvb-controller.js';

const pods = Number(process.argv[2] ?? 10_000);
const volumesPerPod = Number(process.argv[3] ?? 1);
const nodes = 50;
const started = Date.now();
const since = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;

const redisServer = await startRedisServer();
const fixture = generateCluster({
  namespaces: Math.max(1, Math.ceil(pods / 1_000)),
  podsPerNamespace: Math.min(pods, 1_000),
  volumesPerPod,
  bytesPerVolume: 0,
  nodes,
});
const sim = await startSimulator({ fixture, port: 0, materializeVolumes: 'none' });
console.log(`[${since()}] simulator up with ${pods} pods × ${volumesPerPod} volumes on ${nodes} nodes`);
const kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
const pvbs = createPvbClient(kube, { namespace: 'stowage' });
const redis = new Redis(redisServer.url, { maxRetriesPerRequest: null });
const queuePrefix = uniquePrefix();
const statePrefix = statePrefixFor(queuePrefix);
const storageDir = await mkdtemp(join(tmpdir(), 'stowage-scale-'));
const agents = new NodeAgentRegistry({ redis, prefix: statePrefix });
for (let i = 0; i < nodes; i++) await agents.registerNodeAgent(`node-${i}`, 3_600_000);
const state = new BackupState({ redis, prefix: statePrefix });
const logs: string[] = [];
const deps = {
  connection: redis,
  queuePrefix,
  state,
  agents,
  kube,
  pvbs,
  storage: new FileSystemStorage(storageDir),
  logger: quietLogger(logs),
  clock: { now: Date.now },
  config: { ...DEFAULT_PIPELINE_CONFIG, blockBatchSize: 500 },
};
const controller = new TestPvbController({ pvbs, durationMs: 0, perNodeConcurrency: 8 });
await controller.start();
const workers = startWorkers({
  deps,
  queues: [QueueName.backups, QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks],
  concurrency: { itemBlocks: 16, pvbWatch: 200, hooks: 16 },
});

const name = 'scale-1';
const spec = {
  includedNamespaces: [],
  excludedNamespaces: [],
  includedResources: [],
  excludedResources: [],
  includeClusterResources: null,
  labelSelector: null,
  orLabelSelectors: [],
  defaultVolumesToFsBackup: true,
  hooks: { resources: [] },
  resourcePolicy: null,
  fsBackupTimeoutMs: 4 * 3_600_000,
  ttlMs: 720 * 3_600_000,
  storageLocation: 'default',
};
const submittedAt = Date.now();
await submitBackup({ state, connection: redis, queuePrefix }, { name, spec });
let phase = 'New';
for (;;) {
  const rec = await state.getBackup(name);
  phase = rec?.phase ?? 'missing';
  if (['Completed', 'PartiallyFailed', 'Failed', 'Canceled', 'FailedValidation'].includes(phase)) break;
  const c = await state.counters(name);
  process.stdout.write(
    `\r[${since()}] ${phase} items ${c.itemsBackedUp ?? 0}/${c.totalItems ?? '?'} blocks ${c.blocksDone ?? 0}/${c.blocksPlanned ?? '?'} PVBs ${c.pvbsCompleted ?? 0}   `,
  );
  await new Promise((r) => setTimeout(r, 1_000));
}
const tookMs = Date.now() - submittedAt;
const counters = await state.counters(name);
let firstBlockAt: number | undefined;
let planDoneAt: number | undefined;
// The events are in storage once finalize has archived the backup (Redis keeps only its record and counters).
while ((await state.getBackup(name))?.archivedAt === undefined) await new Promise((r) => setTimeout(r, 200));
for (const e of (await loadBackupArchive(deps.storage, name)).events) {
  if (e.type === 'block.started') firstBlockAt ??= e.at;
  if (e.type === 'plan.done') planDoneAt = e.at;
}
console.log(`\n[${since()}] backup ${name}: ${phase} in ${(tookMs / 1000).toFixed(1)} s`);
console.log(JSON.stringify({ pods, volumesPerPod, phase, tookMs, counters }, null, 2));
console.log(
  firstBlockAt !== undefined && planDoneAt !== undefined
    ? `first block started ${planDoneAt - firstBlockAt} ms before the plan finished (${firstBlockAt < planDoneAt ? 'yes' : 'NO'})`
    : 'missing block.started or plan.done events',
);
if (logs.length > 0) console.log(`logger warnings/errors: ${logs.length}; first: ${logs[0]}`);
if (controller.errors.length > 0)
  console.log(`test PVB controller retried ${controller.errors.length} failed writes; first: ${controller.errors[0]}`);
console.log(`API requests: ${JSON.stringify(sim.requests().byVerb)}`);
await workers.close();
await controller.stop();
redis.disconnect();
await sim.close();
await redisServer.stop();
await rm(storageDir, { recursive: true, force: true });
process.exit(phase === 'Completed' && firstBlockAt !== undefined && planDoneAt !== undefined && firstBlockAt < planDoneAt ? 0 : 1);
