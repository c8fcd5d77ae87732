import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The zstd functions of @bokuweb/zstd-wasm's module (zstd compiled to WebAssembly) this file calls. */
interface ZstdModule {
  readonly HEAPU8: Uint8Array;
  _malloc(bytes: number): number;
  _free(pointer: number): void;
  _ZSTD_createDCtx(): number;
  _ZSTD_decompress_usingDict(
    dctx: number,
    dst: number,
    dstCapacity: number,
    src: number,
    srcSize: number,
    dict: number,
    dictSize: number,
  ): number;
  _ZSTD_isError(code: number): number;
}

/** Output room of a decode, at first: the chunker's largest chunk (a larger frame grows it once). */
const FIRST_OUTPUT_BYTES = 8 * 1024 * 1024;
/** zstd's -ZSTD_error_dstSize_tooSmall, as a size_t error code reads as a wasm32 i32. */
const ZSTD_ERROR_DST_SIZE_TOO_SMALL = -70;
/** Output room never grows past this (a larger frame is left to the native decoder). */
const MAX_OUTPUT_BYTES = 64 * 1024 * 1024;

/**
 * A zstd decoder that writes into memory it keeps: one decompression context, one input and one
 * output region in a WebAssembly memory that grows to the largest frame and is never handed back.
 * The native binding (@toondepauw/node-zstd) allocates per call a stream context with a window
 * buffer, a growing, zero-filled output vector, and a copy between them, all fresh memory freed
 * only when the garbage collector finds the Buffer: up to ~5 ms of page faults per MiB decoded,
 * about a third of a large restore's CPU (perf, README "Chunk ids, compression, encryption"),
 * where this decodes a MiB of log text in ~1.2 ms. One per thread; `decode` is synchronous.
 */
export class ZstdWasmDecoder {
  private src = 0;
  private srcCapacity = 0;
  private dst = 0;
  private dstCapacity = 0;
  private readonly dctx: number;

  private constructor(private readonly wasm: ZstdModule) {
    this.dctx = wasm._ZSTD_createDCtx();
    if (this.dctx === 0) throw new Error('zstd-wasm: cannot create a decompression context');
  }

  /** A decoder on this thread's instance of the WebAssembly module, which the first call loads. */
  static async create(): Promise<ZstdWasmDecoder> {
    loading ??= loadModule();
    return new ZstdWasmDecoder(await loading);
  }

  /**
   * Decompresses the zstd frame `payload` and hands its plaintext to `take` as a view of this
   * decoder's memory, valid only during the call (copy it out). Returns what `take` returned, or
   * undefined when the frame does not decode here (damaged, or larger than MAX_OUTPUT_BYTES): the
   * caller then decodes it with the native binding, which says what is wrong.
   */
  decode<T>(payload: Uint8Array, take: (plaintext: Uint8Array) => T): T | undefined {
    const wasm = this.wasm;
    if (payload.length > this.srcCapacity) {
      if (this.src !== 0) wasm._free(this.src);
      this.srcCapacity = Math.max(payload.length, 1024 * 1024);
      this.src = wasm._malloc(this.srcCapacity);
      if (this.src === 0) return this.reset();
    }
    if (this.dst === 0) {
      this.dstCapacity = FIRST_OUTPUT_BYTES;
      this.dst = wasm._malloc(this.dstCapacity);
      if (this.dst === 0) return this.reset();
    }
    wasm.HEAPU8.set(payload, this.src);
    for (;;) {
      const result = wasm._ZSTD_decompress_usingDict(this.dctx, this.dst, this.dstCapacity, this.src, payload.length, 0, 0);
      if (!wasm._ZSTD_isError(result)) return take(wasm.HEAPU8.subarray(this.dst, this.dst + (result >>> 0)));
      // Too little room (a frame larger than any chunk so far): a larger region once, up to the cap.
      if (result !== ZSTD_ERROR_DST_SIZE_TOO_SMALL || this.dstCapacity >= MAX_OUTPUT_BYTES) return undefined;
      wasm._free(this.dst);
      this.dstCapacity = MAX_OUTPUT_BYTES;
      this.dst = wasm._malloc(this.dstCapacity);
      if (this.dst === 0) return this.reset();
    }
  }

  /** After a failed allocation: regions are made again by the next decode. */
  private reset(): undefined {
    if (this.src !== 0) this.wasm._free(this.src);
    if (this.dst !== 0) this.wasm._free(this.dst);
    this.src = this.dst = this.srcCapacity = this.dstCapacity = 0;
    return undefined;
  }
}

let loading: Promise<ZstdModule> | undefined;

/**
 * Instantiates the module once per thread (a second init would swap the functions under a live
 * decoder). The bytes are read here synchronously, not by the package's init(), whose async
 * readFile waits in libuv's pool behind a restore's pack reads: the module was ready ~1 s into a
 * 1 GiB restore, after each thread had decoded ~170 chunks with the native binding instead.
 */
async function loadModule(): Promise<ZstdModule> {
  const main = createRequire(import.meta.url).resolve('@bokuweb/zstd-wasm');
  // The package exports only its entry; the module beside it holds the wasm functions.
  const { Module, waitInitialized } = createRequire(main)('./module.js') as {
    Module: ZstdModule & { init(wasm: Uint8Array): void };
    waitInitialized(): Promise<void>;
  };
  Module.init(readFileSync(join(dirname(main), 'zstd.wasm')));
  await waitInitialized();
  return Module;
}
