import { write } from 'node:fs';
import { promisify } from 'node:util';
import { ObjectNotFoundError, type ObjectUpload, type RepoBackend } from './backend.js';
import {
  BlobAuthError,
  decodePayload,
  decryptInto,
  payloadLength,
  sealCompressed,
  sealJson,
  unsealJson,
  type ZstdDecodeInto,
} from './blob.js';
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

export interface PackIndexEntry {
  readonly id: string;
  readonly offset: number;
  readonly length: number;
}
export interface PackIndex {
  readonly packId: string;
  readonly entries: readonly PackIndexEntry[];
}

/**
 * A writer indexes the packs it closed in one index object (`index/<random id>`, sealed
 * `{packs: [{packId, entries}]}`) once they hold INDEX_MAX_ENTRIES chunks or INDEX_MAX_PACKS packs,
 * once the oldest waited INDEX_MAX_AGE_MS (so a backup cut short by a crash loses little), and
 * when it finishes — as restic does — rather than one object per pack: a put per backup, and a
 * get per backup for every process that opens the repository. restic flushes at 50,000 blobs.
 */
export const INDEX_MAX_ENTRIES = 50_000;
const INDEX_MAX_PACKS = 1_000;
const INDEX_MAX_AGE_MS = 5 * 60 * 1000;

/**
 * The packs an index object names: `{packs: [...]}`, or `{packId, entries}` as written before
 * multi-pack indexes (one object per pack, named by its pack id; still read, and what prune
 * writes under `prune/retired-index/<pack id>`). Both are sealed under `index:<object name>`.
 */
export function openIndexObject(encryptionKey: Buffer, name: string, sealed: Uint8Array): PackIndex[] {
  const doc = unsealJson(encryptionKey, `index:${name}`, sealed) as { packs?: unknown; packId?: unknown; entries?: unknown };
  if (Array.isArray(doc.packs)) return doc.packs as PackIndex[];
  if (typeof doc.packId === 'string' && Array.isArray(doc.entries))
    return [{ packId: doc.packId, entries: doc.entries as PackIndexEntry[] }];
  throw new Error(`index ${name} names no packs (neither {packs} nor {packId, entries})`);
}

export function sealIndexObject(encryptionKey: Buffer, name: string, packs: readonly PackIndex[]): Buffer {
  return sealJson(encryptionKey, `index:${name}`, { packs });
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
  /** Index objects loaded, by name, with the packs each names. */
  private readonly loadedIndexes = new Map<string, readonly string[]>();
  /** How many loaded index objects name each pack (prune writes a pack's new index before it deletes the old one). */
  private readonly packRefs = new Map<string, number>();
  /**
   * Packs prune has retired (their index moved to prune/retired-index/): read as a last resort
   * by restore and verify during the grace period, never deduplicated against (README "Prune").
   */
  private readonly retired = new Map<string, ChunkLocation[]>();
  private readonly loadedRetired = new Set<string>();
  /** Index objects that failed to decrypt, by name; verify reports them. */
  readonly unreadableIndexes = new Map<string, string>();

  constructor(
    readonly backend: RepoBackend,
    readonly keys: RepoKeys,
    readonly options: ChunkStoreOptions,
  ) {}

  /**
   * Loads index objects written since the last call (by this or any other writer) and forgets the
   * packs no listed index names any more. Every backup, restore and verify starts with this, so a
   * node agent reads only the few indexes other agents wrote since its last backup. An index that
   * vanished between the listing and its read was rewritten by prune (which puts the new one
   * first) or retired: the listing is read again, so a pack prune only moved is never missed.
   */
  async refreshIndexes(): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const [listed, retiredListed] = await Promise.all(
        [INDEX_PREFIX, RETIRED_INDEX_PREFIX].map(async (prefix) =>
          (await this.backend.list(prefix)).map(baseName).filter((name) => HEX_ID.test(name)),
        ),
      );
      this.knownLoose.clear(); // prune moves unused loose chunks away: look them up again
      let vanished = false;
      await this.loadIndexes(
        listed!.filter((name) => !this.loadedIndexes.has(name)),
        indexKey,
        (name, packs) => {
          this.unreadableIndexes.delete(name);
          this.addIndex(name, packs);
        },
        (name, why) => this.unreadableIndexes.set(name, why),
        () => {
          vanished = true;
        },
      );
      this.forgetIndexes(new Set(listed));
      forgetUnlisted(retiredListed!, this.loadedRetired, this.retired);
      await this.loadIndexes(
        retiredListed!.filter((packId) => !this.loadedRetired.has(packId)),
        retiredIndexKey,
        (name, packs) => {
          this.loadedRetired.add(name);
          for (const { packId, entries } of packs)
            for (const entry of entries)
              addLocation(this.retired, entry.id, { kind: 'pack', packId, offset: entry.offset, length: entry.length });
        },
        () => {}, // a last-resort copy only; verify reads the retired packs themselves
        () => {},
      );
      if (!vanished || attempt >= 2) return;
    }
  }

  private async loadIndexes(
    names: readonly string[],
    keyOf: (name: string) => string,
    onIndex: (name: string, packs: readonly PackIndex[]) => void,
    onError: (name: string, why: string) => void,
    onVanished: () => void,
  ): Promise<void> {
    let next = 0;
    const reader = async () => {
      while (next < names.length) {
        const name = names[next++]!;
        let packs: PackIndex[];
        try {
          packs = openIndexObject(this.keys.encryptionKey, name, await this.backend.get(keyOf(name)));
        } catch (error) {
          if (error instanceof ObjectNotFoundError) {
            onVanished(); // rewritten, retired or deleted by prune since the list
            continue;
          }
          onError(name, error instanceof Error ? error.message : String(error));
          continue;
        }
        onIndex(name, packs);
      }
    };
    await Promise.all(Array.from({ length: Math.min(INDEX_READS_IN_FLIGHT, names.length) }, reader));
  }

  /** Registers an index object: the packs it names that no loaded index named yet become known. */
  private addIndex(name: string, packs: readonly PackIndex[]): void {
    this.loadedIndexes.set(
      name,
      packs.map((p) => p.packId),
    );
    for (const { packId, entries } of packs) {
      const refs = this.packRefs.get(packId) ?? 0;
      this.packRefs.set(packId, refs + 1);
      if (refs > 0) continue;
      for (const entry of entries) this.addPacked(entry.id, { kind: 'pack', packId, offset: entry.offset, length: entry.length });
    }
  }

  /** Drops the index objects no longer listed, and the packs no listed index names. */
  private forgetIndexes(listed: ReadonlySet<string>): void {
    const gone = new Set<string>();
    for (const [name, packIds] of this.loadedIndexes) {
      if (listed.has(name)) continue;
      this.loadedIndexes.delete(name);
      for (const packId of packIds) {
        const refs = (this.packRefs.get(packId) ?? 1) - 1;
        if (refs > 0) this.packRefs.set(packId, refs);
        else {
          this.packRefs.delete(packId);
          gone.add(packId);
        }
      }
    }
    for (const name of this.unreadableIndexes.keys()) if (!listed.has(name)) this.unreadableIndexes.delete(name);
    if (gone.size > 0) dropPacks(this.packed, gone);
  }

  /** Registers an index object this process wrote itself, so refreshIndexes does not load it again. */
  addOwnIndex(name: string, packs: readonly PackIndex[]): void {
    this.addIndex(name, packs);
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
 * blob's own memory (the caller gives the blob up; a raw chunk's plaintext is then a view of it);
 * `zstdInto` decodes a compressed one into memory the caller keeps. Used on the calling thread and on the chunk-open worker threads.
 */
export function openChunk(
  keys: Pick<RepoKeys, 'encryptionKey' | 'chunkIdKey'>,
  chunkId: string,
  blob: Uint8Array,
  inPlace = false,
  zstdInto?: ZstdDecodeInto,
): Buffer {
  let plaintext: Buffer;
  try {
    const payload = inPlace ? Buffer.from(blob.buffer, blob.byteOffset, payloadLength(blob)) : Buffer.allocUnsafe(payloadLength(blob));
    plaintext = decodePayload(decryptInto(keys.encryptionKey, `chunk:${chunkId}`, blob, payload), payload, zstdInto);
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

/** Drops the retired packs whose retired index is no longer listed (prune deleted it) from `map`. */
function forgetUnlisted(listed: readonly string[], loaded: Set<string>, map: Map<string, ChunkLocation[]>): void {
  const current = new Set(listed);
  const gone = new Set([...loaded].filter((packId) => !current.has(packId)));
  if (gone.size === 0) return;
  for (const packId of gone) loaded.delete(packId);
  dropPacks(map, gone);
}

/** Removes every location in one of the `gone` packs from `map`. */
function dropPacks(map: Map<string, ChunkLocation[]>, gone: ReadonlySet<string>): void {
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

/**
 * On object storage a restore reads a pack's needed chunks in spans of up to the pack target size
 * plus the pack's largest needed chunk (a pack closes once it reaches its target, so its last chunk
 * runs past it: a pack written by one backup is then one read), at least SPAN_MIN_BYTES. Unneeded
 * chunks between needed ones are read through (as restic reads a pack from its first needed blob to
 * its last) when they are at most SPAN_GAP_BYTES or the pack's needed bytes — a pack mostly needed is
 * one read, a few small chunks far apart in a large pack are not — and skipped otherwise. Spans are kept least recently used first, and one is
 * dropped as soon as every read planned from it is done. Files restored side by side progress at
 * different speeds through packs they share: the chunks an evicted span still owes to slower files
 * are kept apart (copied out, up to LEFTOVER_MAX_BYTES) rather than read again.
 */
const SPAN_MIN_BYTES = 16 * 1024 * 1024;
const SPAN_GAP_BYTES = 256 * 1024;
/** One per file a restore writes at once (its FILE_CONCURRENCY): fewer, and files in flight evict each other's spans. */
const SPANS_KEPT = 8;
/** Chunks copied out of evicted spans for reads still to come; past this they are read again. */
const LEFTOVER_MAX_BYTES = 128 * 1024 * 1024;

/** A needed chunk's blob in a pack, and how many reads the restore will still make of it. */
interface Extent {
  readonly offset: number;
  readonly end: number;
  uses: number;
  plan?: PlannedSpan;
}

interface PlannedSpan {
  readonly offset: number;
  end: number;
  readonly extents: Extent[];
  /** Reads still planned from it (its extents' uses). */
  pending: number;
}

interface ReadSpan {
  readonly packId: string;
  readonly plan: PlannedSpan;
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
  /** Per pack, the spans the restore will read, by offset (expect()). */
  private readonly needed = new Map<string, PlannedSpan[]>();
  /** The extent of each needed chunk copy, by `packId:offset`. */
  private readonly extents = new Map<string, Extent>();
  private readonly spans: ReadSpan[] = [];
  /** Blobs copied out of evicted spans that reads are still planned for, by `packId:offset`. */
  private readonly leftovers = new Map<string, Promise<Buffer>>();
  private leftoverBytes = 0;

  constructor(
    private readonly store: ChunkStore,
    private readonly opener?: ChunkOpener,
  ) {}

  /**
   * The chunks the restore will read, in any order, once per read (a chunk two files share is
   * given twice). On a backend that bills per request (object storage) a packed chunk is then read
   * together with the needed chunks after it in its pack, in one ranged read — as restic reads a
   * pack's needed blobs — not one read per chunk. Elsewhere (a directory) nothing changes.
   */
  expect(chunkIds: Iterable<string>): void {
    if (!this.store.backend.billedPerRequest) return;
    const byPack = new Map<string, Extent[]>();
    for (const chunkId of chunkIds) {
      const location = this.store.locationsOf(chunkId)[0];
      if (location?.kind !== 'pack') continue;
      const key = `${location.packId}:${location.offset}`;
      const known = this.extents.get(key);
      if (known) {
        known.uses++;
        continue;
      }
      const extent: Extent = { offset: location.offset, end: location.offset + location.length, uses: 1 };
      this.extents.set(key, extent);
      const list = byPack.get(location.packId) ?? [];
      list.push(extent);
      byPack.set(location.packId, list);
    }
    // Each pack's needed chunks cut into spans once, in pack order: a chunk always falls in the
    // same span, whichever file (and in which order) asks for it.
    for (const [packId, list] of byPack) {
      list.sort((a, b) => a.offset - b.offset);
      const largest = list.reduce((max, e) => Math.max(max, e.end - e.offset), 0);
      const packNeeded = list.reduce((sum, e) => sum + (e.end - e.offset), 0);
      const limit = Math.max(SPAN_MIN_BYTES, this.store.options.packTargetBytes + largest);
      const spans: PlannedSpan[] = [];
      for (const extent of list) {
        const last = spans.at(-1);
        const gap = last ? extent.offset - last.end : 0;
        if (last && gap <= Math.max(SPAN_GAP_BYTES, packNeeded) && extent.end - last.offset <= limit) {
          last.end = Math.max(last.end, extent.end);
          last.extents.push(extent);
          last.pending += extent.uses;
          extent.plan = last;
        } else {
          const plan: PlannedSpan = {
            offset: extent.offset,
            end: extent.end,
            extents: [extent],
            pending: extent.uses,
          };
          extent.plan = plan;
          spans.push(plan);
        }
      }
      this.needed.set(packId, spans);
    }
  }

  /**
   * The blob at [offset, offset + length) of the pack from a planned span (cached, or read now) or
   * from the leftovers; undefined when the restore did not plan it.
   */
  private fromSpan(packId: string, offset: number, length: number): Promise<Buffer> | undefined {
    const key = `${packId}:${offset}`;
    const extent = this.extents.get(key);
    const leftover = this.leftovers.get(key);
    if (leftover && extent) {
      if (extent.plan) extent.plan.pending--;
      const last = --extent.uses <= 0;
      if (last) {
        this.leftovers.delete(key);
        this.leftoverBytes -= extent.end - extent.offset;
      }
      // The last read takes the copy itself (an opener may move its memory to a thread); earlier ones a copy of it.
      return leftover.then((bytes) => (last ? bytes.subarray(0, length) : Buffer.from(bytes.subarray(0, length))));
    }
    const span = this.spanFor(packId, offset, length);
    if (!span) return undefined;
    if (extent && extent.uses > 0) {
      extent.uses--;
      span.plan.pending--;
    }
    const done = span.plan.pending <= 0;
    // Every read planned from it is done: its memory goes now, not when it is evicted.
    if (done) this.spans.splice(this.spans.indexOf(span), 1);
    const from = offset - span.plan.offset;
    return span.bytes.then((all) => {
      const view = all.subarray(from, from + length);
      // A view of the whole read could be moved to an opener thread, leaving nothing for later reads of the span.
      return !done && view.byteOffset === 0 && view.byteLength === view.buffer.byteLength ? Buffer.from(view) : view;
    });
  }

  private spanFor(packId: string, offset: number, length: number): ReadSpan | undefined {
    const at = this.spans.findIndex((s) => s.packId === packId && offset >= s.plan.offset && offset + length <= s.plan.end);
    if (at >= 0) {
      // Least recently used goes first: a span still being read stays.
      const [cached] = this.spans.splice(at, 1);
      this.spans.push(cached!);
      return cached;
    }
    const planned = this.needed.get(packId);
    if (!planned) return undefined;
    let lo = 0;
    let hi = planned.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (planned[mid]!.offset <= offset) lo = mid;
      else hi = mid - 1;
    }
    const plan = planned[lo];
    if (!plan || offset < plan.offset || offset + length > plan.end) return undefined;
    const span: ReadSpan = { packId, plan, bytes: this.store.backend.getRange(packKey(packId), plan.offset, plan.end - plan.offset) };
    span.bytes.catch(() => {});
    this.spans.push(span);
    if (this.spans.length > SPANS_KEPT) this.evict(this.spans.shift()!);
    return span;
  }

  /** Keeps the blobs an evicted span still owes to later reads (copies: the span's memory goes). */
  private evict(span: ReadSpan): void {
    for (const extent of span.plan.extents) {
      const length = extent.end - extent.offset;
      if (extent.uses <= 0 || this.leftoverBytes + length > LEFTOVER_MAX_BYTES) continue;
      const key = `${span.packId}:${extent.offset}`;
      if (this.leftovers.has(key)) continue;
      const copy = span.bytes.then((all) => Buffer.from(all.subarray(extent.offset - span.plan.offset, extent.end - span.plan.offset)));
      copy.catch(() => {});
      this.leftovers.set(key, copy);
      this.leftoverBytes += length;
    }
  }

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
      const planned = this.needed.size > 0 ? this.fromSpan(packId, offset, length) : undefined;
      if (planned) {
        const bytes = await planned;
        // Into the opener's buffer when given (it moves to a thread as it is), else a view of the span.
        blob = into ? into.subarray(0, bytes.copy(into)) : bytes;
      } else if (into && backend.getRangeInto) blob = into.subarray(0, await backend.getRangeInto(packKey(packId), offset, into));
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
    this.spans.length = 0;
    this.leftovers.clear();
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
 * loose files appear by rename, packs become visible when an index object naming them is put.
 * A session that is abandoned leaves at most unreferenced data, never a snapshot.
 */
export class ChunkWriter {
  private readonly inFlight = new Map<string, Promise<PutResult>>();
  private current: OpenPack | undefined;
  private readonly closing: Promise<void>[] = [];
  /** Packs committed that no index object of this writer names yet (INDEX_MAX_ENTRIES). */
  private unindexed: PackIndex[] = [];
  private unindexedEntries = 0;
  private unindexedSince = 0;
  private readonly indexing: Promise<void>[] = [];

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
    // The pack is complete (and on disk) before an index names it: a pack cut short is never indexed.
    await pack.upload.commit();
    if (this.unindexed.length === 0) this.unindexedSince = Date.now();
    this.unindexed.push({ packId: pack.packId, entries: pack.entries });
    this.unindexedEntries += pack.entries.length;
    if (
      this.unindexedEntries >= INDEX_MAX_ENTRIES ||
      this.unindexed.length >= INDEX_MAX_PACKS ||
      Date.now() - this.unindexedSince >= INDEX_MAX_AGE_MS
    )
      await this.writeIndex();
  }

  /** Names the packs committed so far in one new index object; only then are their chunks known to other sessions. */
  private writeIndex(): Promise<void> {
    if (this.unindexed.length === 0) return Promise.resolve();
    const packs = this.unindexed;
    this.unindexed = [];
    this.unindexedEntries = 0;
    const name = randomId();
    const writing = (async () => {
      await this.store.backend.put(indexKey(name), sealIndexObject(this.store.keys.encryptionKey, name, packs));
      this.store.addOwnIndex(name, packs);
    })();
    writing.catch(() => {});
    this.indexing.push(writing);
    return writing;
  }

  /** Waits for every put, closes the open pack and indexes the packs. After this, every chunk put is durable and visible. */
  async finish(): Promise<void> {
    await Promise.all(this.inFlight.values());
    this.rotate();
    await Promise.all(this.closing);
    await this.writeIndex();
    await Promise.all(this.indexing);
  }

  /** Cancel path: waits for outstanding writes, indexes the packs completed and drops the open one. */
  async abandon(): Promise<void> {
    await Promise.allSettled(this.inFlight.values());
    const pack = this.current;
    this.current = undefined;
    await Promise.allSettled(this.closing);
    // The packs completed stay usable: the next backup deduplicates against them.
    await this.writeIndex().catch(() => {});
    await Promise.allSettled(this.indexing);
    if (pack) {
      await Promise.allSettled(pack.writes);
      await pack.upload.abort();
    }
  }
}
