import type { Worker } from 'node:worker_threads';
import type { FromChunkOpenWorker, ToChunkOpenWorker } from './chunk-open-worker.js';
import { ChunkReadError, type OpenedChunk } from './chunk-store.js';
import type { RepoKeys } from './keys.js';
import { spawnRepoWorker } from './worker-threads.js';

/** Buffers kept for reuse: about what a restore has in flight (8 files × 3 writes, plus the lookahead). */
const FREE_BUFFERS_KEPT = 32;

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

/** Read buffers are allocated in multiples of this, so one serves chunks of neighbouring sizes. */
const BUFFER_STEP_BYTES = 1024 * 1024;

/**
 * Worker threads that decrypt, decompress and write large chunks for a restore (issue #20): on
 * the main thread these were ~90 % of a large restore's CPU (AES-GCM, zstd, HMAC-SHA256, and the
 * garbage of their buffers), so one core capped it. Threads start with the first chunk; each
 * chunk goes to the thread with the fewest requests in flight, and stays there (authenticated)
 * until the restore writes it at its offset.
 *
 * Memory goes round instead of being fresh per chunk: a blob is read into one of this opener's
 * buffers, which is transferred to the thread, decrypted in place (a raw chunk's plaintext is that
 * same memory), and transferred back once the chunk is written (or, for a compressed chunk, once
 * it is decoded). Fresh 1 MiB buffers per chunk cost ~140k page faults per GiB restored.
 */
export class ChunkOpener {
  private readonly threads: OpenThread[] = [];
  private nextId = 0;
  private closed = false;
  /** Buffers back from the threads, ready for the next read. */
  private readonly free: ArrayBuffer[] = [];
  /** Buffers this opener handed out (so a blob read into one is transferred without a copy). */
  private readonly mine = new WeakSet<ArrayBufferLike>();
  /** Buffers allocated so far (the rest of the reads reused one); for tests and diagnostics. */
  buffersAllocated = 0;

  constructor(
    private readonly maxThreads: number,
    private readonly keys: Pick<RepoKeys, 'chunkIdKey' | 'encryptionKey'>,
  ) {}

  /** `length` bytes to read a blob into, from the buffers the threads gave back when one is big enough. */
  buffer(length: number): Buffer {
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const size = this.free[i]!.byteLength;
      if (size >= length && (best < 0 || size < this.free[best]!.byteLength)) best = i;
    }
    let memory: ArrayBuffer;
    if (best >= 0) memory = this.free.splice(best, 1)[0]!;
    else {
      memory = new ArrayBuffer(Math.ceil(length / BUFFER_STEP_BYTES) * BUFFER_STEP_BYTES);
      this.buffersAllocated++;
      this.mine.add(memory);
    }
    return Buffer.from(memory, 0, length);
  }

  /** A copy of `blob` in one of this opener's buffers. */
  copy(blob: Uint8Array): Buffer {
    const own = this.buffer(blob.length);
    own.set(blob);
    return own;
  }

  /** `blob` in memory the opener may move to its threads: as it is when it fills its own buffer (a whole-object read), else a copy. */
  take(blob: Buffer): Buffer {
    if (this.owns(blob)) return blob;
    if (blob.byteOffset !== 0 || blob.byteLength !== blob.buffer.byteLength) return this.copy(blob);
    this.mine.add(blob.buffer);
    return blob;
  }

  /** True when `blob` is in one of this opener's buffers (and can be transferred as it is). */
  owns(blob: Uint8Array): boolean {
    return this.mine.has(blob.buffer);
  }

  private giveBack(memory: ArrayBuffer | undefined): void {
    // As many as can be in flight at once (files × writes in flight, plus the lookahead); more would only hold memory.
    if (!memory || this.closed || this.free.length >= FREE_BUFFERS_KEPT) return;
    this.mine.add(memory); // back from a thread as a new ArrayBuffer object
    this.free.push(memory);
  }

  /**
   * Opens the chunk on a thread; ChunkReadError ('corrupt') if it does not authenticate under
   * `chunkId`. `blob` must be in one of this opener's buffers (`buffer`, `copy`): it moves to the
   * thread and comes back to this opener when the thread is done with it.
   */
  async open(chunkId: string, blob: Buffer): Promise<OpenedChunk> {
    if (this.closed) throw new Error('the chunk opener is closed');
    if (!this.owns(blob)) throw new Error('ChunkOpener.open takes a blob in one of its own buffers');
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
      if ('memory' in reply) this.giveBack(reply.memory);
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
