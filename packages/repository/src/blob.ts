import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import { Decoder, Encoder } from '@toondepauw/node-zstd';

/**
 * Sealed blob format (chunks, pack indexes, snapshot manifests):
 *
 *   version(1) = 1 | nonce(12) | AES-256-GCM ciphertext of [ encoding(1) | payload ] | tag(16)
 *
 * `encoding` is 0 for raw, 1 for raw deflate (written before zstd; still read), 2 for zstd. The associated data binds a blob to its name
 * (`chunk:<id>`, `snapshot:<id>`, …), so a blob moved under another name fails authentication.
 */
const FORMAT_VERSION = 1;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
export const SEAL_OVERHEAD_BYTES = 1 + NONCE_BYTES + 1 + TAG_BYTES;

export const Encoding = { Raw: 0, Deflate: 1, Zstd: 2 } as const;

/**
 * zstd level 2 (measured, README "Chunk ids, compression, encryption"): on the benchmark's log
 * text 0.178 of the size against level 1's 0.201 at the same encode and decode speed (interleaved
 * runs); deflate level 1 before gave 0.205 at under half the speed.
 */
const ZSTD_LEVEL = 2;
const zstdEncoder = new Encoder(ZSTD_LEVEL);
const zstdDecoder = new Decoder();

/** Chunks up to this size are compressed whole to decide; larger ones are judged on a sample. */
const SAMPLE_BYTES = 16 * 1024;
/** Compress only if the sample shrinks to at most this fraction (random data stays near 1.0). */
const WORTH_COMPRESSING_RATIO = 0.9;
/** Chunks smaller than this are stored raw: a compression call costs more than the few bytes it could save. */
const TINY_CHUNK_BYTES = 512;
/** Chunks up to this size are compressed on the calling thread; larger ones on the libuv pool. */
const SYNC_COMPRESS_MAX_BYTES = 64 * 1024;

export class BlobAuthError extends Error {
  override readonly name = 'BlobAuthError';
}

export interface SealOptions {
  /** Try zstd (on a sample first). Default true. */
  readonly compress?: boolean;
}

/** c·log2(c) for every count a 4 KiB sample (maybeCompress) can hold. */
const C_LOG2_C = Float64Array.from({ length: 4097 }, (_, c) => (c === 0 ? 0 : c * Math.log2(c)));

/**
 * Order-0 entropy of `data`, in bits per byte. Random (or already compressed or
 * encrypted) data is ≈ 8; text and most binaries are well below. A histogram costs microseconds,
 * a compression call on 4 KiB tens, so it screens out incompressible data first.
 */
export function byteEntropy(data: Uint8Array): number {
  const counts = new Uint32Array(256);
  const n = data.length;
  if (n === 0) return 0;
  for (let i = 0; i < n; i++) counts[data[i]!]!++;
  // −Σ p·log2(p) with p = c/n is log2(n) − Σ c·log2(c) / n: table reads instead of 256 log2
  // calls, which were a quarter of this function's time on every 4 KiB file of a backup (perf).
  let sum = 0;
  for (let b = 0; b < 256; b++) {
    const c = counts[b]!;
    sum += c < C_LOG2_C.length ? C_LOG2_C[c]! : c * Math.log2(c);
  }
  return Math.max(0, Math.log2(n) - sum / n);
}

/** Above this many bits per byte the data is treated as incompressible without trying to compress. */
const INCOMPRESSIBLE_BITS_PER_BYTE = 7.5;

function zstd(data: Uint8Array): Buffer {
  return zstdEncoder.encodeSync(Buffer.from(data.buffer, data.byteOffset, data.length));
}

/** Compresses `plaintext` with zstd if it pays off; random data costs a byte histogram, never a compression pass. */
export async function maybeCompress(plaintext: Uint8Array): Promise<{ encoding: number; payload: Uint8Array }> {
  if (plaintext.length < TINY_CHUNK_BYTES) return { encoding: Encoding.Raw, payload: plaintext };
  // 4 KiB from the middle: the start of a file is often a header unlike the rest.
  const middle = Math.max(0, Math.floor(plaintext.length / 2) - 2048);
  if (byteEntropy(plaintext.subarray(middle, middle + 4096)) >= INCOMPRESSIBLE_BITS_PER_BYTE) {
    return { encoding: Encoding.Raw, payload: plaintext };
  }
  if (plaintext.length <= SAMPLE_BYTES) {
    const compressed = zstd(plaintext);
    return compressed.length < plaintext.length * WORTH_COMPRESSING_RATIO
      ? { encoding: Encoding.Zstd, payload: compressed }
      : { encoding: Encoding.Raw, payload: plaintext };
  }
  const sampleStart = Math.floor((plaintext.length - SAMPLE_BYTES) / 2);
  if (zstd(plaintext.subarray(sampleStart, sampleStart + SAMPLE_BYTES)).length >= SAMPLE_BYTES * WORTH_COMPRESSING_RATIO) {
    return { encoding: Encoding.Raw, payload: plaintext };
  }
  const input = Buffer.from(plaintext.buffer, plaintext.byteOffset, plaintext.length);
  // Large chunks are compressed on the libuv pool, off the thread that hashes and encrypts.
  const compressed = plaintext.length <= SYNC_COMPRESS_MAX_BYTES ? zstdEncoder.encodeSync(input) : await zstdEncoder.encode(input);
  return compressed.length < plaintext.length
    ? { encoding: Encoding.Zstd, payload: compressed }
    : { encoding: Encoding.Raw, payload: plaintext };
}

const CIPHER_SLICE_BYTES = 16 * 1024;

export function seal(key: Buffer, associatedData: string, encoding: number, payload: Uint8Array): Buffer {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(Buffer.from(associatedData, 'utf8'));
  const out = Buffer.allocUnsafe(payload.length + SEAL_OVERHEAD_BYTES);
  out[0] = FORMAT_VERSION;
  nonce.copy(out, 1);
  let offset = 1 + NONCE_BYTES;
  offset += cipher.update(Buffer.of(encoding)).copy(out, offset);
  // In slices: each update returns a new buffer, and a 1 MiB one is fresh memory (page faults,
  // then freed at GC) every time, while 16 KiB ones reuse the heap; half the CPU per sealed MiB here.
  for (let at = 0; at < payload.length; at += CIPHER_SLICE_BYTES) {
    offset += cipher.update(payload.subarray(at, at + CIPHER_SLICE_BYTES)).copy(out, offset);
  }
  offset += cipher.final().copy(out, offset);
  cipher.getAuthTag().copy(out, offset);
  return out;
}

export async function sealCompressed(key: Buffer, associatedData: string, plaintext: Uint8Array, options: SealOptions = {}) {
  const { encoding, payload } =
    options.compress === false ? { encoding: Encoding.Raw, payload: plaintext } : await maybeCompress(plaintext);
  return { blob: seal(key, associatedData, encoding, payload), compressed: encoding !== Encoding.Raw };
}

/**
 * Ciphertext is deciphered in slices of this size: each update's output is new memory, and 1 MiB
 * of it is fresh pages every time (64 KiB measured ~2× less CPU than 1 MiB). On the restore's
 * opener threads, between their other buffers, 16 KiB faulted less again: 1 GiB restore, 3 runs
 * alternating, 4.2–4.5 against 4.6–5.2 CPU s, 55–58k page faults against 64–100k.
 */
const DECIPHER_SLICE_BYTES = 16 * 1024;

/** Bytes of payload (still encoded) a sealed blob holds. */
export function payloadLength(blob: Uint8Array): number {
  return Math.max(0, blob.length - SEAL_OVERHEAD_BYTES);
}

/**
 * Decrypts and authenticates `blob`, writing its payload (still encoded) to `target` from offset 0,
 * and returns the encoding; throws BlobAuthError when the blob was altered or sealed under other
 * data (then `target` holds unauthenticated bytes and must not be used). `target` may be the
 * blob's own memory (same buffer and offset): each slice is written 14 bytes before where it was
 * read, so the write never overtakes the read — a restore reuses the read buffer for the plaintext.
 */
export function decryptInto(key: Buffer, associatedData: string, blob: Uint8Array, target: Uint8Array): number {
  if (blob.length < SEAL_OVERHEAD_BYTES) throw new BlobAuthError(`blob too short (${blob.length} bytes)`);
  if (blob[0] !== FORMAT_VERSION) throw new BlobAuthError(`unknown blob format version ${blob[0]}`);
  if (target.length < payloadLength(blob)) throw new RangeError(`target of ${target.length} bytes for a payload of ${payloadLength(blob)}`);
  const nonce = blob.subarray(1, 1 + NONCE_BYTES);
  const end = blob.length - TAG_BYTES;
  const decipher = createDecipheriv('aes-256-gcm', key, nonce);
  decipher.setAAD(Buffer.from(associatedData, 'utf8'));
  decipher.setAuthTag(blob.subarray(end));
  let encoding = -1;
  let written = 0;
  const put = (plain: Buffer) => {
    let from = 0;
    if (encoding < 0 && plain.length > 0) {
      encoding = plain[0]!;
      from = 1;
    }
    target.set(plain.subarray(from), written);
    written += plain.length - from;
  };
  try {
    for (let at = 1 + NONCE_BYTES; at < end; at += DECIPHER_SLICE_BYTES)
      put(decipher.update(blob.subarray(at, Math.min(end, at + DECIPHER_SLICE_BYTES))));
    put(decipher.final()); // empty for GCM
  } catch (cause) {
    throw new BlobAuthError('authentication failed (altered, truncated, or sealed under another key or name)', { cause });
  }
  return encoding;
}

/**
 * Decodes a zstd payload into memory the caller keeps (chunk-open-worker.ts: ZstdWasmDecoder and a
 * pool of buffers), or returns undefined to leave it to the native decoder.
 */
export type ZstdDecodeInto = (payload: Buffer) => Buffer | undefined;

/** The plaintext of an authenticated payload: `payload` itself when stored raw, else a new buffer (or `zstdInto`'s). */
export function decodePayload(encoding: number, payload: Buffer, zstdInto?: ZstdDecodeInto): Buffer {
  if (encoding === Encoding.Raw) return payload;
  if (encoding === Encoding.Zstd) return zstdInto?.(payload) ?? zstdDecoder.decodeSync(payload);
  if (encoding === Encoding.Deflate) return inflateRawSync(payload);
  throw new BlobAuthError(`unknown payload encoding ${encoding}`);
}

/** Decrypts and decompresses into new memory; throws BlobAuthError when the blob was altered or sealed under other data. */
export function unseal(key: Buffer, associatedData: string, blob: Uint8Array): Buffer {
  const payload = Buffer.allocUnsafe(payloadLength(blob));
  return decodePayload(decryptInto(key, associatedData, blob, payload), payload);
}

/** JSON below this size is sealed raw (readers take both encodings). */
const SMALL_JSON_BYTES = 4096;

/**
 * Seals a JSON document (pack index, snapshot manifest). Small ones are stored raw: a compression
 * call on them costs more (on the writer and on every agent that loads the index) than the bytes it saves.
 */
export function sealJson(key: Buffer, associatedData: string, value: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(value), 'utf8');
  if (json.length < SMALL_JSON_BYTES) return seal(key, associatedData, Encoding.Raw, json);
  return seal(key, associatedData, Encoding.Zstd, zstd(json));
}

export function unsealJson(key: Buffer, associatedData: string, blob: Uint8Array): unknown {
  return JSON.parse(unseal(key, associatedData, blob).toString('utf8'));
}
