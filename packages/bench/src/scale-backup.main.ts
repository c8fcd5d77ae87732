/**
 * pnpm --filter @stowage/bench bench:scale [pods] [volumesPerPod] — one backup of a generated
 * cluster end to end, and whether its first block started before its plan finished (blocks must
 * start while planning goes on). Defaults: 10,000 pods, 1 volume of 4 KiB each, on 50 nodes.
 *
 * The same parts as the other scenarios (BenchEnv): a private redis-server, the simulator in a
 * process of its own, 2 real worker processes, a real node agent per node (the volumes are tiny,
 * so what is measured is the pipeline: plan, dispatch, PVB creation and watching, finalize), plan
 * and finalize hosted here as the api service hosts them. Exit code 1 unless the backup Completed
 * with its first block started before its plan was done.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateCluster } from '@stowage/kube-sim';
import { BenchEnv } from './bench-env.js';

const say = (line: string) => process.stderr.write(`${line}\n`);
const args = process.argv.slice(2).filter((a) => a !== '--');
const [pods, volumesPerPod] = [Number(args[0] ?? 10_000), Number(args[1] ?? 1)];
if (!Number.isInteger(pods) || pods < 1 || !Number.isInteger(volumesPerPod) || volumesPerPod < 0) {
  say('usage: pnpm --filter @stowage/bench bench:scale [pods >= 1] [volumesPerPod >= 0]');
  process.exit(2);
}
const NODES = 50;
const namespaces = Math.max(1, Math.ceil(pods / 1_000));
const fixture = generateCluster({
  namespaces,
  podsPerNamespace: Math.ceil(pods / namespaces),
  volumesPerPod,
  bytesPerVolume: 4096,
  nodes: NODES,
});
const logDir = join(tmpdir(), `stowage-bench-scale-${Date.now()}`);
const env = await BenchEnv.start(fixture, 'with-files', logDir);
process.once('exit', () => env.killChildren());
let ok = false;
try {
  const nodes = Array.from({ length: NODES }, (_, i) => `node-${i}`);
  await env.startNodeAgents({ nodes, perProcess: 25, loadConcurrency: 8, bandwidthBytesPerSec: 1024 * 1024 * 1024 });
  await env.startWorkers({ count: 2, blockConcurrency: 8, hookConcurrency: 16, waitMode: 'decoupled' });
  env.hostBackupsQueue({ blockBatchSize: 500 });
  say(`${fixture.objects.length} objects, ${pods} pods × ${volumesPerPod} volumes on ${NODES} nodes; backing up`);
  const run = await env.runBackup(
    'scale-1',
    Array.from({ length: namespaces }, (_, i) => `bench-${i}`),
    2 * 3_600_000,
  );
  const counters = await env.state.counters('scale-1');
  const { events } = await env.finishedBackup('scale-1');
  const firstBlockAt = events.find((e) => e.type === 'block.started')?.at;
  const planDoneAt = events.find((e) => e.type === 'plan.done')?.at;
  ok = run.phase === 'Completed' && firstBlockAt !== undefined && planDoneAt !== undefined && firstBlockAt < planDoneAt;
  process.stdout.write(
    `${JSON.stringify({ pods, volumesPerPod, phase: run.phase, tookMs: run.completedAt - run.submittedAt, counters }, null, 2)}\n`,
  );
  process.stdout.write(
    firstBlockAt !== undefined && planDoneAt !== undefined
      ? `first block started ${planDoneAt - firstBlockAt} ms before the plan finished (${firstBlockAt < planDoneAt ? 'yes' : 'NO'})\n`
      : 'missing block.started or plan.done events\n',
  );
  process.stdout.write(`API requests: ${JSON.stringify((await env.sim.requests()).byVerb)}\n`);
  for (const problem of env.problems.slice(0, 5)) say(`  ! ${problem.slice(0, 300)}`);
} finally {
  await env.close(false);
}
process.exit(ok ? 0 : 1);
