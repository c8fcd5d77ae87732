import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

/** One file of a batch: its bytes, or why there are none. */
export type SmallFileRead =
  | { readonly kind: 'read'; readonly data: Buffer }
  /** Larger than the walk said: the caller streams it instead. */
  | { readonly kind: 'grew' }
  /** Removed since the walk. */
  | { readonly kind: 'missing' }
  | { readonly kind: 'failed'; readonly code: string | undefined; readonly message: string };

interface WorkerReply {
  readonly id: number;
  readonly buffer: ArrayBuffer;
  readonly results: (
    | { kind: 'read'; offset: number; length: number }
    | { kind: 'grew' | 'missing' }
    | { kind: 'failed'; code?: string; message: string }
  )[];
}

/**
 * Plain JavaScript, so it runs the same under tsx, vitest and the compiled package. Reads each file
 * of a batch with synchronous calls into one ArrayBuffer (transferred back, not copied): one
 * message per batch instead of three thread-pool round trips (open, read, close) per file.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { openSync, readSync, closeSync } = require('node:fs');
parentPort.on('message', ({ id, files }) => {
  let total = 0;
  for (const f of files) total += f.size + 1;
  const buffer = new ArrayBuffer(total);
  const bytes = new Uint8Array(buffer);
  const results = [];
  let offset = 0;
  for (const f of files) {
    let fd;
    try {
      fd = openSync(f.path, 'r');
      // size + 1 bytes: reading one more than the walk saw tells that the file grew.
      let length = 0;
      for (;;) {
        const n = readSync(fd, bytes, offset + length, f.size + 1 - length, length);
        if (n === 0) break;
        length += n;
        if (length > f.size) break;
      }
      results.push(length > f.size ? { kind: 'grew' } : { kind: 'read', offset, length });
    } catch (error) {
      results.push(error.code === 'ENOENT' ? { kind: 'missing' } : { kind: 'failed', code: error.code, message: error.message });
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
    offset += f.size + 1;
  }
  parentPort.postMessage({ id, buffer, results }, [buffer]);
});
`;

/** Threads reading small files: `STOWAGE_REPO_THREADS`, default one per core, 2 to 8 (more only added contention on our 2-core VMs). */
export function defaultReadThreads(env: NodeJS.ProcessEnv = process.env): number {
  const configured = Number(env.STOWAGE_REPO_THREADS);
  if (Number.isInteger(configured) && configured > 0) return configured;
  return Math.min(8, Math.max(2, availableParallelism()));
}

/** A few worker threads reading batches of small files, round robin. */
export class SmallFileReader {
  private readonly workers: Worker[];
  private readonly pending = new Map<number, { resolve: (reply: WorkerReply) => void; reject: (error: unknown) => void }>();
  private nextId = 0;
  private nextWorker = 0;

  constructor(threads: number) {
    this.workers = Array.from({ length: threads }, () => {
      const worker = new Worker(WORKER_SOURCE, { eval: true });
      worker.on('message', (reply: WorkerReply) => {
        const waiter = this.pending.get(reply.id);
        this.pending.delete(reply.id);
        waiter?.resolve(reply);
      });
      worker.on('error', (error) => {
        for (const waiter of this.pending.values()) waiter.reject(error);
        this.pending.clear();
      });
      return worker;
    });
  }

  async read(files: readonly { readonly path: string; readonly size: number }[]): Promise<SmallFileRead[]> {
    const id = this.nextId++;
    const worker = this.workers[this.nextWorker++ % this.workers.length]!;
    const reply = await new Promise<WorkerReply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, files: files.map(({ path, size }) => ({ path, size })) });
    });
    return reply.results.map((r) => {
      if (r.kind === 'read') return { kind: 'read', data: Buffer.from(reply.buffer, r.offset, r.length) };
      if (r.kind === 'failed') return { kind: 'failed', code: r.code, message: r.message };
      return { kind: r.kind };
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
