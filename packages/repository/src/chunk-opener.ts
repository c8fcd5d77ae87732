import type { Worker } from 'node:worker_threads';
import type { FromChunkOpenWorker, ToChunkOpenWorker } from './chunk-open-worker.js';
import { ChunkReadError, type OpenedChunk } from './chunk-store.js';
import type { RepoKeys } from './keys.js';
import { spawnRepoWorker } from './worker-threads.js';

interface Waiter {
  readonly chunkId: string;
  readonly resolve: (reply: FromChunkOpenWorker) => void;
  readonly reject: (error: unknown) => void;
}

interface OpenThread {
  readonly worker: Worker;
  /** Requests sent to this thread and not yet answered, by id. */
  readonly pending: Map<number, Waiter>;
  crashed?: Error;
}

/**
 * Worker threads that decrypt, decompress, re-hash and write large chunks for a restore (issue
 * #20): on the main thread these were ~90 % of a large restore's CPU (AES-GCM, zstd,
 * HMAC-SHA256, and the garbage of their buffers), so one core capped it. Threads start with the
 * first chunk; each chunk goes to the thread with the fewest requests in flight, and stays there
 * (checked) until the restore writes it at its offset. The blob's memory is transferred.
 */
export class ChunkOpener {
  private readonly threads: OpenThread[] = [];
  private nextId = 0;
  private closed = false;

  constructor(
    private readonly maxThreads: number,
    private readonly keys: Pick<RepoKeys, 'chunkIdKey' | 'encryptionKey'>,
  ) {}

  /**
   * Opens the chunk on a thread; ChunkReadError ('corrupt') if it does not decrypt or hash to
   * `chunkId`. `blob` must own its memory (it moves to the thread and is unusable afterwards).
   */
  async open(chunkId: string, blob: Buffer): Promise<OpenedChunk> {
    if (this.closed) throw new Error('the chunk opener is closed');
    const thread = this.pickThread();
    const id = this.nextId++;
    const opened = await this.request(thread, chunkId, { type: 'open', id, chunkId, blob }, [blob.buffer as ArrayBuffer]);
    if (!('opened' in opened)) throw new Error(`unexpected reply to opening chunk ${chunkId}`);
    return {
      length: opened.opened,
      writeAt: async (fd, position) => {
        await this.request(thread, chunkId, { type: 'write', id, fd, position });
      },
      drop: () => {
        if (!thread.crashed) thread.worker.postMessage({ type: 'drop', id } satisfies ToChunkOpenWorker);
      },
    };
  }

  private request(thread: OpenThread, chunkId: string, message: ToChunkOpenWorker, transfer?: ArrayBuffer[]): Promise<FromChunkOpenWorker> {
    if (thread.crashed) return Promise.reject(thread.crashed);
    return new Promise((resolve, reject) => {
      thread.pending.set(message.id, { chunkId, resolve, reject });
      thread.worker.postMessage(message, transfer);
    });
  }

  private pickThread(): OpenThread {
    let best: OpenThread | undefined;
    for (const thread of this.threads) if (!best || thread.pending.size < best.pending.size) best = thread;
    if (best && (best.pending.size === 0 || this.threads.length >= this.maxThreads)) return best;
    return this.startThread();
  }

  private startThread(): OpenThread {
    const worker = spawnRepoWorker('chunk-open-worker', { chunkIdKey: this.keys.chunkIdKey, encryptionKey: this.keys.encryptionKey });
    const thread: OpenThread = { worker, pending: new Map() };
    worker.on('message', (reply: FromChunkOpenWorker) => {
      const waiter = thread.pending.get(reply.id);
      thread.pending.delete(reply.id);
      if (!waiter) return;
      if ('corrupt' in reply) waiter.reject(new ChunkReadError(waiter.chunkId, 'corrupt', reply.corrupt));
      else if ('failed' in reply) waiter.reject(Object.assign(new Error(reply.failed), { code: reply.code }));
      else waiter.resolve(reply);
    });
    const crashed = (cause: unknown) => {
      thread.crashed = cause instanceof Error ? cause : new Error(`a chunk-open worker thread stopped (exit code ${cause})`);
      for (const waiter of thread.pending.values()) waiter.reject(thread.crashed);
      thread.pending.clear();
      const at = this.threads.indexOf(thread);
      if (at >= 0) this.threads.splice(at, 1);
    };
    worker.once('error', crashed);
    worker.once('exit', crashed);
    this.threads.push(thread);
    return thread;
  }

  async close(): Promise<void> {
    this.closed = true;
    const threads = this.threads.splice(0);
    await Promise.all(threads.map((t) => t.worker.terminate()));
  }
}
