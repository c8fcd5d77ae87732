import type { Worker } from 'node:worker_threads';
import type { FromChunkOpenWorker, ToChunkOpenWorker } from './chunk-open-worker.js';
import { ChunkReadError } from './chunk-store.js';
import type { RepoKeys } from './keys.js';
import { spawnRepoWorker } from './worker-threads.js';

interface OpenThread {
  readonly worker: Worker;
  /** Requests sent to this thread and not yet answered. */
  readonly pending: Map<number, { chunkId: string; resolve: (plaintext: Buffer) => void; reject: (error: unknown) => void }>;
}

/**
 * Worker threads that decrypt, decompress and re-hash large chunks for a restore (issue #20):
 * on the main thread these were ~90 % of a large restore's CPU (AES-GCM, zstd, HMAC-SHA256, and
 * the garbage of their buffers), so one core capped it. Threads start with the first chunk;
 * each request goes to the thread with the fewest in flight. The blob's memory is transferred.
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
   * The chunk's checked plaintext; ChunkReadError ('corrupt') if it does not decrypt or hash to
   * `chunkId`. `blob` must own its memory (it is moved to the thread and unusable afterwards).
   */
  open(chunkId: string, blob: Buffer): Promise<Buffer> {
    if (this.closed) return Promise.reject(new Error('the chunk opener is closed'));
    const thread = this.pickThread();
    const id = this.nextId++;
    return new Promise<Buffer>((resolve, reject) => {
      thread.pending.set(id, { chunkId, resolve, reject });
      const message: ToChunkOpenWorker = { id, chunkId, blob };
      thread.worker.postMessage(message, [blob.buffer as ArrayBuffer]);
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
      if ('plaintext' in reply) waiter.resolve(Buffer.from(reply.plaintext.buffer, reply.plaintext.byteOffset, reply.plaintext.byteLength));
      else if ('corrupt' in reply) waiter.reject(new ChunkReadError(waiter.chunkId, 'corrupt', reply.corrupt));
      else waiter.reject(new Error(`opening a chunk on a worker thread failed: ${reply.failed}`));
    });
    const crashed = (cause: unknown) => {
      const error = cause instanceof Error ? cause : new Error(`a chunk-open worker thread stopped (exit code ${cause})`);
      for (const waiter of thread.pending.values()) waiter.reject(error);
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
