import { write } from 'node:fs';
import { promisify } from 'node:util';
import { ObjectNotFoundError, type ObjectUpload, type RepoBackend } from './backend.js';
import { BlobAuthError, decodePayload, decryptInto, payloadLength, sealCompressed, sealJson, unsealJson } from './blob.js';
import { ChunkOpener } from './chunk-opener.js';
import { chunkIdOf, type RepoKeys } from './keys.js';
import {
  baseName,
  CHUNK_ID,
  HEX_ID,
  INDEX_PREFIX,
  indexKey,
  LOOSE_PREFIX,
  looseKey,
  packKey,
  RETIRED_INDEX_PREFIX,
  RETIRED_LOOSE_PREFIX,
  randomId,
  retiredIndexKey,
  retiredLooseKey,
} from './layout.js';

/** Index objects read at once by refreshIndexes. */
const INDEX_READS_IN_FLIGHT = 32;

/** Where one copy of a chunk lives. Concurrent writers may leave several copies; any good one will do. */
export type ChunkLocation =
  | { readonly kind: 'loose' }
  | { readonly kind: 'pack'; readonly packId: string; readonly offset: number; readonly length: number };

interface PackIndexEntry {
  readonly id: string;
  readonly offset: number;
  readonly length: number;
}
interface PackIndex {
  readonly packId: string;
  readonly entries: readonly PackIndexEntry[];
}

export interface ChunkStoreOptions {
  /** Chunks of at most this many plaintext bytes go into packs; larger ones are stored loose. 0 = everything loose (benchmark comparison only). */
  readonly packBlobMaxBytes: number;
  /** A pack is closed and indexed once it reaches this size. */
  readonly packTargetBytes: number;
}

export type ChunkProblem = 'missing' | 'corrupt';

export class ChunkReadError extends Error {
  override readonly name = 'ChunkReadError';
  constructor(
    readonly chunkId: string,
    readonly problem: ChunkProblem,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * The chunks of one repository: which exist (pack indexes in memory, loose files on disk), how to
 * read and check one, and writers for backup sessions.
 */
export class ChunkStore {
  private readonly packed = new Map<string, ChunkLocation[]>();
  private readonly knownLoose = new Set<string>();
  private readonly loadedIndexes = new Set<string>();
  /**
   * Packs prune has retired (their index moved to prune/retired-index/): read as a last resort
   * by restore and verify during the grace period, never deduplicated against (README "Prune").
   */
  private readonly retired = new Map<string, ChunkLocation[]>();
  private readonly loadedRetired = new Set<string>();
  /** Indexes that failed to decrypt; verify reports them. */
  readonly unreadableIndexes = new Map<string, string>();

  constructor(
    readonly backend: RepoBackend,
    readonly keys: RepoKeys,
    readonly options: ChunkStoreOptions,
  ) {}

  /**
   * Loads pack indexes written since the last call (by this or any other writer). Every backup,
   * restore and verify starts with this, so a node agent reads only the few indexes other agents
   * wrote since its last backup.
   */
  async refreshIndexes(): Promise<void> {
    const [listed, retiredListed] = await Promise.all(
      [INDEX_PREFIX, RETIRED_INDEX_PREFIX].map(async (prefix) =>
        (await this.backend.list(prefix)).map(baseName).filter((packId) => HEX_ID.test(packId)),
      ),
    );
    this.knownLoose.clear(); // prune moves unused loose chunks away: look them up again
    forgetUnlisted(listed!, this.loadedIndexes, this.packed);
    forgetUnlisted(retiredListed!, this.loadedRetired, this.retired);
    await this.loadIndexes(
      listed!.filter((packId) => !this.loadedIndexes.has(packId)),
      indexKey,
      (packId, entries) => {
        this.loadedIndexes.add(packId);
        this.unreadableIndexes.delete(packId);
        for (const entry of entries) this.addPacked(entry.id, { kind: 'pack', packId, offset: entry.offset, length: entry.length });
      },
      (packId, why) => this.unreadableIndexes.set(packId, why),
    );
    await this.loadIndexes(
      retiredListed!.filter((packId) => !this.loadedRetired.has(packId)),
      retiredIndexKey,
      (packId, entries) => {
        this.loadedRetired.add(packId);
        for (const entry of entries)
          addLocation(this.retired, entry.id, { kind: 'pack', packId, offset: entry.offset, length: entry.length });
      },
      () => {}, // a last-resort copy only; verify reads the retired packs themselves
    );
  }

  private async loadIndexes(
    packIds: readonly string[],
    keyOf: (packId: string) => string,
    onIndex: (packId: string, entries: readonly PackIndexEntry[]) => void,
    onError: (packId: string, why: string) => void,
  ): Promise<void> {
    let next = 0;
    const reader = async () => {
      while (next < packIds.length) {
        const packId = packIds[next++]!;
        let index: PackIndex;
        try {
          const sealed = await this.backend.get(keyOf(packId));
          index = unsealJson(this.keys.encryptionKey, `index:${packId}`, sealed) as PackIndex;
        } catch (error) {
          if (error instanceof ObjectNotFoundError) continue; // retired or deleted by prune since the list
          onError(packId, error instanceof Error ? error.message : String(error));
          continue;
        }
        onIndex(packId, index.entries);
      }
    };
    await Promise.all(Array.from({ length: Math.min(INDEX_READS_IN_FLIGHT, packIds.length) }, reader));
  }

  /** Registers a pack this process indexed itself, so refreshIndexes does not load it twice. */
  addOwnPack(packId: string, entries: readonly PackIndexEntry[]): void {
    this.loadedIndexes.add(packId);
    for (const entry of entries) this.addPacked(entry.id, { kind: 'pack', packId, offset: entry.offset, length: entry.length });
  }

  addPacked(chunkId: string, location: ChunkLocation): void {
    addLocation(this.packed, chunkId, location);
  }

  noteLoose(chunkId: string): void {
    this.knownLoose.add(chunkId);
  }

  /** True when a complete copy is known (indexed in a pack, or a loose file exists). */
  async exists(chunkId: string): Promise<boolean> {
    if (this.packed.has(chunkId) || this.knownLoose.has(chunkId)) return true;
    if (!(await this.backend.exists(looseKey(chunkId)))) return false;
    this.knownLoose.add(chunkId);
    return true;
  }

  existsPackedOrKnown(chunkId: string): boolean {
    return this.packed.has(chunkId) || this.knownLoose.has(chunkId);
  }

  /** Every indexed pack copy, for verify. */
  packedChunks(): ReadonlyMap<string, readonly ChunkLocation[]> {
    return this.packed;
  }

  /** Copies in retired packs, for verify. */
  retiredChunks(): ReadonlyMap<string, readonly ChunkLocation[]> {
    return this.retired;
  }

  async listLoose(): Promise<string[]> {
    return (await this.backend.list(LOOSE_PREFIX)).map(baseName).filter((name) => CHUNK_ID.test(name));
  }

  async listRetiredLoose(): Promise<string[]> {
    return (await this.backend.list(RETIRED_LOOSE_PREFIX)).map(baseName).filter((name) => CHUNK_ID.test(name));
  }

  /** Decrypts a sealed chunk and checks that it hashes to its id (`openChunk`). */
  openBlob(chunkId: string, blob: Uint8Array): Buffer {
    return openChunk(this.keys, chunkId, blob);
  }

  writer(): ChunkWriter {
    return new ChunkWriter(this);
  }

  /** A reader for a restore; `threads` > 0 opens large chunks on that many worker threads. */
  reader(options: { readonly threads?: number } = {}): ChunkReader {
    return new ChunkReader(this, options.threads ? new ChunkOpener(options.threads, this.keys) : undefined);
  }

  locationsOf(chunkId: string): ChunkLocation[] {
    const list = [...(this.packed.get(chunkId) ?? [])];
    if (!this.packed.has(chunkId) || this.knownLoose.has(chunkId)) list.push({ kind: 'loose' });
    list.push(...(this.retired.get(chunkId) ?? []));
    return list;
  }
}

/**
 * Decrypts a sealed chunk, authenticating it under its id (AES-256-GCM with `chunk:<id>` as
 * associated data), and checks that its plaintext hashes to its id; ChunkReadError ('corrupt')
 * otherwise. Both, on every read (restore and verify): authentication stops anyone without the
 * key, the re-hash a writer bug that sealed other bytes than it hashed — a restore never writes
 * bytes that are not the chunk's (~0.7 CPU s per GiB, README "Chunk ids, compression, encryption"). `inPlace` decrypts into the
 * blob's own memory (the caller gives the blob up; a raw chunk's plaintext is then a view of it).
 * Used on the calling thread and on the chunk-open worker threads.
 */
export function openChunk(
  keys: Pick<RepoKeys, 'encryptionKey' | 'chunkIdKey'>,
  chunkId: string,
  blob: Uint8Array,
  inPlace = false,
): Buffer {
  let plaintext: Buffer;
  try {
    const payload = inPlace ? Buffer.from(blob.buffer, blob.byteOffset, payloadLength(blob)) : Buffer.allocUnsafe(payloadLength(blob));
    plaintext = decodePayload(decryptInto(keys.encryptionKey, `chunk:${chunkId}`, blob, payload), payload);
  } catch (cause) {
    const why = cause instanceof BlobAuthError ? cause.message : 'does not decompress';
    throw new ChunkReadError(chunkId, 'corrupt', `chunk ${chunkId} is damaged: ${why}`, { cause });
  }
  if (chunkIdOf(keys, plaintext) !== chunkId) {
    throw new ChunkReadError(chunkId, 'corrupt', `chunk ${chunkId} is damaged: its content does not hash to its id`);
  }
  return plaintext;
}

const writeFd = promisify(write);

function inMemoryChunk(plaintext: Buffer): OpenedChunk {
  return {
    length: plaintext.length,
    async writeAt(fd, position) {
      for (let off = 0; off < plaintext.length; )
        off += (await writeFd(fd, plaintext, off, plaintext.length - off, position + off)).bytesWritten;
    },
    drop() {},
  };
}

function addLocation(map: Map<string, ChunkLocation[]>, chunkId: string, location: ChunkLocation): void {
  const list = map.get(chunkId);
  if (list) list.push(location);
  else map.set(chunkId, [location]);
}

/** Drops the packs whose index is no longer listed (prune retired or deleted it) from `map`. */
function forgetUnlisted(listed: readonly string[], loaded: Set<string>, map: Map<string, ChunkLocation[]>): void {
  const current = new Set(listed);
  const gone = new Set([...loaded].filter((packId) => !current.has(packId)));
  if (gone.size === 0) return;
  for (const packId of gone) loaded.delete(packId);
  for (const [chunkId, locations] of map) {
    const kept = locations.filter((l) => l.kind !== 'pack' || !gone.has(l.packId));
    if (kept.length === 0) map.delete(chunkId);
    else if (kept.length !== locations.length) map.set(chunkId, kept);
  }
}

/** Small chunks are read from a pack in windows of this size: neighbours in a pack are usually restored together. */
const READ_WINDOW_BYTES = 1024 * 1024;
/** Windows kept per reader (the restore's files in flight read from a few places at once). */
const READ_WINDOWS_KEPT = 8;

interface ReadWindow {
  readonly packId: string;
  readonly offset: number;
  readonly bytes: Promise<Buffer>;
}

/** Chunks at least this big are opened on the reader's worker threads; a thread hop costs more than opening a smaller one here. */
const THREAD_OPEN_MIN_BYTES = 64 * 1024;

/** A chunk that checked out (decrypted, authenticated and hashed to its id), ready to be written; its bytes are here or on an opener thread. */
export interface OpenedChunk {
  readonly length: number;
  /** Writes all of it at `position` of `fd` (positional: the fd's offset is not used). */
  writeAt(fd: number, position: number): Promise<void>;
  /** Frees it unwritten (the restore failed elsewhere). */
  drop(): void;
}

/**
 * Reads chunks for a restore; small packed chunks come from a few cached pack windows (one read
 * for many files). With an opener, large chunks are decrypted, checked and written by its threads.
 */
export class ChunkReader {
  private readonly windows: ReadWindow[] = [];

  constructor(
    private readonly store: ChunkStore,
    private readonly opener?: ChunkOpener,
  ) {}

  /** The chunk's checked plaintext, opened on this thread. */
  read(chunkId: string): Promise<Buffer> {
    return this.fromAnyCopy(chunkId, (blob) => this.store.openBlob(chunkId, blob));
  }

  /** The chunk, checked, to be written where the caller says: large ones stay on an opener thread. */
  open(chunkId: string): Promise<OpenedChunk> {
    const opener = this.opener;
    return this.fromAnyCopy(
      chunkId,
      (blob) => {
        if (!opener || blob.length < THREAD_OPEN_MIN_BYTES) return inMemoryChunk(this.store.openBlob(chunkId, blob));
        // The blob's memory moves to the thread: a view into a shared buffer (a pack window) is copied into one of the opener's first.
        return opener.open(chunkId, opener.take(blob));
      },
      // Large packed blobs are read straight into a buffer the opener's threads hand back when done.
      opener && this.store.backend.getRangeInto
        ? (length) => (length >= THREAD_OPEN_MIN_BYTES ? opener.buffer(length) : undefined)
        : undefined,
    );
  }

  /** Tries each known copy of the chunk in turn until one reads and opens; the last problem otherwise. */
  private async fromAnyCopy<T>(
    chunkId: string,
    open: (blob: Buffer) => T | Promise<T>,
    readBuffer?: (length: number) => Buffer | undefined,
  ): Promise<T> {
    let lastError: ChunkReadError | undefined;
    for (const location of this.store.locationsOf(chunkId)) {
      try {
        const blob =
          location.kind === 'loose'
            ? await this.readLoose(chunkId)
            : await this.readPacked(chunkId, location.packId, location.offset, location.length, readBuffer?.(location.length));
        return await open(blob);
      } catch (error) {
        if (!(error instanceof ChunkReadError)) throw error;
        lastError = error;
      }
    }
    throw lastError ?? new ChunkReadError(chunkId, 'missing', `chunk ${chunkId} is missing from the repository`);
  }

  private async readLoose(chunkId: string): Promise<Buffer> {
    try {
      return await this.store.backend.get(looseKey(chunkId)).catch((error: unknown) => {
        // Retired by prune and not yet deleted: still a good copy.
        if (error instanceof ObjectNotFoundError) return this.store.backend.get(retiredLooseKey(chunkId));
        throw error;
      });
    } catch (cause) {
      if (cause instanceof ObjectNotFoundError)
        throw new ChunkReadError(chunkId, 'missing', `chunk ${chunkId} is missing from the repository`, { cause });
      throw cause;
    }
  }

  /** A packed blob: into `into` (exactly `length` bytes) when given, else from a window or its own read. */
  private async readPacked(chunkId: string, packId: string, offset: number, length: number, into?: Buffer): Promise<Buffer> {
    let blob: Buffer;
    const backend = this.store.backend;
    try {
      if (into && backend.getRangeInto) blob = into.subarray(0, await backend.getRangeInto(packKey(packId), offset, into));
      else
        blob =
          length >= READ_WINDOW_BYTES / 4
            ? await backend.getRange(packKey(packId), offset, length)
            : await this.fromWindow(packId, offset, length);
    } catch (cause) {
      if (cause instanceof ObjectNotFoundError)
        throw new ChunkReadError(chunkId, 'missing', `chunk ${chunkId} is missing: its pack ${packId} is gone`, { cause });
      throw cause;
    }
    if (blob.length < length) throw new ChunkReadError(chunkId, 'corrupt', `chunk ${chunkId} is damaged: its pack ${packId} is truncated`);
    return blob;
  }

  private async fromWindow(packId: string, offset: number, length: number): Promise<Buffer> {
    let window = this.windows.find((w) => w.packId === packId && offset >= w.offset && offset + length <= w.offset + READ_WINDOW_BYTES);
    if (!window) {
      window = { packId, offset, bytes: this.store.backend.getRange(packKey(packId), offset, READ_WINDOW_BYTES) };
      window.bytes.catch(() => {});
      this.windows.push(window);
      if (this.windows.length > READ_WINDOWS_KEPT) this.windows.shift();
    }
    const bytes = await window.bytes;
    return bytes.subarray(offset - window.offset, offset - window.offset + length);
  }

  async close(): Promise<void> {
    this.windows.length = 0;
    await this.opener?.close();
  }
}

interface OpenPack {
  readonly packId: string;
  readonly upload: ObjectUpload;
  size: number;
  readonly entries: PackIndexEntry[];
  readonly writes: Promise<void>[];
  /** Blobs not yet written, starting at `bufferedFrom`: small blobs are written in ~1 MiB batches. */
  buffered: Uint8Array[];
  bufferedFrom: number;
}

/** Small blobs are collected up to this size and written with one writev. */
const PACK_WRITE_BATCH_BYTES = 1024 * 1024;

export interface PutResult {
  /** False when the chunk already existed (or is already being written by this session). */
  readonly isNew: boolean;
  /** Bytes this call added to the repository. */
  readonly storedBytes: number;
}

/**
 * One backup session's writer. Chunks are only "known" to other sessions once they are complete:
 * loose files appear by rename, packs become visible when their index is renamed into place.
 * A session that is abandoned leaves at most unreferenced data, never a snapshot.
 */
export class ChunkWriter {
  private readonly inFlight = new Map<string, Promise<PutResult>>();
  private current: OpenPack | undefined;
  private readonly closing: Promise<void>[] = [];

  constructor(private readonly store: ChunkStore) {}

  put(chunkId: string, plaintext: Uint8Array): Promise<PutResult> {
    const key = this.store.keys.encryptionKey;
    return this.putSealed(chunkId, plaintext.length, async () => (await sealCompressed(key, `chunk:${chunkId}`, plaintext)).blob);
  }

  /**
   * Like `put`, for a chunk whose plaintext is elsewhere (a worker thread): `seal` is called only
   * if the chunk is new, and returns its sealed blob.
   */
  putSealed(chunkId: string, plaintextBytes: number, seal: () => Promise<Uint8Array>): Promise<PutResult> {
    if (this.inFlight.has(chunkId) || this.store.existsPackedOrKnown(chunkId)) return Promise.resolve({ isNew: false, storedBytes: 0 });
    const pending = this.storeNew(chunkId, plaintextBytes, seal);
    pending.catch(() => {});
    this.inFlight.set(chunkId, pending);
    return pending;
  }

  private async storeNew(chunkId: string, plaintextBytes: number, seal: () => Promise<Uint8Array>): Promise<PutResult> {
    const { options, backend } = this.store;
    const packed = plaintextBytes <= options.packBlobMaxBytes;
    if (!packed && (await this.store.exists(chunkId))) return { isNew: false, storedBytes: 0 };
    const blob = await seal();
    if (packed) {
      await this.appendToPack(chunkId, blob);
    } else {
      // A concurrent writer of the same chunk is harmless: both install a valid copy.
      await backend.put(looseKey(chunkId), blob);
      this.store.noteLoose(chunkId);
    }
    return { isNew: true, storedBytes: blob.length };
  }

  /** Appends an already sealed blob (prune copying a live chunk out of a pack it retires); no existence check. */
  appendSealed(chunkId: string, blob: Buffer): Promise<void> {
    return this.appendToPack(chunkId, blob);
  }

  /** Reserves the offset synchronously, so concurrent puts share one pack without a lock. */
  private appendToPack(chunkId: string, blob: Uint8Array): Promise<void> {
    let pack = this.current;
    if (!pack) {
      const packId = randomId();
      pack = {
        packId,
        upload: this.store.backend.upload(packKey(packId)),
        size: 0,
        entries: [],
        writes: [],
        buffered: [],
        bufferedFrom: 0,
      };
      this.current = pack;
    }
    pack.entries.push({ id: chunkId, offset: pack.size, length: blob.length });
    pack.buffered.push(blob);
    pack.size += blob.length;
    if (pack.size >= this.store.options.packTargetBytes) {
      const write = this.flush(pack);
      this.rotate();
      return write;
    }
    if (pack.size - pack.bufferedFrom >= PACK_WRITE_BATCH_BYTES) return this.flush(pack);
    return Promise.resolve();
  }

  private flush(pack: OpenPack): Promise<void> {
    if (pack.buffered.length === 0) return Promise.resolve();
    const blobs = pack.buffered;
    pack.buffered = [];
    pack.bufferedFrom = pack.size;
    const write = pack.upload.write(blobs);
    write.catch(() => {});
    pack.writes.push(write);
    return write;
  }

  private rotate(): void {
    const pack = this.current;
    if (!pack) return;
    this.current = undefined;
    this.flush(pack);
    const closing = this.finishPack(pack);
    closing.catch(() => {});
    this.closing.push(closing);
  }

  private async finishPack(pack: OpenPack): Promise<void> {
    await Promise.all(pack.writes);
    // The pack is complete (and on disk) before its index names it: a pack cut short is never indexed.
    await pack.upload.commit();
    const index: PackIndex = { packId: pack.packId, entries: pack.entries };
    const sealed = sealJson(this.store.keys.encryptionKey, `index:${pack.packId}`, index);
    await this.store.backend.put(indexKey(pack.packId), sealed);
    this.store.addOwnPack(pack.packId, pack.entries);
  }

  /** Waits for every put, closes and indexes the open pack. After this, every chunk put is durable and visible. */
  async finish(): Promise<void> {
    await Promise.all(this.inFlight.values());
    this.rotate();
    await Promise.all(this.closing);
  }

  /** Cancel path: waits for outstanding writes and deletes the pack that was never indexed. */
  async abandon(): Promise<void> {
    await Promise.allSettled(this.inFlight.values());
    const pack = this.current;
    this.current = undefined;
    await Promise.allSettled(this.closing);
    if (pack) {
      await Promise.allSettled(pack.writes);
      await pack.upload.abort();
    }
  }
}
