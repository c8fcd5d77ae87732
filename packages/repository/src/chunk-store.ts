import { readFileSync } from 'node:fs';
import { type FileHandle, open, readdir, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { BlobAuthError, sealCompressed, sealJson, unseal, unsealJson } from './blob.js';
import { errnoCode } from './errors.js';
import { writeFileAtomic } from './fs-util.js';
import { chunkIdOf, type RepoKeys } from './keys.js';
import { CHUNK_ID, HEX_ID, indexDir, indexPath, loosePath, packPath, randomId } from './layout.js';

/** New index files up to this many are read synchronously by refreshIndexes. */
const SYNC_INDEX_READS = 256;

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
  /** Chunks of at most this many plaintext bytes go into packs; larger ones are stored loose. 0 = everything loose. */
  readonly packBlobMaxBytes: number;
  /** A pack is closed and indexed once it reaches this size. */
  readonly packTargetBytes: number;
  /** fsync blobs, packs and indexes before they become visible. */
  readonly durable: boolean;
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
  /** Indexes that failed to decrypt; verify reports them. */
  readonly unreadableIndexes = new Map<string, string>();

  constructor(
    readonly dir: string,
    readonly keys: RepoKeys,
    readonly options: ChunkStoreOptions,
  ) {}

  /**
   * Loads pack indexes written since the last call (by this or any other writer). Every backup
   * starts with this, so a node agent reads each index file another agent wrote since its last
   * backup: a few small files each time, read synchronously (an async read is four thread-pool
   * round trips, several times the cost of the read). A large catch-up (opening a big repository)
   * reads asynchronously so the event loop is not held for long.
   */
  async refreshIndexes(): Promise<void> {
    const names = (await readdir(indexDir(this.dir))).filter((packId) => HEX_ID.test(packId) && !this.loadedIndexes.has(packId));
    const readSync = names.length <= SYNC_INDEX_READS;
    for (const packId of names) {
      let index: PackIndex;
      try {
        const path = indexPath(this.dir, packId);
        const sealed = readSync ? readFileSync(path) : await readFile(path);
        index = unsealJson(this.keys.encryptionKey, `index:${packId}`, sealed) as PackIndex;
      } catch (error) {
        this.unreadableIndexes.set(packId, error instanceof Error ? error.message : String(error));
        continue;
      }
      this.loadedIndexes.add(packId);
      this.unreadableIndexes.delete(packId);
      for (const entry of index.entries) this.addPacked(entry.id, { kind: 'pack', packId, offset: entry.offset, length: entry.length });
    }
  }

  /** Registers a pack this process indexed itself, so refreshIndexes does not load it twice. */
  addOwnPack(packId: string, entries: readonly PackIndexEntry[]): void {
    this.loadedIndexes.add(packId);
    for (const entry of entries) this.addPacked(entry.id, { kind: 'pack', packId, offset: entry.offset, length: entry.length });
  }

  addPacked(chunkId: string, location: ChunkLocation): void {
    const list = this.packed.get(chunkId);
    if (list) list.push(location);
    else this.packed.set(chunkId, [location]);
  }

  noteLoose(chunkId: string): void {
    this.knownLoose.add(chunkId);
  }

  /** True when a complete copy is known (indexed in a pack, or a loose file exists). */
  async exists(chunkId: string): Promise<boolean> {
    if (this.packed.has(chunkId) || this.knownLoose.has(chunkId)) return true;
    try {
      await stat(loosePath(this.dir, chunkId));
      this.knownLoose.add(chunkId);
      return true;
    } catch (error) {
      if (errnoCode(error) === 'ENOENT') return false;
      throw error;
    }
  }

  existsPackedOrKnown(chunkId: string): boolean {
    return this.packed.has(chunkId) || this.knownLoose.has(chunkId);
  }

  /** Every indexed pack copy, for verify. */
  packedChunks(): ReadonlyMap<string, readonly ChunkLocation[]> {
    return this.packed;
  }

  async listLoose(): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < 256; i++) {
      const ab = i.toString(16).padStart(2, '0');
      const names = await readdir(join(this.dir, 'data', ab)).catch(() => [] as string[]);
      for (const name of names) if (CHUNK_ID.test(name)) ids.push(name);
    }
    return ids;
  }

  /** Decrypts a sealed chunk and checks that it hashes to its id. */
  openBlob(chunkId: string, blob: Uint8Array): Buffer {
    let plaintext: Buffer;
    try {
      plaintext = unseal(this.keys.encryptionKey, `chunk:${chunkId}`, blob);
    } catch (cause) {
      const why = cause instanceof BlobAuthError ? cause.message : 'does not decompress';
      throw new ChunkReadError(chunkId, 'corrupt', `chunk ${chunkId} is damaged: ${why}`, { cause });
    }
    if (chunkIdOf(this.keys, plaintext) !== chunkId) {
      throw new ChunkReadError(chunkId, 'corrupt', `chunk ${chunkId} is damaged: its content does not hash to its id`);
    }
    return plaintext;
  }

  writer(): ChunkWriter {
    return new ChunkWriter(this);
  }

  reader(): ChunkReader {
    return new ChunkReader(this);
  }

  locationsOf(chunkId: string): ChunkLocation[] {
    const list = [...(this.packed.get(chunkId) ?? [])];
    if (!this.packed.has(chunkId) || this.knownLoose.has(chunkId)) list.push({ kind: 'loose' });
    return list;
  }
}

/** Reads chunks for a restore, keeping a few pack files open. */
export class ChunkReader {
  private readonly openPacks = new Map<string, Promise<FileHandle>>();

  constructor(private readonly store: ChunkStore) {}

  async read(chunkId: string): Promise<Buffer> {
    let lastError: ChunkReadError | undefined;
    for (const location of this.store.locationsOf(chunkId)) {
      try {
        const blob =
          location.kind === 'loose'
            ? await this.readLoose(chunkId)
            : await this.readPacked(chunkId, location.packId, location.offset, location.length);
        return this.store.openBlob(chunkId, blob);
      } catch (error) {
        if (!(error instanceof ChunkReadError)) throw error;
        lastError = error;
      }
    }
    throw lastError ?? new ChunkReadError(chunkId, 'missing', `chunk ${chunkId} is missing from the repository`);
  }

  private async readLoose(chunkId: string): Promise<Buffer> {
    try {
      return await readFile(loosePath(this.store.dir, chunkId));
    } catch (cause) {
      if (errnoCode(cause) === 'ENOENT')
        throw new ChunkReadError(chunkId, 'missing', `chunk ${chunkId} is missing from the repository`, { cause });
      throw cause;
    }
  }

  private async readPacked(chunkId: string, packId: string, offset: number, length: number): Promise<Buffer> {
    let handle = this.openPacks.get(packId);
    if (!handle) {
      if (this.openPacks.size >= 16) await this.closeOne();
      handle = open(packPath(this.store.dir, packId), 'r');
      handle.catch(() => {});
      this.openPacks.set(packId, handle);
    }
    let file: FileHandle;
    try {
      file = await handle;
    } catch (cause) {
      this.openPacks.delete(packId);
      if (errnoCode(cause) === 'ENOENT')
        throw new ChunkReadError(chunkId, 'missing', `chunk ${chunkId} is missing: its pack ${packId} is gone`, { cause });
      throw cause;
    }
    const buffer = Buffer.allocUnsafe(length);
    const { bytesRead } = await file.read(buffer, 0, length, offset);
    if (bytesRead < length) throw new ChunkReadError(chunkId, 'corrupt', `chunk ${chunkId} is damaged: its pack ${packId} is truncated`);
    return buffer;
  }

  private async closeOne(): Promise<void> {
    const first = this.openPacks.entries().next().value;
    if (!first) return;
    this.openPacks.delete(first[0]);
    await (await first[1].catch(() => undefined))?.close().catch(() => {});
  }

  async close(): Promise<void> {
    while (this.openPacks.size > 0) await this.closeOne();
  }
}

interface OpenPack {
  readonly packId: string;
  readonly file: Promise<FileHandle>;
  size: number;
  readonly entries: PackIndexEntry[];
  readonly writes: Promise<void>[];
  /** Blobs not yet written, starting at `bufferedFrom`: small blobs are written in ~1 MiB batches. */
  buffered: Buffer[];
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
    if (this.inFlight.has(chunkId) || this.store.existsPackedOrKnown(chunkId)) return Promise.resolve({ isNew: false, storedBytes: 0 });
    const pending = this.storeNew(chunkId, plaintext);
    pending.catch(() => {});
    this.inFlight.set(chunkId, pending);
    return pending;
  }

  private async storeNew(chunkId: string, plaintext: Uint8Array): Promise<PutResult> {
    const { options, dir, keys } = this.store;
    const packed = plaintext.length <= options.packBlobMaxBytes;
    if (!packed && (await this.store.exists(chunkId))) return { isNew: false, storedBytes: 0 };
    const { blob } = await sealCompressed(keys.encryptionKey, `chunk:${chunkId}`, plaintext);
    if (packed) {
      await this.appendToPack(chunkId, blob);
    } else {
      // A concurrent writer of the same chunk is harmless: both renames install a valid copy.
      await writeFileAtomic(dir, loosePath(dir, chunkId), blob, options.durable);
      this.store.noteLoose(chunkId);
    }
    return { isNew: true, storedBytes: blob.length };
  }

  /** Reserves the offset synchronously, so concurrent puts share one pack without a lock. */
  private appendToPack(chunkId: string, blob: Buffer): Promise<void> {
    let pack = this.current;
    if (!pack) {
      const packId = randomId();
      const file = open(packPath(this.store.dir, packId), 'wx', 0o600);
      file.catch(() => {});
      pack = { packId, file, size: 0, entries: [], writes: [], buffered: [], bufferedFrom: 0 };
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
    const position = pack.bufferedFrom;
    pack.buffered = [];
    pack.bufferedFrom = pack.size;
    const write = pack.file.then(async (file) => {
      const total = blobs.reduce((sum, b) => sum + b.length, 0);
      let { bytesWritten } = await file.writev(blobs, position);
      if (bytesWritten < total) {
        // Short writes are rare on regular files; finish the rest plainly.
        const rest = Buffer.concat(blobs).subarray(bytesWritten);
        for (let off = 0; off < rest.length; ) {
          const { bytesWritten: n } = await file.write(rest, off, rest.length - off, position + bytesWritten);
          off += n;
          bytesWritten += n;
        }
      }
    });
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
    const file = await pack.file;
    if (this.store.options.durable) await file.datasync();
    await file.close();
    const index: PackIndex = { packId: pack.packId, entries: pack.entries };
    const sealed = sealJson(this.store.keys.encryptionKey, `index:${pack.packId}`, index);
    await writeFileAtomic(this.store.dir, indexPath(this.store.dir, pack.packId), sealed, this.store.options.durable);
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
      await (await pack.file.catch(() => undefined))?.close().catch(() => {});
      await unlink(packPath(this.store.dir, pack.packId)).catch(() => {});
    }
  }
}
