/**
 * Hosts the real node agent service (`startNodeAgentService`: informer, loadConcurrency, token
 * bucket, Redis heartbeat, /readyz) for several simulated nodes in one process, so a 40-node
 * benchmark does not need 40 Node.js processes on a 2-core machine. Each agent has its own kube
 * client, watch, bucket and HTTP port, exactly as in its own process.
 *
 * Env: the node agent's own variables (REDIS_URL, KUBECONFIG, STOWAGE_STORAGE, STOWAGE_REPO_KEY,
 * STOWAGE_LOAD_CONCURRENCY, STOWAGE_BANDWIDTH_LIMIT, STOWAGE_QUEUE_PREFIX, LOG_LEVEL) plus
 * BENCH_AGENT_NODES (comma list) and BENCH_DATA_ROOT (the simulator's data root; each agent's
 * kubelet root is `<BENCH_DATA_ROOT>/<node>`). Prints `agents-ready <n>` once all are watching.
 */
import { join } from 'node:path';
import { loadNodeAgentConfig, type NodeAgentService, startNodeAgentService } from '@stowage/node-agent';
import { createLogger } from '@stowage/platform';

const nodes = (process.env.BENCH_AGENT_NODES ?? '').split(',').filter(Boolean);
const dataRoot = process.env.BENCH_DATA_ROOT;
if (nodes.length === 0 || !dataRoot) {
  process.stderr.write('agent host: BENCH_AGENT_NODES and BENCH_DATA_ROOT are required\n');
  process.exit(1);
}
const logger = createLogger({ level: (process.env.LOG_LEVEL as 'info') ?? 'warn', name: 'node-agent' });
const services: NodeAgentService[] = [];
let stopping = false;

async function stopAll(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  await Promise.all(services.map((s) => s.stopAgent().catch(() => undefined)));
  await Promise.all(services.map((s) => s.stopHttp().catch(() => undefined)));
  await Promise.all(services.map((s) => s.stopRedis().catch(() => undefined)));
  process.exit(code);
}
process.on('SIGTERM', () => void stopAll(0));
process.on('SIGINT', () => void stopAll(0));

for (const node of nodes) {
  const loaded = loadNodeAgentConfig({
    ...process.env,
    STOWAGE_NODE_NAME: node,
    STOWAGE_KUBELET_ROOT: join(dataRoot, node),
    // Each agent's HTTP server binds a port the kernel picks: nothing here calls it (ready is the line below).
    PORT: '0',
  });
  if (!loaded.ok) {
    process.stderr.write(`agent host: node ${node}: ${loaded.problems.join('; ')}\n`);
    await stopAll(1);
    break;
  }
  services.push(await startNodeAgentService(loaded.config, logger.child({ node })));
}
process.stdout.write(`agents-ready ${services.length}\n`);
