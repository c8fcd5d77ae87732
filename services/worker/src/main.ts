import { workerLockTimingFromEnv } from '@stowage/pipeline';
import { createLifecycle, createLogger, loadConfigOrExit } from '@stowage/platform';
import { openCheckedObjectStore } from '@stowage/storage';
import { startWorkerService } from './worker-service.js';

// Thin host: config (every problem at once), logger, the worker service, graceful shutdown.
const config = loadConfigOrExit(process.env, { require: ['REDIS_URL'], service: 'worker' });
const lockTiming = workerLockTimingFromEnv(process.env);
if (!lockTiming.ok) {
  process.stderr.write(
    `Stowage worker configuration has ${lockTiming.problems.length} problem(s):\n  - ${lockTiming.problems.join('\n  - ')}\n`,
  );
  process.exit(1);
}
// Storage that cannot be used (no bucket, refused credentials, unreachable endpoint) is one line and exit 1, before serving.
const storage = await openCheckedObjectStore(config.storage);
if (!storage.ok) {
  process.stderr.write(`Stowage worker cannot start: ${storage.message}\n`);
  process.exit(1);
}
const logger = createLogger({ level: config.log.level, name: 'worker' });
const lifecycle = createLifecycle({ logger, timeoutMs: config.shutdown.timeoutMs });
lifecycle.installProcessHandlers();

// PORT defaults to the API's 8080 in the shared config; the worker's own default is 8081.
const port = process.env.PORT ? config.api.port : 8081;
const service = await startWorkerService({ config, logger, port, lock: lockTiming.lock, storage: storage.store });
// Registered in start order; shutdown runs them in reverse: workers → HTTP → Redis.
lifecycle.onShutdown('redis', service.stopRedis);
lifecycle.onShutdown('http', service.stopHttp);
lifecycle.onShutdown('workers', service.stopWorkers);
service.markReady();
lifecycle.markReady();
