import { createLifecycle, createLogger, loadConfigOrExit } from '@stowage/platform';
import { openCheckedObjectStore } from '@stowage/storage';
import { startApiService } from './api-service.js';

// Thin host: config (every problem at once; no tokens and no STOWAGE_AUTH=disabled is one),
// logger with redaction, the API service, graceful shutdown.
const config = loadConfigOrExit(process.env, { require: ['REDIS_URL', 'STOWAGE_API_TOKENS'], service: 'api' });
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
// The api never opens the volume repository: deletions and prunes run in the backup workers,
// which hold the repository key (the `repository` queue).
if (config.repository.key)
  logger.warn('STOWAGE_REPO_KEY is set for the api, which never uses it: give it only to the workers and node agents');
const service = await startApiService({ config, logger, storage: storage.store });
// Registered in start order; shutdown runs them in reverse (readiness is turned off first):
// HTTP (app.close) → workers → queues → Redis.
lifecycle.onShutdown('redis', service.stopRedis);
lifecycle.onShutdown('queues', service.stopQueues);
lifecycle.onShutdown('workers', service.stopWorkers);
lifecycle.onShutdown('http', service.stopHttp);
service.markReady();
lifecycle.markReady();
