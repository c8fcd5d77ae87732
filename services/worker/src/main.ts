import { createLifecycle, createLogger, loadConfigOrExit } from '@stowage/platform';
import { openCheckedObjectStore } from '@stowage/storage';
import { repositoryGcFromConfig } from './repository-gc.js';
import { startWorkerService } from './worker-service.js';

// Thin host: config (every problem at once), logger, the worker service, graceful shutdown.
const config = loadConfigOrExit(process.env, { require: ['REDIS_URL'], service: 'worker', defaultPort: 8081 });
// Storage that cannot be used (no bucket, refused credentials, unreachable endpoint) is one line and exit 1, before serving.
const storage = await openCheckedObjectStore(config.storage);
if (!storage.ok) {
  process.stderr.write(`Stowage worker cannot start: ${storage.message}\n`);
  process.exit(1);
}
const logger = createLogger({ level: config.log.level, name: 'worker' });
const lifecycle = createLifecycle({ logger, timeoutMs: config.shutdown.timeoutMs });
lifecycle.installProcessHandlers();

// Backup deletions and repository prunes (the `repository` queue) need the repository key.
let repository: ReturnType<typeof repositoryGcFromConfig>;
try {
  repository = repositoryGcFromConfig(config, storage.store);
} catch (error) {
  process.stderr.write(`Stowage worker configuration problem: ${(error as Error).message}\n`);
  process.exit(1);
}
if (!repository && config.worker.queues.includes('repository'))
  logger.warn('no STOWAGE_REPO_KEY: deleting a backup leaves its volume repository snapshots; no repository prune');
const service = await startWorkerService({ config, logger, port: config.api.port, storage: storage.store, repository });
// Registered in start order; shutdown runs them in reverse: workers → HTTP → Redis.
lifecycle.onShutdown('redis', service.stopRedis);
lifecycle.onShutdown('http', service.stopHttp);
lifecycle.onShutdown('workers', service.stopWorkers);
service.markReady();
lifecycle.markReady();
