import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { Queue } from 'bullmq';
import type { FastifyPluginAsync } from 'fastify';

export interface QueuesDashboardOptions {
  queues: readonly Queue[];
  basePath: string;
  readOnly: boolean;
}

/** bull-board on every Stowage queue. Protected by the global auth hook like every other route. */
export const queuesDashboardPlugin: FastifyPluginAsync<QueuesDashboardOptions> = async (app, opts) => {
  const serverAdapter = new FastifyAdapter();
  createBullBoard({
    queues: opts.queues.map((q) => new BullMQAdapter(q, { readOnlyMode: opts.readOnly, allowRetries: !opts.readOnly })),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'Stowage queues' } },
  });
  serverAdapter.setBasePath(opts.basePath);
  await app.register(serverAdapter.registerPlugin(), { prefix: opts.basePath });
};
