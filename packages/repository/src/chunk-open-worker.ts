/**
 * Worker thread body of ChunkOpener (chunk-opener.ts): decrypts, decompresses and re-hashes
 * large sealed chunks for a restore, off the main thread, and sends each plaintext back.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ChunkReadError, openChunk } from './chunk-store.js';

export interface ChunkOpenWorkerData {
  readonly chunkIdKey: Uint8Array;
  readonly encryptionKey: Uint8Array;
}

/** Main thread → worker; `blob` is transferred. */
export interface ToChunkOpenWorker {
  readonly id: number;
  readonly chunkId: string;
  readonly blob: Uint8Array;
}

/** Worker → main thread: the checked plaintext, or why the chunk is damaged (or what else failed). */
export type FromChunkOpenWorker =
  | { readonly id: number; readonly plaintext: Uint8Array }
  | { readonly id: number; readonly corrupt: string }
  | { readonly id: number; readonly failed: string };

const data = workerData as ChunkOpenWorkerData;
const keys = { chunkIdKey: Buffer.from(data.chunkIdKey), encryptionKey: Buffer.from(data.encryptionKey) };
const port = parentPort!;

port.on('message', ({ id, chunkId, blob }: ToChunkOpenWorker) => {
  let plaintext: Buffer;
  try {
    plaintext = openChunk(keys, chunkId, blob);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    port.postMessage(error instanceof ChunkReadError ? { id, corrupt: message } : { id, failed: message });
    return;
  }
  // A plaintext that owns its memory moves without a copy. zstd's output buffer cannot be
  // detached: Node 20 copies it, newer versions refuse, hence the copying fallback.
  const reply: FromChunkOpenWorker = { id, plaintext };
  try {
    port.postMessage(reply, plaintext.byteLength > 4096 ? [plaintext.buffer as ArrayBuffer] : undefined);
  } catch {
    port.postMessage(reply);
  }
});
