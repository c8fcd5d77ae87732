import { AsyncResource } from 'node:async_hooks';
import type { Worker } from 'node:worker_threads';
import type { FromLargeFileWorker, LargeFileWorkerData, ToLargeFileWorker } from './large-file-worker.js';
import type { FileIdentity } from './small-file-reader.js';
import { IdleStop, spawnRepoWorker, THREADS_IDLE_MS } from './worker-threads.js';

/** One chunk of a large file, cut and identified on a worker thread, which still holds its bytes. */
export interface HashedChunk {
  readonly id: string;
  readonly length: number;
  /** Compresses and seals it on the worker thread (call it only for a new chunk). */
  readonly seal: () => Promise<Uint8Array>;
}

export type LargeFileOutcome =
  | { readonly kind: 'done'; readonly size: number }
  /** Removed since the walk. */
  | { readonly kind: 'missing' }
  /** No longer the file the walk saw (a link or another file in its place): not read. */
  | { readonly kind: 'changed'; readonly message: string }
  | { readonly kind: 'failed'; readonly code: string | undefined; readonly message: string };

/**
 * Worker threads that read, chunk, hash, compress and seal large files (issue #20 item 6): the
 * chunker, HMAC, AES-GCM and their garbage were most of the backup's main thread on large files
 * (profile in the README), so one thread capped a node at their speed. A file is cut on one
 * thread (boundaries depend on every byte before them); several files run on several threads.
 * The repository keeps one for all its backups: a thread starts with the first large file, is
 * shared by the files of every backup after it (one file at a time), does not hold the process
 * open while idle, and all stop after `idleMs` with none in use.
 */
export class LargeFileHasher {
  private readonly workers: Worker[] = [];
  private readonly idle: Worker[] = [];
  private readonly waiting: ((worker: Worker) => void)[] = [];
  private nextJob = 0;
  private closed = false;
  private readonly idleStop: IdleStop;

  constructor(
    private readonly threads: number,
    private readonly data: LargeFileWorkerData,
    idleMs: number = THREADS_IDLE_MS,
  ) {
    this.idleStop = new IdleStop(idleMs, () => {
      if (this.idle.length !== this.workers.length) return;
      const stopping = this.workers.splice(0);
      this.idle.length = 0;
      for (const worker of stopping) void worker.terminate();
    });
  }

  /**
   * Streams `path` through a worker, if it still is the regular file `identity` (opened without
   * following a link; else the outcome is 'changed' and nothing is read): `onChunk` is called for each chunk in file order, and up to
   * `window` chunks wait for its promise at once (the worker pauses until one settles, then drops
   * that chunk). Aborting `signal` stops the worker and rejects with the abort reason; so does a
   * rejected `onChunk`.
   */
  async hash(
    path: string,
    identity: FileIdentity,
    window: number,
    onChunk: (chunk: HashedChunk) => Promise<void>,
    signal: AbortSignal,
  ): Promise<LargeFileOutcome> {
    signal.throwIfAborted();
    const worker = await this.acquire();
    const job = this.nextJob++;
    const send = (message: ToLargeFileWorker) => worker.postMessage(message);
    let failure: { error: unknown } | undefined;
    const stop = (error: unknown) => {
      if (failure) return;
      failure = { error };
      send({ type: 'stop', job });
    };
    const onAbort = () => stop(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const inFlight = new Set<Promise<void>>();
    const sealing = new Map<number, { resolve: (blob: Uint8Array) => void; reject: (error: unknown) => void }>();
    let crashed = false;
    // Listening until the end of this call: seals are asked for after the worker finished reading.
    let onMessage: (message: FromLargeFileWorker) => void = () => {};
    let onError: (error: unknown) => void = () => {};
    try {
      const outcome = await new Promise<LargeFileOutcome>((resolve, reject) => {
        // Bound to this call's async context: the worker's events come in the context it was
        // started in (an earlier backup), and the storage requests onChunk makes are this call's
        // (a StorageMeter counts by context).
        onMessage = AsyncResource.bind((message: FromLargeFileWorker) => {
          if (message.job !== job) return;
          if (message.type === 'sealed') {
            const waiter = sealing.get(message.seq);
            sealing.delete(message.seq);
            if (message.blob) waiter?.resolve(message.blob);
            else waiter?.reject(new Error(`compressing and sealing a chunk failed: ${message.error}`));
            return;
          }
          if (message.type === 'chunk') {
            const { seq, id, length } = message;
            const seal = () =>
              new Promise<Uint8Array>((resolveSeal, rejectSeal) => {
                sealing.set(seq, { resolve: resolveSeal, reject: rejectSeal });
                send({ type: 'seal', job, seq });
              });
            const handled = (failure ? Promise.resolve() : onChunk({ id, length, seal })).then(
              () => send({ type: 'release', job, seq }),
              (error: unknown) => {
                stop(error);
                send({ type: 'release', job, seq });
              },
            );
            inFlight.add(handled);
            void handled.then(() => inFlight.delete(handled));
            return;
          }
          if (message.type === 'end') resolve({ kind: 'done', size: message.size });
          else if (message.type === 'missing') resolve({ kind: 'missing' });
          else if (message.type === 'changed') resolve({ kind: 'changed', message: message.message });
          else resolve({ kind: 'failed', code: message.code, message: message.message });
        });
        onError = (cause: unknown) => {
          crashed = true;
          const error = cause instanceof Error ? cause : new Error(`the large-file worker thread stopped (exit code ${cause})`);
          for (const waiter of sealing.values()) waiter.reject(error);
          reject(error);
        };
        worker.on('message', onMessage);
        worker.once('error', onError);
        worker.once('exit', onError);
        send({ type: 'file', job, path, window, dev: identity.dev, ino: identity.ino });
      });
      // The last chunks' handlers may still run after the worker finished reading.
      await Promise.all(inFlight);
      if (failure) throw failure.error;
      return outcome;
    } finally {
      signal.removeEventListener('abort', onAbort);
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onError);
      if (crashed) {
        // Gone from the list already when close() stopped it.
        const at = this.workers.indexOf(worker);
        if (at >= 0) this.workers.splice(at, 1);
        // Its place is free: a file waiting for a thread gets a new one.
        const waiter = this.closed ? undefined : this.waiting.shift();
        if (waiter) waiter(this.spawn());
      } else this.release(worker);
    }
  }

  private acquire(): Promise<Worker> {
    if (this.closed) return Promise.reject(new Error('the large-file hasher is closed'));
    this.idleStop.busy();
    const free = this.idle.pop();
    if (free) {
      free.ref();
      return Promise.resolve(free);
    }
    if (this.workers.length < this.threads) return Promise.resolve(this.spawn());
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private spawn(): Worker {
    const worker = spawnRepoWorker('large-file-worker', this.data);
    this.workers.push(worker);
    return worker;
  }

  private release(worker: Worker): void {
    if (this.closed) return;
    const waiter = this.waiting.shift();
    if (waiter) {
      waiter(worker);
      return;
    }
    worker.unref();
    this.idle.push(worker);
    if (this.idle.length === this.workers.length) this.idleStop.idle();
  }

  /** Stops every thread now (the repository is closed); a file in progress fails. */
  async close(): Promise<void> {
    this.closed = true;
    this.idleStop.busy();
    await Promise.all(this.workers.splice(0).map((w) => w.terminate()));
  }
}
