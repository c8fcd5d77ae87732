/**
 * A worker process of the benchmark's inline mode: the product's worker service (the same env as
 * services/worker) with the inline comparison wired in — `inlineBlockWait`: each item-block job
 * holds its slot until its block's PVBs have ended and its post hooks have run, Velero's way.
 * The product's worker never does this; `pnpm bench` measures the two side by side.
 */
import { inlineBlockWait } from '@stowage/pipeline';
import { createLogger, loadConfigOrExit } from '@stowage/platform';
import { startWorkerService } from '@stowage/worker';

const config = loadConfigOrExit(process.env, { require: ['REDIS_URL'], service: 'worker', defaultPort: 8081 });
const logger = createLogger({ level: config.log.level, name: 'worker' });
const service = await startWorkerService({ config, logger, port: config.api.port, blockWait: inlineBlockWait });
service.markReady();
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  // Shutdown order as the worker's: workers → HTTP → Redis.
  await service.stopWorkers();
  await service.stopHttp();
  await service.stopRedis();
  process.exit(0);
};
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
