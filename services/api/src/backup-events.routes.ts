import type { Writable } from 'node:stream';
import type { RunEvent, RunRecord, RunState } from '@stowage/pipeline';
import { duplicateConnection, type RedisClient } from '@stowage/queue';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Access } from './access.js';
import { backupParams, standardErrors, TERMINAL_BACKUP_PHASES } from './api.schema.js';
import { ApiError, ApiErrorCode } from './errors.js';
import { callerKey, type StreamSlots } from './stream-slots.js';

/** What a client past a stream cap is told to wait before trying again. */
const STREAM_RETRY_AFTER_S = 5;

/** The API's read path of a run (BackupReads, RestoreReads): its record, and its events from storage once archived. */
export interface ArchivedRunReads {
  record(name: string): Promise<RunRecord | undefined>;
  archivedEvents(rec: RunRecord, afterId: string): AsyncGenerator<RunEvent[]>;
}

export interface BackupEventsOptions {
  /** The run state whose event stream is served (backups or restores: one implementation). */
  state: RunState<RunRecord>;
  /** `backup` serves `/v1/backups/:name/events`, `restore` `/v1/restores/:name/events`. Default `backup`. */
  kind?: 'backup' | 'restore';
  /** The API's one read path of the run, so a finished run's events are replayed from storage. */
  reads?: ArchivedRunReads;
  redis: RedisClient;
  heartbeatMs: number;
  /** Open streams per caller and in all (one set for the whole app: backups' and restores' streams together). */
  slots: StreamSlots;
  /** Longest single blocking read; the stream re-checks the backup's phase in between. */
  blockMs?: number;
  /** Who may follow a run: `watch backups` in its namespace, `watch clusterbackups` (restores alike). */
  access: Access;
}

const streamIdPattern = /^\d{1,20}-\d{1,20}$/;

/** True for the event that ends a backup's stream: its move into a terminal phase. */
export function isTerminalPhaseEvent(ev: RunEvent, kind: 'backup' | 'restore' = 'backup'): boolean {
  return ev.type === `${kind}.phase` && typeof ev.data.to === 'string' && TERMINAL_BACKUP_PHASES.has(ev.data.to);
}

/**
 * Writes one chunk to a client; when its socket buffer is full (write returned false), waits until
 * it drains or the client goes away before returning.
 */
export async function writeWithBackpressure(res: Writable, chunk: string): Promise<void> {
  if (res.write(chunk) || res.destroyed || res.writableEnded) return;
  await new Promise<void>((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

export function formatSseEvent(ev: RunEvent): string {
  // One `data:` line: JSON never contains a raw newline.
  return `id: ${ev.id}\nevent: ${ev.type}\ndata: ${JSON.stringify({ id: ev.id, type: ev.type, at: new Date(ev.at).toISOString(), data: ev.data })}\n\n`;
}

/**
 * `GET /v1/backups/:name/events`: Server-Sent Events from the backup's event stream. Each client
 * of a running backup gets its own Redis connection (XREAD BLOCK would stall every other command on
 * a shared one), closed when the client goes away or the backup has ended. A finished backup's
 * events are replayed from storage (the same ids), and the stream ends after its terminal event.
 */
export const backupEventsRoutes: FastifyPluginAsyncZod<BackupEventsOptions> = async (app, opts) => {
  const { state, reads } = opts;
  const kind = opts.kind ?? 'backup';
  const blockMs = opts.blockMs ?? Math.min(opts.heartbeatMs, 5_000);
  const open = new Set<() => void>();
  // On shutdown, end every stream so app.close() does not wait for clients that never leave.
  app.addHook('preClose', async () => {
    for (const stop of open) stop();
  });

  app.get(
    `/v1/${kind}s/:name/events`,
    {
      schema: {
        tags: [`${kind}s`],
        summary: `Live events of a ${kind} (Server-Sent Events), resumable with Last-Event-ID`,
        description: `Each event has \`id:\` (the stream id), \`event:\` (its type) and \`data:\` (JSON). Comment lines are heartbeats. The stream ends after the event that moves the ${kind} into a terminal phase.`,
        params: backupParams,
        headers: z.object({
          'last-event-id': z.string().regex(streamIdPattern, 'Last-Event-ID must be an event id received from this stream').optional(),
        }),
        response: {
          200: { description: 'An event stream', content: { 'text/event-stream': { schema: z.string() } } },
          ...standardErrors,
        },
      },
    },
    async (req, reply) => {
      const name = req.params.name;
      const missing = () => new ApiError(ApiErrorCode.notFound, `${kind} "${name}" does not exist`);
      // Authorized from the name before the run is read (a 404 must not tell what exists elsewhere).
      const found: RunRecord | undefined = await opts.access.findRun(
        req,
        kind === 'backup' ? 'backups' : 'restores',
        'watch',
        name,
        async () => (reads ? await reads.record(name) : await state.getRun(name)),
        missing,
      );
      if (!found) throw missing();
      const rec: RunRecord = found;
      let lastId = req.headers['last-event-id'] ?? '0';
      const slot = opts.slots.acquire(callerKey(req));
      if (!slot.ok) {
        void reply.header('retry-after', String(STREAM_RETRY_AFTER_S));
        throw new ApiError(ApiErrorCode.tooManyRequests, `too many event streams: ${slot.why}; retry later`);
      }
      try {
        await serve();
      } finally {
        slot.release();
      }
      async function serve(): Promise<void> {
        const startStream = () => {
          reply.hijack();
          reply.raw.writeHead(200, {
            'content-type': 'text/event-stream; charset=utf-8',
            'cache-control': 'no-cache, no-transform',
            connection: 'keep-alive',
            'x-accel-buffering': 'no',
            'x-request-id': String(req.id),
          });
          reply.raw.write('retry: 2000\n\n');
          return reply.raw;
        };
        // Each event waits for the client to take the ones before it (writeWithBackpressure): a
        // client that reads slowly holds the replay, not the api's memory.
        const deliverTo =
          (res: typeof reply.raw) =>
          async (events: RunEvent[]): Promise<boolean> => {
            for (const ev of events) {
              if (res.destroyed || res.writableEnded) return true;
              await writeWithBackpressure(res, formatSseEvent(ev));
              lastId = ev.id;
              if (isTerminalPhaseEvent(ev, kind)) return true;
            }
            return false;
          };
        /** Replays a finished run's events after lastId from storage; true when its terminal event was sent. */
        const replayArchived = async (deliver: (events: RunEvent[]) => Promise<boolean>, archived: RunRecord): Promise<boolean> => {
          if (!reads) return false;
          for await (const events of reads.archivedEvents(archived, lastId)) if (await deliver(events)) return true;
          return false;
        };

        if (reads && rec.archivedAt !== undefined) {
          const res = startStream();
          try {
            await replayArchived(deliverTo(res), rec);
          } catch (err) {
            req.log.warn({ err, [kind]: name }, `replaying a finished ${kind}'s events failed`);
          } finally {
            if (!res.writableEnded) res.end();
          }
          return;
        }

        const conn = duplicateConnection(opts.redis, {
          lazyConnect: true,
          enableOfflineQueue: true,
          maxRetriesPerRequest: 1,
          connectionName: 'stowage-api-sse',
        });
        conn.on('error', (err) => req.log.debug({ err }, 'sse redis connection error'));
        try {
          await conn.connect();
        } catch (err) {
          conn.disconnect();
          throw new ApiError(ApiErrorCode.unavailable, 'the event stream store (Redis) is unavailable; retry later', undefined, {
            cause: err,
          });
        }

        const res = startStream();

        let closed = false;
        const heartbeat = setInterval(() => {
          if (!closed) res.write(`: heartbeat ${new Date().toISOString()}\n\n`);
        }, opts.heartbeatMs);
        const stop = (): void => {
          if (closed) return;
          closed = true;
          clearInterval(heartbeat);
          open.delete(stop);
          conn.disconnect(); // aborts a pending XREAD BLOCK
          if (!res.writableEnded) res.end();
        };
        open.add(stop);
        res.on('close', stop);

        const deliver = deliverTo(res);

        try {
          for (;;) {
            if (closed) return;
            const events = await state.readEvents(name, lastId, { count: 500, blockMs, client: conn });
            if (closed) return;
            if (await deliver(events)) return;
            if (events.length > 0) continue;
            // Nothing new for a while: has the backup ended (its terminal event already read by an
            // earlier connection) or gone? Then drain what is left and end — from storage once the
            // backup is archived (its stream in Redis is dropped then).
            const now: RunRecord | undefined = await state.getRun(name);
            if (reads && now?.archivedAt !== undefined) {
              await replayArchived(deliver, now);
              return;
            }
            if (!now || TERMINAL_BACKUP_PHASES.has(now.phase)) {
              await deliver(await state.readEvents(name, lastId, { count: 10_000, client: conn }));
              return;
            }
          }
        } catch (err) {
          if (!closed) req.log.warn({ err, [kind]: name }, 'event stream ended by an error');
        } finally {
          stop();
        }
      }
    },
  );
};
