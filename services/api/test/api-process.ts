import { fileURLToPath } from 'node:url';
import { type ServiceProcess, spawnReadyService } from '@stowage/testing';

const SERVICE_DIR = fileURLToPath(new URL('..', import.meta.url));

export interface ApiProcessOptions {
  redisUrl: string;
  kubeconfigPath: string;
  storageDir: string;
  token: string;
  queuePrefix: string;
}

/**
 * The real api process (src/main.ts) with filesystem storage and one bearer token, ready to serve. Its environment is only what
 * it is given here: nothing of the test runner's leaks in.
 */
export function spawnApi(opts: ApiProcessOptions): Promise<ServiceProcess> {
  return spawnReadyService('src/main.ts', {
    cwd: SERVICE_DIR,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      REDIS_URL: opts.redisUrl,
      KUBECONFIG: opts.kubeconfigPath,
      STOWAGE_STORAGE: opts.storageDir,
      STOWAGE_API_TOKENS: opts.token,
      STOWAGE_QUEUE_PREFIX: opts.queuePrefix,
      LOG_LEVEL: 'warn',
    },
    // Generous: tsx compiles main.ts's import graph cold, which took over a minute on the loaded 2-core machine.
    readyTimeoutMs: 120_000,
    name: 'api',
  });
}
