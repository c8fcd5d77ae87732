import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { Queue } from 'bullmq';
import type { FastifyPluginAsync } from 'fastify';
import { type Access, forbidden, runAttributes } from './access.js';

export interface QueuesDashboardOptions {
  queues: readonly Queue[];
  basePath: string;
  readOnly: boolean;
  access: Access;
}

/**
 * bull-board on every Stowage queue. Protected by the global auth hook like every other route; as
 * it shows every backup's and restore's jobs, a Kubernetes user needs `list clusterbackups` (answered
 * 403 directly: bull-board's own error handler would turn a thrown error into a 500).
 */
export const queuesDashboardPlugin: FastifyPluginAsync<QueuesDashboardOptions> = async (app, opts) => {
  const attrs = runAttributes('backups', 'list');
  app.addHook('onRequest', async (req, reply) => {
    if (req.requester?.kind !== 'user') return;
    const decision = await opts.access.decide(req.requester, attrs);
    if (decision.allowed) return;
    const err = forbidden(req.requester, attrs, decision);
    return reply
      .code(403)
      .type('application/json')
      .send({ error: { code: err.code, message: err.message, requestId: String(req.id) } });
  });
  const serverAdapter = new FastifyAdapter();
  createBullBoard({
    queues: opts.queues.map((q) => new BullMQAdapter(q, { readOnlyMode: opts.readOnly, allowRetries: !opts.readOnly })),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'Stowage queues' } },
  });
  serverAdapter.setBasePath(opts.basePath);
  await app.register(serverAdapter.registerPlugin(), { prefix: opts.basePath });
};
