/**
 * Worker thread body of LargeFileHasher (large-file-hasher.ts): reads one large file at a time,
 * cuts it with the repository's chunker and computes each chunk's id; the main thread answers
 * which chunks are new, and only those are compressed and sealed here and sent back (the sealed
 * blob transferred, not copied). The main thread's work per chunk is a lookup and a pack append.
 * At most `window` chunks are held until the main thread releases them, which bounds the memory
 * and lets its bandwidth throttle and cancellation pace the reads.
 */
import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { parentPort, workerData } from 'node:worker_threads';
import { sealCompressed } from './blob.js';
import { Chunker, type ChunkerParams } from './chunker.js';
import { chunkIdOf } from './keys.js';

export interface LargeFileWorkerData {
  readonly chunker: ChunkerParams;
  readonly chunkerSeed: Uint8Array;
  readonly chunkIdKey: Uint8Array;
  readonly encryptionKey: Uint8Array;
}

/** Main thread → worker. */
export type ToLargeFileWorker =
  | {
      readonly type: 'file';
      readonly job: number;
      readonly path: string;
      readonly window: number;
      /** The file the walk saw: read only if the opened descriptor is this regular file. */
      readonly dev: number;
      readonly ino: number;
    }
  /** The chunk is new: compress, seal and send it. */
  | { readonly type: 'seal'; readonly job: number; readonly seq: number }
  /** Done with the chunk (stored, or already in the repository): drop it. */
  | { readonly type: 'release'; readonly job: number; readonly seq: number }
  | { readonly type: 'stop'; readonly job: number };

/** Worker → main thread, in order per job; reading ends with exactly one of end, missing, failed (seals may follow). */
export type FromLargeFileWorker =
  | { readonly type: 'chunk'; readonly job: number; readonly seq: number; readonly id: string; readonly length: number }
  | { readonly type: 'sealed'; readonly job: number; readonly seq: number; readonly blob?: Uint8Array; readonly error?: string }
  | { readonly type: 'end'; readonly job: number; readonly size: number; readonly stopped: boolean }
  | { readonly type: 'missing'; readonly job: number }
  /** Not the file the walk saw any more (a link, a FIFO or another file took its place): nothing was read. */
  | { readonly type: 'changed'; readonly job: number; readonly message: string }
  | { readonly type: 'failed'; readonly job: number; readonly code: string | undefined; readonly message: string };

const data = workerData as LargeFileWorkerData;
const chunker = new Chunker(data.chunker, data.chunkerSeed);
const keys = { chunkIdKey: Buffer.from(data.chunkIdKey) };
const encryptionKey = Buffer.from(data.encryptionKey);
const readBytes = Math.min(4 * 1024 * 1024, data.chunker.maxBytes);
const port = parentPort!;

interface HeldChunk {
  readonly id: string;
  readonly plaintext: Buffer;
  /** From `spareBuffers`; goes back once released and not being sealed. */
  readonly buffer: Buffer;
  sealing: boolean;
  released: boolean;
}

/**
 * Buffers for held chunks, each big enough for the largest chunk, reused from chunk to chunk: a
 * fresh allocation per chunk (and its page faults and GC) was ~8 % of this thread in a profile.
 */
const spareBuffers: Buffer[] = [];

interface Job {
  readonly job: number;
  /** Chunks not yet released, by sequence number. */
  readonly held: Map<number, HeldChunk>;
  stopped: boolean;
  wake?: () => void;
}
let current: Job | undefined;

const post = (message: FromLargeFileWorker, transfer?: ArrayBuffer[]) => port.postMessage(message, transfer);

port.on('message', (message: ToLargeFileWorker) => {
  if (message.type === 'file') {
    void run(message.job, message.path, message.window, { dev: message.dev, ino: message.ino });
    return;
  }
  const job = current;
  if (job?.job !== message.job) return;
  if (message.type === 'seal') {
    const chunk = job.held.get(message.seq);
    if (chunk) void sealChunk(job.job, message.seq, chunk);
    return;
  }
  if (message.type === 'release') {
    const chunk = job.held.get(message.seq);
    job.held.delete(message.seq);
    if (chunk?.sealing) chunk.released = true;
    else if (chunk) spareBuffers.push(chunk.buffer);
  } else {
    job.stopped = true;
  }
  job.wake?.();
});

async function sealChunk(job: number, seq: number, chunk: HeldChunk): Promise<void> {
  chunk.sealing = true;
  try {
    const { blob } = await sealCompressed(encryptionKey, `chunk:${chunk.id}`, chunk.plaintext);
    // Blobs over 4 KiB own their memory and move to the main thread without a copy; smaller ones are copied.
    const own = blob.byteOffset === 0 && blob.byteLength === blob.buffer.byteLength;
    post({ type: 'sealed', job, seq, blob }, own ? [blob.buffer as ArrayBuffer] : undefined);
  } catch (error) {
    post({ type: 'sealed', job, seq, error: error instanceof Error ? error.message : String(error) });
  } finally {
    chunk.sealing = false;
    if (chunk.released) spareBuffers.push(chunk.buffer);
  }
}

async function run(jobId: number, path: string, window: number, identity: Identity): Promise<void> {
  const job: Job = { job: jobId, held: new Map(), stopped: false };
  current = job;
  let file: SequentialFile;
  try {
    file = await openSequential(path, identity);
  } catch (error) {
    post(failure(jobId, error));
    return;
  }
  try {
    let size = 0;
    let seq = 0;
    const allocate = file.direct ? allocateAligned : undefined;
    for await (const chunk of chunker.splitFile(file.read, { readBytes, reuseBuffers: true, allocate })) {
      if (job.stopped) break;
      const id = chunkIdOf(keys, chunk);
      // The chunk lives in a reused read buffer: keep a copy until the main thread has decided.
      const buffer = spareBuffers.pop() ?? Buffer.allocUnsafeSlow(data.chunker.maxBytes);
      buffer.set(chunk);
      job.held.set(seq, { id, plaintext: buffer.subarray(0, chunk.length), buffer, sealing: false, released: false });
      size += chunk.length;
      post({ type: 'chunk', job: jobId, seq: seq++, id, length: chunk.length });
      while (job.held.size >= window && !job.stopped) await new Promise<void>((resolve) => (job.wake = resolve));
    }
    post({ type: 'end', job: jobId, size, stopped: job.stopped });
  } catch (error) {
    post(failure(jobId, error));
  } finally {
    await file.close();
  }
}

/** O_DIRECT needs the buffer address, file position and length aligned to the device's block size; 4 KiB covers every common device. */
const DIRECT_ALIGN_BYTES = 4096;
/** Direct reads only when the chunker's read offsets (maxBytes of headroom) and lengths stay aligned. */
const DIRECT_READS =
  constants.O_DIRECT !== undefined &&
  typeof WebAssembly !== 'undefined' &&
  data.chunker.maxBytes % DIRECT_ALIGN_BYTES === 0 &&
  readBytes % DIRECT_ALIGN_BYTES === 0;

interface SequentialFile {
  readonly direct: boolean;
  readonly read: (buffer: Buffer, offset: number, length: number, position: number) => Promise<number>;
  readonly close: () => Promise<void>;
}

/**
 * Opens a large file for one pass, bypassing the page cache (O_DIRECT) where the file system
 * allows it. Why: after the cache is dropped, copying the file out of the page cache was ~30 %
 * of the whole backup's CPU on our VMs (perf: `_copy_to_iter` under `pread64`; restic pays the
 * same), and a direct read lands in our buffer without that copy — 1 GiB of large files took
 * ~2 CPU s less system time (README, "Direct reads"). A backup also stops evicting the
 * application's hot pages. O_DIRECT reads flush the file's dirty pages first, so they see what
 * a buffered read would. A file system that refuses O_DIRECT (tmpfs: EINVAL at open) is read
 * through the cache; so is everything after the first short direct read (the end of the file,
 * whose unaligned tail position a direct read refuses, or bytes appended since).
 */
async function openSequential(path: string, identity: Identity): Promise<SequentialFile> {
  let direct: FileHandle | undefined;
  if (DIRECT_READS) {
    try {
      direct = await openChecked(path, constants.O_DIRECT, identity);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EINVAL') throw error;
    }
  }
  let buffered = direct ? undefined : await openChecked(path, 0, identity);
  return {
    direct: direct !== undefined,
    async read(buffer, offset, length, position) {
      const handle = direct;
      if (handle) {
        try {
          const { bytesRead } = await handle.read(buffer, offset, length, position);
          if (bytesRead === length) return bytesRead;
          direct = undefined;
          await handle.close();
          return bytesRead;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EINVAL') throw error;
          // Not aligned after all (an unusual device block size): the page cache from here on.
          direct = undefined;
          await handle.close().catch(() => {});
        }
      }
      buffered ??= await openChecked(path, 0, identity);
      return (await buffered.read(buffer, offset, length, position)).bytesRead;
    },
    async close() {
      await direct?.close().catch(() => {});
      await buffered?.close().catch(() => {});
    },
  };
}

/** Node 20 has it; the compiler's libraries (no DOM) do not declare it. */
declare const WebAssembly: { Memory: new (descriptor: { initial: number }) => { buffer: ArrayBuffer } } | undefined;

/** A page-aligned buffer (direct reads need an aligned address; a WebAssembly memory starts on a page). */
function allocateAligned(bytes: number): Buffer {
  const memory = new WebAssembly!.Memory({ initial: Math.ceil(bytes / 65_536) });
  return Buffer.from(memory.buffer, 0, bytes);
}

interface Identity {
  readonly dev: number;
  readonly ino: number;
}

/** Thrown when the path no longer leads to the file the walk saw. */
class ChangedError extends Error {}

/**
 * Opens `path` without following a link (and without blocking on a FIFO swapped in), and only if
 * the descriptor is the regular file the walk saw: a pod may swap the name for a link to a file
 * outside its volume between the walk and this open (SECURITY.md).
 */
async function openChecked(path: string, flags: number, identity: Identity): Promise<FileHandle> {
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | flags);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'ENOTDIR') throw new ChangedError('replaced by a symbolic link (not followed)');
    throw error;
  }
  const st = await handle.stat();
  if (!st.isFile() || st.dev !== identity.dev || st.ino !== identity.ino) {
    await handle.close();
    throw new ChangedError(st.isFile() ? 'replaced by another file' : 'replaced by something not a regular file');
  }
  return handle;
}

function failure(job: number, error: unknown): FromLargeFileWorker {
  if (error instanceof ChangedError) return { type: 'changed', job, message: error.message };
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOENT') return { type: 'missing', job };
  return { type: 'failed', job, code, message: error instanceof Error ? error.message : String(error) };
}
