import { createLifecycle, createLogger } from '@stowage/platform';
import { openCheckedObjectStore } from '@stowage/storage';
import { loadNodeAgentConfig } from './agent-config.js';

// Thin host: config (every problem at once), logger, the service, graceful shutdown.
const loaded = loadNodeAgentConfig(process.env);
if (!loaded.ok) {
  process.stderr.write(
    `Stowage node agent configuration has ${loaded.problems.length} problem(s):\n${loaded.problems.map((p) => `  - ${p}`).join('\n')}\n`,
  );
  process.exit(1);
}
const config = loaded.config;
// Storage that cannot be used (no bucket, refused credentials, unreachable endpoint) is one line and exit 1, before serving.
const storage = await openCheckedObjectStore(config.shared.storage);
if (!storage.ok) {
  process.stderr.write(`Stowage node agent cannot start: ${storage.message}\n`);
  process.exit(1);
}
const logger = createLogger({ level: config.shared.log.level, name: 'node-agent' });
const lifecycle = createLifecycle({ logger, timeoutMs: config.shared.shutdown.timeoutMs });
lifecycle.installProcessHandlers();

// Imported after the config is known good, so a misconfigured start fails fast.
const { startNodeAgentService } = await import('./node-agent-service.js');
const service = await startNodeAgentService(config, logger, { repoStore: storage.store });
// Shutdown runs these last-registered-first: the agent (abort copies, left InProgress to resume) → HTTP → Redis.
lifecycle.onShutdown('redis', service.stopRedis);
lifecycle.onShutdown('http', service.stopHttp);
lifecycle.onShutdown('agent', service.stopAgent);
lifecycle.markReady();
