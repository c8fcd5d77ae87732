/**
 * Worker thread body of ChunkOpener (chunk-opener.ts): decrypts and decompresses large sealed
 * chunks for a restore, off the main thread, and keeps each authenticated plaintext until the main
 * thread knows its place in the file and asks for it to be written (an fd is shared by the
 * process's threads). Plaintext never crosses threads. The blob's memory (transferred here) is
 * decrypted in place and transferred back once it is free again: with the write for a raw chunk
 * (its plaintext is that memory), right after decoding for a compressed one.
 */
import { writeSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import type { ZstdDecodeInto } from './blob.js';
import { ChunkReadError, openChunk } from './chunk-store.js';
import { ZstdWasmDecoder } from './zstd-wasm.js';

export interface ChunkOpenWorkerData {
  readonly chunkIdKey: Uint8Array;
  readonly encryptionKey: Uint8Array;
}

/** Main thread → worker; `blob` is transferred. */
export type ToChunkOpenWorker =
  | { readonly type: 'open'; readonly id: number; readonly chunkId: string; readonly blob: Uint8Array }
  | { readonly type: 'write'; readonly id: number; readonly fd: number; readonly position: number }
  | { readonly type: 'drop'; readonly id: number };

/** Worker → main thread: opened (its length), written, damaged, or what else failed; `memory` is a blob's buffer given back (transferred). */
export type FromChunkOpenWorker = (
  | { readonly id: number; readonly opened: number }
  | { readonly id: number; readonly written: true }
  | { readonly id: number; readonly corrupt: string }
  | { readonly id: number; readonly failed: string; readonly code?: string }
) & { readonly memory?: ArrayBuffer };

const data = workerData as ChunkOpenWorkerData;
const keys = { chunkIdKey: Buffer.from(data.chunkIdKey), encryptionKey: Buffer.from(data.encryptionKey) };
const port = parentPort!;
/**
 * Authenticated plaintexts waiting for their write, by request id, with the blob memory to give
 * back after it, or the pooled buffer a compressed chunk was decoded into.
 */
const held = new Map<number, { readonly plaintext: Buffer; readonly memory?: ArrayBuffer; readonly pooled?: ArrayBuffer }>();
const reply = (message: FromChunkOpenWorker) => port.postMessage(message, message.memory ? [message.memory] : undefined);

/** Decoded-plaintext buffers kept for reuse: about the chunks a thread holds at once. */
const POOL_KEPT = 16;
const POOL_STEP_BYTES = 1024 * 1024;
const pool: ArrayBuffer[] = [];
const pooledBuffers = new WeakSet<ArrayBufferLike>();
function fromPool(length: number): Buffer {
  let best = -1;
  for (let i = 0; i < pool.length; i++) {
    const size = pool[i]!.byteLength;
    if (size >= length && (best < 0 || size < pool[best]!.byteLength)) best = i;
  }
  let memory: ArrayBuffer;
  if (best >= 0) memory = pool.splice(best, 1)[0]!;
  else {
    memory = new ArrayBuffer(Math.max(1, Math.ceil(length / POOL_STEP_BYTES)) * POOL_STEP_BYTES);
    pooledBuffers.add(memory);
  }
  return Buffer.from(memory, 0, length);
}
function toPool(memory: ArrayBuffer | undefined): void {
  if (memory && pool.length < POOL_KEPT) pool.push(memory);
}

// Compressed chunks are decoded by zstd in WebAssembly into this thread's pooled buffers (no fresh
// memory per chunk, zstd-wasm.ts). Requests wait for its module to load (~40 ms CPU): a thread that
// answered at once decoded its first chunks with the native binding (fresh memory each), under load
// most of them (1 GiB restore: 57k page faults waiting, 72-161k not). If it cannot load, the native
// decoder does the work.
let wasmZstd: ZstdWasmDecoder | undefined;
let loaded = false;
const loading = ZstdWasmDecoder.create()
  .then(
    (decoder) => {
      wasmZstd = decoder;
    },
    () => {},
  )
  .finally(() => {
    loaded = true;
  });
const zstdInto: ZstdDecodeInto = (payload) =>
  wasmZstd?.decode(payload, (plaintext) => {
    const out = fromPool(plaintext.length);
    out.set(plaintext);
    return out;
  });

// Requests that came while the module loaded run in order once it has (before any later message).
port.on('message', (message: ToChunkOpenWorker) => {
  if (loaded) handle(message);
  else void loading.then(() => handle(message));
});

function handle(message: ToChunkOpenWorker): void {
  const { id } = message;
  if (message.type === 'open') {
    const memory = message.blob.buffer as ArrayBuffer;
    try {
      const plaintext = openChunk(keys, message.chunkId, message.blob, true, zstdInto);
      const inBlob = plaintext.buffer === memory;
      const pooled = pooledBuffers.has(plaintext.buffer) ? (plaintext.buffer as ArrayBuffer) : undefined;
      held.set(id, { plaintext, memory: inBlob ? memory : undefined, pooled });
      reply({ id, opened: plaintext.length, memory: inBlob ? undefined : memory });
    } catch (error) {
      const text = error instanceof Error ? error.message : String(error);
      reply(error instanceof ChunkReadError ? { id, corrupt: text, memory } : { id, failed: text, memory });
    }
  } else if (message.type === 'write') {
    const chunk = held.get(id);
    held.delete(id);
    if (!chunk) {
      reply({ id, failed: `chunk request ${id} is not held` });
      return;
    }
    const { plaintext, memory, pooled } = chunk;
    try {
      for (let off = 0; off < plaintext.length; )
        off += writeSync(message.fd, plaintext, off, plaintext.length - off, message.position + off);
      reply({ id, written: true, memory });
    } catch (error) {
      reply({ id, failed: error instanceof Error ? error.message : String(error), code: (error as NodeJS.ErrnoException).code, memory });
    } finally {
      toPool(pooled);
    }
  } else {
    toPool(held.get(id)?.pooled);
    held.delete(id);
  }
}
