import { workerLockTimingFromEnv } from '@stowage/pipeline';
import { createLifecycle, createLogger, loadConfigOrExit } from '@stowage/platform';
import { openCheckedObjectStore } from '@stowage/storage';
import { startApiService } from './api-service.js';
import { repositoryGcFromEnv } from './repository-gc.js';

// Thin host: config (every problem at once; no tokens and no STOWAGE_AUTH=disabled is one),
// logger with redaction, the API service, graceful shutdown.
const config = loadConfigOrExit(process.env, { require: ['REDIS_URL', 'STOWAGE_API_TOKENS'], service: 'api' });
const lockTiming = workerLockTimingFromEnv(process.env);
if (!lockTiming.ok) {
  process.stderr.write(
    `Stowage api configuration has ${lockTiming.problems.length} problem(s):\n  - ${lockTiming.problems.join('\n  - ')}\n`,
  );
  process.exit(1);
}
// Storage that cannot be used (no bucket, refused credentials, unreachable endpoint) is one line and exit 1, before serving.
const storage = await openCheckedObjectStore(config.storage);
if (!storage.ok) {
  process.stderr.write(`Stowage api cannot start: ${storage.message}\n`);
  process.exit(1);
}
const logger = createLogger({ level: config.log.level, name: 'api' });
const lifecycle = createLifecycle({ logger, timeoutMs: config.shutdown.timeoutMs });
lifecycle.installProcessHandlers();

if (config.api.auth === 'disabled') logger.warn('STOWAGE_AUTH=disabled: the API answers without a token');
let repository: ReturnType<typeof repositoryGcFromEnv>;
try {
  repository = repositoryGcFromEnv(config, process.env, storage.store);
} catch (error) {
  process.stderr.write(`Stowage api configuration problem: ${(error as Error).message}\n`);
  process.exit(1);
}
if (!repository) logger.info('no STOWAGE_REPO_KEY: deleting a backup leaves its volume repository snapshots; no repository prune');
const service = await startApiService({ config, logger, lock: lockTiming.lock, storage: storage.store, repository });
// Registered in start order; shutdown runs them in reverse (readiness is turned off first):
// HTTP (app.close) → workers → queues → Redis.
lifecycle.onShutdown('redis', service.stopRedis);
lifecycle.onShutdown('queues', service.stopQueues);
lifecycle.onShutdown('workers', service.stopWorkers);
lifecycle.onShutdown('http', service.stopHttp);
service.markReady();
lifecycle.markReady();
