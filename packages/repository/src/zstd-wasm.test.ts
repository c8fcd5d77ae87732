import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Encoder } from '@toondepauw/node-zstd';
import { describe, expect, it } from 'vitest';
import { decodePayload, Encoding } from './blob.js';
import { ZstdWasmDecoder } from './zstd-wasm.js';

const encoder = new Encoder(2);
const logText = (bytes: number) => {
  const lines: string[] = [];
  for (let n = 0, size = 0; size < bytes; n++) {
    const line = `2026-12-06T12:00:${n % 60} INFO req=${randomBytes(3).toString('hex')} seq=${n}\n`;
    lines.push(line);
    size += line.length;
  }
  return Buffer.from(lines.join('')).subarray(0, bytes);
};

describe('zstd in WebAssembly (restore threads)', () => {
  // First in the file: this process has not loaded the module yet (vitest runs each file in a fork of its own).
  it('loads while every thread of libuv’s pool is busy (a restore’s pack reads fill it)', async () => {
    // Each open of a FIFO without a writer holds one pool thread until a writer opens it.
    const dir = mkdtempSync(join(tmpdir(), 'zstd-pool-'));
    const fifos = Array.from({ length: Number(process.env.UV_THREADPOOL_SIZE ?? 4) }, (_, i) => join(dir, `fifo-${i}`));
    execFileSync('mkfifo', fifos);
    const held = fifos.map((fifo) => open(fifo, 'r'));
    try {
      const decoder = await ZstdWasmDecoder.create();
      const plaintext = logText(100_000);
      expect(decoder.decode(encoder.encodeSync(plaintext), (view) => Buffer.from(view))?.equals(plaintext)).toBe(true);
    } finally {
      for (const fifo of fifos) closeSync(openSync(fifo, 'w'));
      for (const handle of await Promise.all(held)) await handle.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('decodes what the native encoder wrote, small, large and past its first output room, into the caller’s memory', async () => {
    const decoder = await ZstdWasmDecoder.create();
    // 9 MiB is past the first 8 MiB of output room: the region grows once and the frame decodes.
    for (const plaintext of [Buffer.from('x'), logText(300_000), logText(9 * 1024 * 1024), randomBytes(200_000), logText(70_000)]) {
      const frame = encoder.encodeSync(plaintext);
      const copied = decoder.decode(frame, (view) => Buffer.from(view));
      expect(copied?.equals(plaintext)).toBe(true);
      // Through decodePayload: the caller's buffer comes back, equal to the native decoder's output.
      const out = Buffer.alloc(plaintext.length);
      const decoded = decodePayload(Encoding.Zstd, frame, (payload) =>
        decoder.decode(payload, (view) => {
          out.set(view);
          return out;
        }),
      );
      expect(decoded.buffer).toBe(out.buffer);
      expect(decoded.equals(decodePayload(Encoding.Zstd, frame))).toBe(true);
    }
  });

  it('a frame it cannot decode is left to the native decoder, which says what is wrong', async () => {
    const decoder = await ZstdWasmDecoder.create();
    const frame = encoder.encodeSync(logText(100_000));
    const damaged = Buffer.from(frame.subarray(0, frame.length - 10));
    expect(decoder.decode(damaged, () => 'taken')).toBeUndefined();
    expect(() => decodePayload(Encoding.Zstd, damaged, (payload) => decoder.decode(payload, (view) => Buffer.from(view)))).toThrow();
    // Still usable after a failure.
    expect(decoder.decode(frame, (view) => view.length)).toBe(100_000);
  });
});
