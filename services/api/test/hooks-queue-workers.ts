import { createKubeClients, createPvbClient } from '@stowage/kube';
import { BackupState, DEFAULT_PIPELINE_CONFIG, NodeAgentRegistry, startWorkers, statePrefixFor } from '@stowage/pipeline';
import { createWorkerConnection, QueueName } from '@stowage/queue';
import { FileSystemStorage } from '@stowage/storage';
import { pino } from 'pino';

/**
 * The `hooks` queue hosted in the test's process, as the worker service hosts it: the api may not
 * exec, so a backup with backup-level hooks waits for these jobs before it plans any block. For
 * tests that run the api process alone.
 */
export function startHooksQueueWorkers(opts: {
  redisUrl: string;
  /** The api's STOWAGE_QUEUE_PREFIX. */
  prefix: string;
  kubeconfigPath: string;
  storageDir: string;
}): { close: () => Promise<void> } {
  const connection = createWorkerConnection(opts.redisUrl);
  const kube = createKubeClients({ kubeconfigPath: opts.kubeconfigPath });
  const statePrefix = statePrefixFor(opts.prefix);
  const workers = startWorkers({
    deps: {
      connection,
      queuePrefix: opts.prefix,
      state: new BackupState({ redis: connection, prefix: statePrefix }),
      agents: new NodeAgentRegistry({ redis: connection, prefix: statePrefix }),
      kube,
      pvbs: createPvbClient(kube, { namespace: 'stowage' }),
      storage: new FileSystemStorage(opts.storageDir),
      logger: pino({ level: 'warn' }),
      clock: { now: Date.now },
      config: DEFAULT_PIPELINE_CONFIG,
    },
    queues: [QueueName.hooks],
  });
  return {
    close: async () => {
      await workers.close();
      await connection.quit();
    },
  };
}
