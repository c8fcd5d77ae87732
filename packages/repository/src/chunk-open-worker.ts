/**
 * Worker thread body of ChunkOpener (chunk-opener.ts): decrypts, decompresses and re-hashes
 * large sealed chunks for a restore, off the main thread, and keeps each checked plaintext until
 * the main thread knows its place in the file and asks for it to be written (an fd is shared by
 * the process's threads). Plaintext never crosses threads: no copy, no transfer, and its memory
 * is freed where it was allocated.
 */
import { writeSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { ChunkReadError, openChunk } from './chunk-store.js';

export interface ChunkOpenWorkerData {
  readonly chunkIdKey: Uint8Array;
  readonly encryptionKey: Uint8Array;
}

/** Main thread → worker; `blob` is transferred. */
export type ToChunkOpenWorker =
  | { readonly type: 'open'; readonly id: number; readonly chunkId: string; readonly blob: Uint8Array }
  | { readonly type: 'write'; readonly id: number; readonly fd: number; readonly position: number }
  | { readonly type: 'drop'; readonly id: number };

/** Worker → main thread: opened (its length), written, damaged, or what else failed. */
export type FromChunkOpenWorker =
  | { readonly id: number; readonly opened: number }
  | { readonly id: number; readonly written: true }
  | { readonly id: number; readonly corrupt: string }
  | { readonly id: number; readonly failed: string; readonly code?: string };

const data = workerData as ChunkOpenWorkerData;
const keys = { chunkIdKey: Buffer.from(data.chunkIdKey), encryptionKey: Buffer.from(data.encryptionKey) };
const port = parentPort!;
/** Checked plaintexts waiting for their write, by request id. */
const held = new Map<number, Buffer>();
const reply = (message: FromChunkOpenWorker) => port.postMessage(message);

port.on('message', (message: ToChunkOpenWorker) => {
  const { id } = message;
  if (message.type === 'open') {
    try {
      const plaintext = openChunk(keys, message.chunkId, message.blob);
      held.set(id, plaintext);
      reply({ id, opened: plaintext.length });
    } catch (error) {
      const text = error instanceof Error ? error.message : String(error);
      reply(error instanceof ChunkReadError ? { id, corrupt: text } : { id, failed: text });
    }
  } else if (message.type === 'write') {
    const plaintext = held.get(id);
    held.delete(id);
    if (!plaintext) {
      reply({ id, failed: `chunk request ${id} is not held` });
      return;
    }
    try {
      for (let off = 0; off < plaintext.length; )
        off += writeSync(message.fd, plaintext, off, plaintext.length - off, message.position + off);
      reply({ id, written: true });
    } catch (error) {
      reply({ id, failed: error instanceof Error ? error.message : String(error), code: (error as NodeJS.ErrnoException).code });
    }
  } else {
    held.delete(id);
  }
});
