import { randomBytes } from 'node:crypto';
import { close, closeSync, fchmod, fchmodSync, fchown, fchownSync, futimes, futimesSync, open, openSync, writeSync } from 'node:fs';
import { chmod, lchown, lstat, lutimes, mkdir, readdir, rename, rm, symlink, unlink, utimes } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { ChunkReadError, type ChunkReader, type ChunkStore, type OpenedChunk } from './chunk-store.js';
import { errnoCode, isRepoError, RepoError, RepoErrorCode } from './errors.js';
import { isSafeRelativePath, type SnapshotManifest, type TreeEntry } from './snapshot.js';
import type { TokenBucket } from './token-bucket.js';

export interface RestoreOptions {
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: { totalBytes: number; bytesDone: number; files: number }) => void;
  /** Bytes written wait on this bucket (a node's bandwidth limit, shared with backups). */
  readonly throttle?: TokenBucket;
}

export interface RestoreResult {
  readonly snapshotId: string;
  readonly files: number;
  readonly dirs: number;
  readonly symlinks: number;
  readonly bytes: number;
  readonly durationMs: number;
}

const FILE_CONCURRENCY = 8;

/** Below this many bytes of file data a restore opens its chunks on the calling thread (no worker threads started). */
const THREADED_RESTORE_MIN_BYTES = 4 * 1024 * 1024;
/** Chunk writes of one file sent to the threads before the oldest must finish (bounds the checked chunks held, paces progress and throttle). */
const WRITES_IN_FLIGHT_PER_FILE = 3;

/** Files up to this size, in one chunk, are written with synchronous calls: a thread-pool hop costs more than the write to the page cache. */
const SYNC_WRITE_MAX_BYTES = 64 * 1024;

/**
 * Rebuilds a snapshot under `targetDir`. Every chunk is decrypted, authenticated under its id and
 * re-hashed against it before its bytes are written (openChunk). Into a non-empty target each file is written under a temp name and renamed only
 * when all its chunks checked out, so a damaged chunk never leaves a file with wrong bytes under
 * an existing name. Into an empty (or new) target each file is written in place — nothing there
 * can be overwritten — and a file whose chunk fails is removed before the restore fails.
 */
export async function runRestore(
  store: ChunkStore,
  manifest: SnapshotManifest,
  targetDir: string,
  options: RestoreOptions = {},
  /** Worker threads that decrypt and authenticate large chunks (STOWAGE_REPO_THREADS); 0 = all on this thread. */
  threads = 0,
): Promise<RestoreResult> {
  const started = performance.now();
  const inPlace = await prepareTarget(targetDir);
  for (const entry of manifest.entries) {
    if (!isSafeRelativePath(entry.path)) {
      throw new RepoError(RepoErrorCode.SnapshotCorrupt, `snapshot ${manifest.id} holds an unsafe path ${JSON.stringify(entry.path)}`, {
        details: { snapshotId: manifest.id, path: entry.path },
      });
    }
  }
  await store.refreshIndexes();
  const asRoot = process.getuid?.() === 0;
  const abs = (entry: TreeEntry) => (entry.path === '.' ? targetDir : join(targetDir, entry.path));
  const dirs = manifest.entries.filter((e) => e.type === 'dir');
  const files = manifest.entries.filter((e) => e.type === 'file');
  const links = manifest.entries.filter((e) => e.type === 'symlink');
  // Directories stay writable (0700 | mode) until the end, so read-only ones can still be filled.
  for (const dir of dirs) await mkdir(abs(dir), { recursive: true, mode: 0o700 });

  const totalBytes = files.reduce((sum, f) => sum + f.size, 0);
  let bytesDone = 0;
  let filesDone = 0;
  // A thread costs tens of ms of CPU to start: a small restore (a pod volume of a few files, as a
  // node agent runs hundreds of) opens its chunks faster on this thread than it could start one.
  const useThreads = totalBytes >= THREADED_RESTORE_MIN_BYTES ? threads : 0;
  const reader = store.reader({ threads: useThreads });
  const lookahead = new Lookahead(Math.max(2, 2 * useThreads));
  try {
    let next = 0;
    let firstError: unknown;
    const worker = async () => {
      while (next < files.length && firstError === undefined) {
        options.signal?.throwIfAborted();
        const entry = files[next++]!;
        const onBytes = async (n: number) => {
          bytesDone += n;
          // per chunk too, so a large file shows progress (and can be seen to move) before it ends
          options.onProgress?.({ totalBytes, bytesDone, files: filesDone });
          await options.throttle?.take(n, options.signal);
        };
        if (inPlace) await restoreFileInPlace(reader, lookahead, entry, abs(entry), asRoot, onBytes);
        else await restoreFile(reader, lookahead, entry, abs(entry), asRoot, onBytes);
        filesDone++;
        options.onProgress?.({ totalBytes, bytesDone, files: filesDone });
      }
    };
    await Promise.all(
      Array.from({ length: Math.min(FILE_CONCURRENCY, Math.max(1, files.length)) }, () =>
        worker().catch((error: unknown) => {
          if (firstError === undefined) firstError = error;
        }),
      ),
    );
    if (firstError !== undefined) throw firstError;
  } finally {
    await reader.close();
  }

  for (const link of links) {
    const path = abs(link);
    await rm(path, { force: true });
    await symlink(link.target ?? '', path);
    if (asRoot) await lchown(path, link.uid, link.gid).catch(() => {});
    await lutimes(path, link.mtimeMs / 1000, link.mtimeMs / 1000).catch(() => {});
  }
  // Deepest first, so setting a parent's mtime is not undone by work in its children.
  for (const dir of [...dirs].reverse()) {
    const path = abs(dir);
    if (asRoot) await lchown(path, dir.uid, dir.gid).catch(() => {});
    await chmod(path, dir.mode);
    await utimes(path, dir.mtimeMs / 1000, dir.mtimeMs / 1000);
  }
  return {
    snapshotId: manifest.id,
    files: files.length,
    dirs: dirs.length,
    symlinks: links.length,
    bytes: bytesDone,
    durationMs: Math.round(performance.now() - started),
  };
}

/** Creates the target if needed; true when it is new or empty (files can then be written in place). */
async function prepareTarget(targetDir: string): Promise<boolean> {
  try {
    const st = await lstat(targetDir);
    if (!st.isDirectory()) {
      throw new RepoError(RepoErrorCode.RestoreTargetInvalid, `the restore target ${targetDir} exists and is not a directory`, {
        details: { path: targetDir },
      });
    }
    return (await readdir(targetDir)).length === 0;
  } catch (error) {
    if (isRepoError(error)) throw error;
    if (errnoCode(error) !== 'ENOENT') {
      throw new RepoError(RepoErrorCode.RestoreTargetInvalid, `cannot use the restore target ${targetDir}: ${errnoCode(error)}`, {
        cause: error,
        details: { path: targetDir },
      });
    }
    await mkdir(targetDir, { recursive: true }).catch((cause: unknown) => {
      throw new RepoError(RepoErrorCode.RestoreTargetInvalid, `cannot create the restore target ${targetDir}: ${errnoCode(cause)}`, {
        cause,
        details: { path: targetDir },
      });
    });
    return true;
  }
}

// Plain fds and the callback API: about half the CPU of FileHandle per small file (measured in backup).
const openFd = promisify(open);
const closeFd = promisify(close);
const fchmodFd = promisify(fchmod);
const futimesFd = promisify(futimes);
const fchownFd = promisify(fchown);

async function restoreFile(
  reader: ChunkReader,
  lookahead: Lookahead,
  entry: TreeEntry,
  path: string,
  asRoot: boolean,
  onBytes: (n: number) => Promise<void>,
): Promise<void> {
  const tmp = join(dirname(path), `.stowage-restore-${randomBytes(6).toString('hex')}`);
  let fd: number | undefined = await openFd(tmp, 'wx', 0o600);
  try {
    checkSize(entry, await writeChunks(reader, entry, fd, lookahead, onBytes));
    if (asRoot) await fchownFd(fd, entry.uid, entry.gid).catch(() => {});
    await fchmodFd(fd, entry.mode);
    await futimesFd(fd, entry.mtimeMs / 1000, entry.mtimeMs / 1000);
    const closing = fd;
    fd = undefined;
    await closeFd(closing);
    await rename(tmp, path);
  } catch (error) {
    if (fd !== undefined) await closeFd(fd).catch(() => {});
    await unlink(tmp).catch(() => {});
    throw error;
  }
}

/** The process umask, read once: a file created with `mode` already has it when the umask clears no bit of it. */
let umask: number | undefined;
function createdWithMode(mode: number): boolean {
  umask ??= process.umask();
  return (mode & 0o7777) === (mode & 0o777 & ~umask);
}

/**
 * Writes a file straight under its name (empty target only): one create with the file's mode,
 * its chunks, its times, no rename. Small one-chunk files use synchronous calls.
 */
async function restoreFileInPlace(
  reader: ChunkReader,
  lookahead: Lookahead,
  entry: TreeEntry,
  path: string,
  asRoot: boolean,
  onBytes: (n: number) => Promise<void>,
): Promise<void> {
  const chunks = entry.chunks ?? [];
  const modeIsSet = createdWithMode(entry.mode);
  const seconds = entry.mtimeMs / 1000;
  if (chunks.length <= 1 && entry.size <= SYNC_WRITE_MAX_BYTES) {
    const data = chunks.length === 1 ? await readChunk(reader, chunks[0]!, entry) : Buffer.alloc(0);
    checkSize(entry, data.length);
    const fd = openSync(path, 'wx', entry.mode & 0o777);
    try {
      for (let off = 0; off < data.length; ) off += writeSync(fd, data, off, data.length - off, off);
      if (asRoot && !ownedAlready(entry)) {
        try {
          fchownSync(fd, entry.uid, entry.gid);
        } catch {
          // Best effort, as on the temp-file path.
        }
      }
      if (!modeIsSet) fchmodSync(fd, entry.mode);
      futimesSync(fd, seconds, seconds);
    } finally {
      closeSync(fd);
    }
    await onBytes(data.length);
    return;
  }
  let fd: number | undefined = await openFd(path, 'wx', entry.mode & 0o777);
  try {
    checkSize(entry, await writeChunks(reader, entry, fd, lookahead, onBytes));
    if (asRoot && !ownedAlready(entry)) await fchownFd(fd, entry.uid, entry.gid).catch(() => {});
    if (!modeIsSet) await fchmodFd(fd, entry.mode);
    await futimesFd(fd, seconds, seconds);
    const closing = fd;
    fd = undefined;
    await closeFd(closing);
  } catch (error) {
    if (fd !== undefined) await closeFd(fd).catch(() => {});
    await unlink(path).catch(() => {});
    throw error;
  }
}

/** A file this process creates is owned by its uid and gid already; chown only when the snapshot says otherwise. */
function ownedAlready(entry: TreeEntry): boolean {
  return entry.uid === process.getuid?.() && entry.gid === process.getgid?.();
}

/**
 * Chunks read ahead of the one being written, shared by the files in flight: each file always
 * reads its next chunk, and takes a token for every further one, so a single large file keeps
 * every opener thread busy while the memory held stays bounded however many files run.
 */
class Lookahead {
  constructor(private free: number) {}
  tryTake(): boolean {
    if (this.free === 0) return false;
    this.free--;
    return true;
  }
  give(): void {
    this.free++;
  }
}

/**
 * Writes `entry`'s chunks into `fd` at their offsets, while the following chunks are read and
 * checked; returns the bytes written. Nothing is written before its chunk checked out, and
 * nothing is still being written when this returns or throws.
 */
async function writeChunks(
  reader: ChunkReader,
  entry: TreeEntry,
  fd: number,
  lookahead: Lookahead,
  onBytes: (n: number) => Promise<void>,
): Promise<number> {
  const chunks = entry.chunks ?? [];
  const queue: { readonly chunk: Promise<OpenedChunk>; readonly token: boolean }[] = [];
  let next = 0;
  const readAhead = () => {
    while (next < chunks.length && (queue.length === 0 || lookahead.tryTake())) {
      const chunk = openChunk(reader, chunks[next++]!, entry);
      chunk.catch(() => {});
      queue.push({ chunk, token: queue.length > 0 });
    }
  };
  let position = 0;
  // Writes go to fixed offsets, so several can run at once (on different threads); each settles
  // before the fd is handed back, as a thread writing to a closed (and reused) fd number would
  // write into another file.
  const writing: Promise<void>[] = [];
  try {
    readAhead();
    while (queue.length > 0) {
      const head = queue.shift()!;
      if (head.token) lookahead.give();
      readAhead();
      const chunk = await head.chunk;
      const written = chunk.writeAt(fd, position).then(() => onBytes(chunk.length));
      written.catch(() => {});
      writing.push(written);
      position += chunk.length;
      if (writing.length >= WRITES_IN_FLIGHT_PER_FILE) await writing.shift();
    }
    while (writing.length > 0) await writing.shift();
  } finally {
    await Promise.allSettled(writing);
    for (const rest of queue.splice(0)) {
      if (rest.token) lookahead.give();
      rest.chunk.then(
        (chunk) => chunk.drop(),
        () => {},
      );
    }
  }
  return position;
}

function checkSize(entry: TreeEntry, restored: number): void {
  if (restored !== entry.size) {
    throw new RepoError(
      RepoErrorCode.SnapshotCorrupt,
      `restored ${restored} bytes for ${entry.path} but the snapshot records ${entry.size}`,
      {
        details: { path: entry.path },
      },
    );
  }
}

async function readChunk(reader: ChunkReader, chunkId: string, entry: TreeEntry): Promise<Buffer> {
  return nameTheFile(reader.read(chunkId), chunkId, entry);
}

function openChunk(reader: ChunkReader, chunkId: string, entry: TreeEntry): Promise<OpenedChunk> {
  return nameTheFile(reader.open(chunkId), chunkId, entry);
}

/** A chunk that cannot be read fails the restore naming the file and the chunk. */
async function nameTheFile<T>(reading: Promise<T>, chunkId: string, entry: TreeEntry): Promise<T> {
  try {
    return await reading;
  } catch (cause) {
    if (cause instanceof ChunkReadError) {
      throw new RepoError(
        RepoErrorCode.ChunkCorrupt,
        `cannot restore ${entry.path}: chunk ${chunkId} is ${cause.problem === 'missing' ? 'missing' : 'damaged'} (${cause.message}); the file was not written`,
        { cause, details: { chunkId, path: entry.path, problem: cause.problem } },
      );
    }
    throw cause;
  }
}
