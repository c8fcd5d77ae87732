import { hkdfSync } from 'node:crypto';

/**
 * Content-defined chunking, FastCDC style (Xia et al., USENIX ATC 2016): a gear rolling hash,
 * skip the first `minBytes` of every chunk, a stricter mask before the average size and a looser
 * one after it ("normalised chunking") so sizes cluster around the average.
 *
 * Why content-defined: an insertion near the start of a file shifts every later byte. Fixed-size
 * chunks would all change and be stored again; content-defined boundaries move with the data, so
 * only the chunks around the edit are new.
 */
export interface ChunkerParams {
  readonly minBytes: number;
  readonly avgBytes: number;
  readonly maxBytes: number;
}

export const DEFAULT_CHUNKER_PARAMS: ChunkerParams = Object.freeze({
  minBytes: 512 * 1024,
  avgBytes: 1024 * 1024,
  maxBytes: 8 * 1024 * 1024,
});

export function validateChunkerParams(params: ChunkerParams): string | undefined {
  const { minBytes, avgBytes, maxBytes } = params;
  if (![minBytes, avgBytes, maxBytes].every((n) => Number.isInteger(n) && n > 0)) return 'chunk sizes must be positive integers';
  if (!(minBytes < avgBytes && avgBytes < maxBytes)) return 'chunk sizes must satisfy min < avg < max';
  if (2 ** Math.round(Math.log2(avgBytes)) !== avgBytes) return 'the average chunk size must be a power of two';
  if (avgBytes < 256 || Math.log2(avgBytes) + 2 > 31) return 'the average chunk size must be between 256 B and 512 MiB';
  return undefined;
}

/** Reads into `buffer[offset, offset+length)` from file `position`; resolves to the bytes read (0 at end of file). */
export type PositionalRead = (buffer: Buffer, offset: number, length: number, position: number) => Promise<number>;

export class Chunker {
  readonly params: ChunkerParams;
  private readonly gear: Int32Array;
  private readonly maskSmall: number;
  private readonly maskLarge: number;
  /** The hash where the last `roll` stopped without a cut (a second return value without an allocation). */
  private rolledHash = 0;

  /** `seed` makes the gear table (and so the boundaries) specific to one repository. */
  constructor(params: ChunkerParams, seed: Uint8Array) {
    const problem = validateChunkerParams(params);
    if (problem) throw new RangeError(problem);
    this.params = params;
    // hkdfSync returns an ArrayBuffer: view its bytes as 256 32-bit gear values.
    this.gear = new Int32Array(hkdfSync('sha256', seed, Buffer.alloc(0), 'stowage/gear-table', 256 * 4));
    const bits = Math.log2(params.avgBytes);
    // The gear hash shifts left one bit per byte, so its high bits depend on the last 32 bytes:
    // masks use the top bits. Normalisation level 2: two bits harder before avg, two easier after.
    this.maskSmall = topBits(bits + 2);
    this.maskLarge = topBits(bits - 2);
  }

  /**
   * Length of the next chunk of `data[start, end)`. When `final` is false and no boundary was found
   * in the available bytes (and fewer than `maxBytes` are available), returns -1: read more first.
   */
  nextCut(data: Uint8Array, start: number, end: number, final: boolean, scannedBytes = 0): number {
    const { minBytes, avgBytes, maxBytes } = this.params;
    const available = end - start;
    if (available <= minBytes) return final ? available : -1;
    const limit = Math.min(available, maxBytes);
    const normal = Math.min(avgBytes, limit);
    const gear = this.gear;
    let hash = 0;
    let i = start + minBytes;
    // Resuming after "read more": bytes up to `scannedBytes` held no boundary. The hash depends on
    // the last 32 bytes only, so rebuilding it from 32 bytes back gives the same values as a full scan.
    const resumeAt = start + scannedBytes;
    if (resumeAt - 32 > i) {
      for (i = resumeAt - 32; i < resumeAt; i++) hash = ((hash << 1) + gear[data[i]!]!) | 0;
    }
    const normalEnd = start + normal;
    if (i < normalEnd) {
      const cut = this.roll(data, i, normalEnd, this.maskSmall, hash);
      if (cut >= 0) return cut - start;
      hash = this.rolledHash;
      i = normalEnd;
    }
    const limitEnd = start + limit;
    if (i < limitEnd) {
      const cut = this.roll(data, i, limitEnd, this.maskLarge, hash);
      if (cut >= 0) return cut - start;
    }
    if (limit === maxBytes || final) return limit;
    return -1;
  }

  /**
   * Rolls the gear hash from `hash` over `data[from, to)` and returns the index just past the
   * first byte where `(hash & mask) === 0`, or -1 with the final hash in `rolledHash`. The same
   * per-byte recurrence and test as a plain byte loop (so the same cut points), but reading four
   * bytes per load from a 32-bit view once aligned: twice as fast in V8 as indexing bytes (fewer
   * loads and bounds checks), which made the chunker the largest cost of re-reading a changed file.
   */
  private roll(data: Uint8Array, from: number, to: number, mask: number, hash: number): number {
    const gear = this.gear;
    let i = from;
    // Byte by byte up to a 4-byte boundary of the underlying memory (all the way on big-endian hosts).
    const wordsFrom = LITTLE_ENDIAN ? Math.min(to, i + ((4 - ((data.byteOffset + i) & 3)) & 3)) : to;
    for (; i < wordsFrom; i++) {
      hash = ((hash << 1) + gear[data[i]!]!) | 0;
      if ((hash & mask) === 0) return i + 1;
    }
    const wordCount = (to - i) >>> 2;
    if (wordCount > 0) {
      const words = new Uint32Array(data.buffer, data.byteOffset + i, wordCount);
      for (let w = 0; w < wordCount; w++) {
        // Little-endian: the lowest byte of the word comes first in the data.
        const word = words[w]!;
        hash = ((hash << 1) + gear[word & 0xff]!) | 0;
        if ((hash & mask) === 0) return i + 4 * w + 1;
        hash = ((hash << 1) + gear[(word >>> 8) & 0xff]!) | 0;
        if ((hash & mask) === 0) return i + 4 * w + 2;
        hash = ((hash << 1) + gear[(word >>> 16) & 0xff]!) | 0;
        if ((hash & mask) === 0) return i + 4 * w + 3;
        hash = ((hash << 1) + gear[word >>> 24]!) | 0;
        if ((hash & mask) === 0) return i + 4 * w + 4;
      }
      i += 4 * wordCount;
    }
    for (; i < to; i++) {
      hash = ((hash << 1) + gear[data[i]!]!) | 0;
      if ((hash & mask) === 0) return i + 1;
    }
    this.rolledHash = hash;
    return -1;
  }

  /** Splits a buffer held in memory (small files, tests). */
  *split(data: Uint8Array): Generator<Uint8Array> {
    let offset = 0;
    while (offset < data.length) {
      const length = this.nextCut(data, offset, data.length, true);
      yield data.subarray(offset, offset + length);
      offset += length;
    }
  }

  /**
   * Streams the chunks of a file through `read`. One read is always in flight while the caller works on
   * the previous chunk (read-ahead), so disk and CPU overlap. `beforeRead(n)` runs before each
   * read (bandwidth throttle, cancellation) and may throw to stop. With `reuseBuffers`, two read
   * buffers take turns (no 12 MiB allocation and its GC per read): a yielded chunk is then valid
   * only until the caller asks for the next one, so it must be copied or consumed at once.
   * `allocate` makes the read buffers (page-aligned ones for direct reads).
   */
  async *splitFile(
    read: PositionalRead,
    options: {
      readBytes?: number;
      beforeRead?: (bytes: number) => Promise<void>;
      reuseBuffers?: boolean;
      allocate?: (bytes: number) => Buffer;
    } = {},
  ) {
    const readBytes = options.readBytes ?? 4 * 1024 * 1024;
    // Each block is read behind `headroom` spare bytes, so the unconsumed tail of the previous
    // block is copied in front of it (one small copy) instead of concatenating both.
    const headroom = this.params.maxBytes;
    const spare: Buffer[] = [];
    let position = 0;
    const readBlock = async (): Promise<{ buffer: Buffer; filled: number }> => {
      await options.beforeRead?.(readBytes);
      const buffer = spare.pop() ?? (options.allocate ?? Buffer.allocUnsafe)(headroom + readBytes);
      let filled = 0;
      while (filled < readBytes) {
        const bytesRead = await read(buffer, headroom + filled, readBytes - filled, position);
        position += bytesRead;
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return { buffer, filled };
    };
    let pending: Buffer = Buffer.alloc(0);
    let block: Buffer | undefined;
    let eof = false;
    let next: Promise<{ buffer: Buffer; filled: number }> | undefined = readBlock();
    // Never leave a rejected read-ahead unobserved when the consumer stops early.
    next.catch(() => {});
    try {
      for (;;) {
        let cut = this.nextCut(pending, 0, pending.length, eof);
        while (cut === -1) {
          // Only reached with fewer than maxBytes pending, so the tail always fits the headroom.
          const scanned = pending.length;
          const { buffer, filled } = await next!;
          pending.copy(buffer, headroom - pending.length);
          pending = buffer.subarray(headroom - pending.length, headroom + filled);
          // The previous block's chunks were consumed and its tail copied: it can take the next read.
          if (options.reuseBuffers && block) spare.push(block);
          block = buffer;
          if (filled < readBytes) {
            eof = true;
            next = undefined;
          } else {
            next = readBlock();
            next.catch(() => {});
          }
          cut = this.nextCut(pending, 0, pending.length, eof, scanned);
        }
        if (cut === 0) return;
        yield pending.subarray(0, cut);
        pending = pending.subarray(cut);
        if (pending.length === 0 && eof) return;
      }
    } finally {
      // Let an outstanding read finish before the caller closes the file handle.
      if (next) await next.catch(() => {});
    }
  }
}

/** Whether a Uint32Array sees the bytes of a word lowest first (x86, arm64), as `roll` assumes. */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

function topBits(count: number): number {
  return (0xffffffff << (32 - count)) | 0;
}
