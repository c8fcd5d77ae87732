import { setMaxListeners } from 'node:events';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { sealJson } from './blob.js';
import type { ChunkStore, ChunkWriter, PutResult } from './chunk-store.js';
import type { Chunker } from './chunker.js';
import { isRepoError, RepoError, RepoErrorCode } from './errors.js';
import { chunkIdOf, type RepoKeys } from './keys.js';
import type { LargeFileHasher, LargeFileOutcome } from './large-file-hasher.js';
import { randomId, snapshotKey } from './layout.js';
import { holdBackupLease } from './prune.js';
import type { SmallFileReaderLease, SmallFileReaderPool } from './small-file-reader.js';
import type { SnapshotManifest, TreeEntry } from './snapshot.js';
import { TokenBucket } from './token-bucket.js';
import { identityOf, type SkippedEntry, sourceError, type WalkResult, walkTree } from './tree-walk.js';

export interface BackupProgress {
  readonly totalBytes: number;
  readonly bytesDone: number;
  /** Files finished so far. */
  readonly files: number;
}

export interface BackupOptions {
  /** Recorded in the snapshot (backup name, pod, volume, …). */
  readonly tags?: Readonly<Record<string, string>>;
  /** Abort to cancel: the backup stops and writes no snapshot. */
  readonly signal?: AbortSignal;
  /** Called about every `progressIntervalMs` while copying, and once at the end. */
  readonly onProgress?: (progress: BackupProgress) => void;
  readonly progressIntervalMs?: number;
  /** Limit on bytes read from the source, per second (a private token bucket). */
  readonly bandwidthBytesPerSec?: number;
  /** A shared token bucket instead (one per node agent, across its PVBs); wins over `bandwidthBytesPerSec`. */
  readonly throttle?: TokenBucket;
  /**
   * Read every file, even those whose size, mtime, ctime and inode match the parent snapshot
   * (restic's `--force`). Default false: unchanged files reuse the parent's chunk list unread.
   */
  readonly force?: boolean;
}

export interface BackupStats {
  readonly files: number;
  readonly dirs: number;
  readonly symlinks: number;
  /** File bytes in the snapshot (read, or reused unread from the parent). */
  readonly bytes: number;
  /** File bytes actually read from the source (0 for an unchanged re-run). */
  readonly bytesRead: number;
  /** Files whose chunk list was taken from the parent snapshot without reading them. */
  readonly unchangedFiles: number;
  /** The parent snapshot (newest of the same volume), if there was one. */
  readonly parent?: string;
  /** Chunks this backup added to the repository. */
  readonly newChunks: number;
  /** Chunks that already existed (or appeared twice in this backup). */
  readonly reusedChunks: number;
  /** Bytes added to the repository (compressed, encrypted). */
  readonly storedBytes: number;
  readonly durationMs: number;
  /** Entries left out, with why (sockets, FIFOs, files removed during the backup). */
  readonly skipped: readonly SkippedEntry[];
}

export interface BackupResult {
  readonly snapshotId: string;
  readonly stats: BackupStats;
}

export interface BackupContext {
  /** For messages. */
  readonly dir: string;
  readonly keys: RepoKeys;
  readonly store: ChunkStore;
  readonly chunker: Chunker;
  /** Worker threads per pool (STOWAGE_REPO_THREADS): the small-file readers' and the large-file hashers'. */
  readonly readThreads: number;
  /** The repository's small-file reader threads, shared by its backups. */
  readonly readers: SmallFileReaderPool;
  /** The repository's large-file threads, shared by its backups (they start with the first large file). */
  readonly hashers: LargeFileHasher;
  /** Finds the snapshot to compare file metadata against (the newest of the same volume). */
  readonly findParent: (sourceDir: string, tags: Readonly<Record<string, string>>) => Promise<SnapshotManifest | undefined>;
}

/** Files at most this big are read whole with one read; larger ones stream through the chunker. */
const WHOLE_READ_MAX_BYTES = 1024 * 1024;
/** Chunks of one file being compressed, encrypted or written while the next is cut. */
const CHUNKS_IN_FLIGHT_PER_FILE = 3;

export async function runBackup(ctx: BackupContext, sourceDir: string, options: BackupOptions = {}): Promise<BackupResult> {
  const startedAt = Date.now();
  const started = performance.now();
  const internal = new AbortController();
  // Every file in flight may wait on the throttle with its own (removed-after) abort listener.
  setMaxListeners(64, internal.signal);
  const onAbort = () => internal.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const throttle = options.throttle ?? (options.bandwidthBytesPerSec ? new TokenBucket(options.bandwidthBytesPerSec) : undefined);
  let writer: ChunkWriter | undefined;
  let readerLease: SmallFileReaderLease | undefined;
  let backupLease: { release(): Promise<void> } | undefined;
  try {
    if (options.signal?.aborted) throw canceled();
    // Before the indexes load: prune keeps what this backup may deduplicate against until it ends.
    backupLease = await holdBackupLease(ctx.store.backend);
    // Indexes and the parent's manifest load while the tree is walked.
    const parentLoad = ctx.store.refreshIndexes().then(() => ctx.findParent(sourceDir, options.tags ?? {}));
    parentLoad.catch(() => {});
    readerLease = ctx.readers.acquire();
    const reader = readerLease.reader;
    const activeHasher = ctx.hashers;
    const counters = { newChunks: 0, reusedChunks: 0, storedBytes: 0, bytesDone: 0, bytesRead: 0, filesDone: 0, unchangedFiles: 0 };

    // Unchanged files (same size, mtime, ctime and inode as in the parent) keep the parent's
    // chunks unread. Each part of the walk is sorted out as it arrives once the parent is loaded
    // (the main thread waits on the walk's threads then anyway), not all 20,000 files after it.
    const toRead: TreeEntry[] = [];
    // Unchanged, but a chunk not in the loaded indexes (a loose one): looked up in the store after the walk.
    const toCheck: TreeEntry[] = [];
    let parentFiles: Map<string, TreeEntry> | undefined;
    const walkedBeforeParent: TreeEntry[] = [];
    const sortOut = (entry: TreeEntry) => {
      const before = parentFiles!.get(entry.path);
      if (!before || !isUnchanged(entry, before)) toRead.push(entry);
      // Known chunks are checked without an await: one per file (an async call and its microtask
      // for each of 20,000 files) was ~0.15 s of the main thread; only unknown ids go to the store.
      else if (allKnown(ctx.store, before.chunks!)) reuseParentChunks(entry, before);
      else toCheck.push(entry);
    };
    const reuseParentChunks = (entry: TreeEntry, before: TreeEntry) => {
      entry.chunks = before.chunks;
      counters.unchangedFiles++;
      counters.reusedChunks += before.chunks!.length;
      counters.bytesDone += entry.size;
      counters.filesDone++;
    };
    const onParent = (parent: SnapshotManifest | undefined) => {
      parentFiles = new Map();
      if (parent && !options.force) for (const entry of parent.entries) if (entry.type === 'file') parentFiles.set(entry.path, entry);
      for (const entry of walkedBeforeParent) sortOut(entry);
      walkedBeforeParent.length = 0;
    };
    parentLoad.then(onParent, () => {});
    const onWalked = (files: TreeEntry[]) => {
      if (parentFiles) for (const entry of files) sortOut(entry);
      else for (const entry of files) walkedBeforeParent.push(entry);
    };
    const walk = await walkTree(sourceDir, internal.signal, reader, onWalked).catch((error: unknown) => {
      throw internal.signal.aborted && !isRepoError(error) ? canceled() : error;
    });
    const parent = await parentLoad;
    if (!parentFiles) onParent(parent);
    writer = ctx.store.writer();
    const progress = progressReporter(walk.totalBytes, counters, options);
    progress.emit();

    const files = walk.entries.filter((e) => e.type === 'file');
    const record = (result: PutResult) => {
      if (result.isNew) {
        counters.newChunks++;
        counters.storedBytes += result.storedBytes;
      } else {
        counters.reusedChunks++;
      }
    };
    const beforeRead = async (bytes: number) => {
      if (internal.signal.aborted) throw canceled();
      if (throttle) await throttle.take(bytes, internal.signal).catch(() => Promise.reject(canceled()));
    };
    const onBytes = (bytes: number) => {
      counters.bytesDone += bytes;
      counters.bytesRead += bytes;
      progress.maybeEmit();
    };
    const activeWriter = writer;
    // Files a pod swapped for a link (or another file) after the walk: left out of the snapshot, each with a reason.
    const replaced = new Set<TreeEntry>();
    const onChanged = (entry: TreeEntry, message: string) => {
      replaced.add(entry);
      walk.skipped.push({ path: entry.path, reason: `${message} while the backup was running; not read` });
    };
    const hooks: FileHooks = { beforeRead, onBytes, record, walk, onChanged };
    const fileDone = () => {
      counters.filesDone++;
      progress.maybeEmit();
    };

    for (const entry of toCheck) {
      const before = parentFiles!.get(entry.path)!;
      if (await allStored(ctx.store, before.chunks!)) reuseParentChunks(entry, before);
      else toRead.push(entry);
    }
    const small = toRead.filter((e) => e.size <= WHOLE_READ_MAX_BYTES);
    const large = toRead.filter((e) => e.size > WHOLE_READ_MAX_BYTES);

    // Small files: read in batches by worker threads, chunked, hashed and stored here.
    const batches = smallFileBatches(small);
    const activeReader = reader;
    let nextBatch = 0;
    const smallLane = async () => {
      while (nextBatch < batches.length) {
        if (internal.signal.aborted) throw canceled();
        const batch = batches[nextBatch++]!;
        await beforeRead(batch.reduce((sum, e) => sum + e.size, 0));
        const reads = await activeReader.read(batch.map((e) => ({ path: join(sourceDir, e.path), size: e.size, ...identityOf(walk, e) })));
        if (internal.signal.aborted) throw canceled();
        for (let i = 0; i < batch.length; i++) {
          const entry = batch[i]!;
          const read = reads[i]!;
          const absPath = join(sourceDir, entry.path);
          if (read.kind === 'read') {
            await storeChunks(ctx, activeWriter, entry, ctx.chunker.split(read.data), hooks);
          } else if (read.kind === 'grew') {
            await backupLargeFile(activeWriter, activeHasher, absPath, entry, hooks, internal.signal);
          } else if (read.kind === 'missing') {
            // Removed after the walk: keep the entry as an empty file rather than failing the volume.
            entry.size = 0;
            entry.chunks = [];
          } else if (read.kind === 'changed') {
            onChanged(entry, read.message);
          } else {
            throw sourceError(Object.assign(new Error(read.message), { code: read.code }), absPath, entry.path);
          }
          fileDone();
        }
      }
    };
    // Large files: streamed through the chunker, a few at a time.
    let nextLarge = 0;
    const largeLane = async () => {
      while (nextLarge < large.length) {
        if (internal.signal.aborted) throw canceled();
        const entry = large[nextLarge++]!;
        await backupLargeFile(activeWriter, activeHasher, join(sourceDir, entry.path), entry, hooks, internal.signal);
        fileDone();
      }
    };
    let firstError: unknown;
    const lanes = [
      ...Array.from({ length: Math.min(2 * ctx.readThreads, batches.length) }, smallLane),
      ...Array.from({ length: Math.min(ctx.readThreads, large.length) }, largeLane),
    ];
    const workers = lanes.map((lane) =>
      lane.catch((error: unknown) => {
        // The first failure stops the others; the errors that stop provokes are not the story.
        if (firstError === undefined) firstError = error;
        internal.abort(error);
      }),
    );
    await Promise.all(workers);
    if (options.signal?.aborted) throw canceled();
    if (firstError !== undefined) throw firstError;

    await writer.finish().catch((cause: unknown) => {
      throw new RepoError(RepoErrorCode.WriteFailed, `writing chunks into the repository at ${ctx.dir} failed: ${describe(cause)}`, {
        cause,
      });
    });
    if (options.signal?.aborted) throw canceled();

    const entries = replaced.size > 0 ? walk.entries.filter((e) => !replaced.has(e)) : walk.entries;
    const totals = {
      files: files.length - replaced.size,
      dirs: walk.entries.filter((e) => e.type === 'dir').length,
      symlinks: walk.entries.filter((e) => e.type === 'symlink').length,
      bytes: counters.bytesDone,
    };
    const snapshotId = randomId();
    const durationMs = Math.round(performance.now() - started);
    const manifest: SnapshotManifest = {
      formatVersion: 1,
      id: snapshotId,
      time: new Date(startedAt).toISOString(),
      durationMs,
      source: sourceDir,
      hostname: hostname(),
      tags: { ...(options.tags ?? {}) },
      ...(parent ? { parent: parent.id } : {}),
      totals,
      entries,
    };
    const sealed = sealJson(ctx.keys.encryptionKey, `snapshot:${snapshotId}`, manifest);
    await ctx.store.backend.put(snapshotKey(snapshotId), sealed).catch((cause: unknown) => {
      throw new RepoError(RepoErrorCode.WriteFailed, `writing the snapshot into the repository at ${ctx.dir} failed: ${describe(cause)}`, {
        cause,
      });
    });
    progress.emit();
    return {
      snapshotId,
      stats: {
        ...totals,
        bytesRead: counters.bytesRead,
        unchangedFiles: counters.unchangedFiles,
        ...(parent ? { parent: parent.id } : {}),
        newChunks: counters.newChunks,
        reusedChunks: counters.reusedChunks,
        storedBytes: counters.storedBytes + sealed.length,
        durationMs,
        skipped: walk.skipped,
      },
    };
  } catch (error) {
    internal.abort(error);
    await writer?.abandon();
    if (options.signal?.aborted) throw canceled(error);
    throw error;
  } finally {
    await readerLease?.release();
    await backupLease?.release();
    options.signal?.removeEventListener('abort', onAbort);
  }
}

/**
 * restic's rule: a file whose size, mtime, ctime and inode all match the parent's record is
 * unchanged. ctime cannot be set back by a user (touch -d, utimes), so a file rewritten with its
 * mtime restored is still caught; a file replaced by another (rename over it) has a new inode.
 */
function isUnchanged(now: TreeEntry, before: TreeEntry): boolean {
  return (
    before.chunks !== undefined &&
    before.ctimeMs !== undefined &&
    before.ino !== undefined &&
    now.size === before.size &&
    now.mtimeMs === before.mtimeMs &&
    now.ctimeMs === before.ctimeMs &&
    now.ino === before.ino
  );
}

function allKnown(store: ChunkStore, chunks: readonly string[]): boolean {
  for (const id of chunks) if (!store.existsPackedOrKnown(id)) return false;
  return true;
}

/** The parent's chunks are all still stored (a damaged index or a missing loose chunk means: read the file again). */
async function allStored(store: ChunkStore, chunks: readonly string[]): Promise<boolean> {
  for (const id of chunks) if (!store.existsPackedOrKnown(id) && !(await store.exists(id))) return false;
  return true;
}

interface FileHooks {
  readonly beforeRead: (bytes: number) => Promise<void>;
  readonly onBytes: (bytes: number) => void;
  readonly record: (result: PutResult) => void;
  /** The walk, whose device and inode of each file a read must find again. */
  readonly walk: WalkResult;
  /** The file is no longer the one the walk saw: it is left out, with `message` as the reason. */
  readonly onChanged: (entry: TreeEntry, message: string) => void;
}

/**
 * A file streamed through the chunker on a LargeFileHasher thread (read, cut, hashed, and the new
 * chunks compressed and sealed there); here each chunk id is looked up and new blobs are packed,
 * with up to CHUNKS_IN_FLIGHT_PER_FILE chunks of the file in hand (the worker waits for the rest).
 */
async function backupLargeFile(
  writer: ChunkWriter,
  hasher: LargeFileHasher,
  absPath: string,
  entry: TreeEntry,
  hooks: FileHooks,
  signal: AbortSignal,
): Promise<void> {
  const ids: string[] = [];
  let outcome: LargeFileOutcome;
  try {
    outcome = await hasher.hash(
      absPath,
      identityOf(hooks.walk, entry),
      CHUNKS_IN_FLIGHT_PER_FILE,
      async ({ id, length, seal }) => {
        // Before any await: chunks arrive in file order.
        ids.push(id);
        hooks.onBytes(length);
        // The worker reads at most a window ahead, so throttling here paces its reads.
        await hooks.beforeRead(length);
        hooks.record(await writer.putSealed(id, length, seal));
      },
      signal,
    );
  } catch (error) {
    if (isRepoError(error)) throw error;
    throw new RepoError(RepoErrorCode.WriteFailed, `backing up ${absPath} failed: ${describe(error)}`, { cause: error });
  }
  if (outcome.kind === 'done') {
    entry.size = outcome.size;
    entry.chunks = ids;
  } else if (outcome.kind === 'missing') {
    // Removed after the walk: keep the entry as an empty file rather than failing the volume.
    entry.size = 0;
    entry.chunks = [];
  } else if (outcome.kind === 'changed') {
    hooks.onChanged(entry, outcome.message);
  } else {
    throw sourceError(Object.assign(new Error(outcome.message), { code: outcome.code }), absPath, entry.path);
  }
}

/**
 * Hashes each chunk of a file and puts it, with up to CHUNKS_IN_FLIGHT_PER_FILE puts outstanding;
 * `finish` waits for them and records the file's size and chunk ids.
 */
function chunkSink(ctx: BackupContext, writer: ChunkWriter, hooks: FileHooks) {
  const ids: string[] = [];
  const inFlight: Promise<PutResult>[] = [];
  let bytes = 0;
  return {
    async add(chunk: Uint8Array): Promise<void> {
      const id = chunkIdOf(ctx.keys, chunk);
      ids.push(id);
      bytes += chunk.length;
      hooks.onBytes(chunk.length);
      const put = writer.put(id, chunk).then((result) => {
        hooks.record(result);
        return result;
      });
      put.catch(() => {});
      inFlight.push(put);
      if (inFlight.length >= CHUNKS_IN_FLIGHT_PER_FILE) await inFlight.shift();
    },
    async finish(entry: TreeEntry): Promise<void> {
      await Promise.all(inFlight);
      entry.size = bytes;
      entry.chunks = ids;
    },
    settle: () => Promise.allSettled(inFlight),
  };
}

/** A small file read whole: its chunks are stored like a streamed file's. */
async function storeChunks(
  ctx: BackupContext,
  writer: ChunkWriter,
  entry: TreeEntry,
  chunks: Iterable<Uint8Array>,
  hooks: FileHooks,
): Promise<void> {
  const sink = chunkSink(ctx, writer, hooks);
  try {
    for (const chunk of chunks) await sink.add(chunk);
    await sink.finish(entry);
  } catch (error) {
    await sink.settle();
    if (isRepoError(error)) throw error;
    throw new RepoError(RepoErrorCode.WriteFailed, `backing up ${entry.path} failed: ${describe(error)}`, { cause: error });
  }
}

/** Small files in batches of up to 64 files or 4 MiB, one worker-thread message each. */
function smallFileBatches(files: readonly TreeEntry[]): TreeEntry[][] {
  const batches: TreeEntry[][] = [];
  let batch: TreeEntry[] = [];
  let bytes = 0;
  for (const entry of files) {
    if (batch.length > 0 && (batch.length >= 64 || bytes + entry.size > 4 * 1024 * 1024)) {
      batches.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(entry);
    bytes += entry.size;
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}

function progressReporter(totalBytes: number, counters: { bytesDone: number; filesDone: number }, options: BackupOptions) {
  const interval = options.progressIntervalMs ?? 250;
  let last = 0;
  const emit = () => {
    last = performance.now();
    try {
      options.onProgress?.({ totalBytes, bytesDone: counters.bytesDone, files: counters.filesDone });
    } catch {
      // A failing progress callback must not fail the backup.
    }
  };
  return {
    emit,
    maybeEmit: () => {
      if (options.onProgress && performance.now() - last >= interval) emit();
    },
  };
}

function canceled(cause?: unknown): RepoError {
  if (isRepoError(cause, RepoErrorCode.BackupCanceled)) return cause;
  return new RepoError(RepoErrorCode.BackupCanceled, 'the backup was cancelled; no snapshot was written', cause ? { cause } : {});
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
