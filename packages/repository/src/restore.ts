import { randomBytes } from 'node:crypto';
import {
  close,
  closeSync,
  constants,
  fchmod,
  fchmodSync,
  fchown,
  fchownSync,
  futimes,
  futimesSync,
  open,
  openSync,
  writeSync,
} from 'node:fs';
import { lchown, lstat, lutimes, mkdir, readdir, rename, symlink, unlink } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { promisify } from 'node:util';
import { ChunkReadError, type ChunkReader, type ChunkStore, type OpenedChunk } from './chunk-store.js';
import { atDir, closeDir, type DirRef, makeDirAt, openDir, openDirAt } from './dir-fd.js';
import { errnoCode, isRepoError, RepoError, RepoErrorCode } from './errors.js';
import { isSafeRelativePath, type SnapshotManifest, type TreeEntry } from './snapshot.js';
import type { TokenBucket } from './token-bucket.js';

export interface RestoreOptions {
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: { totalBytes: number; bytesDone: number; files: number }) => void;
  /** Bytes written wait on this bucket (a node's bandwidth limit, shared with backups). */
  readonly throttle?: TokenBucket;
  /**
   * The target directory, already opened by the caller without following a link (dir-fd.ts): the
   * restore writes only beneath it, whatever becomes of its path. Without it the target path is
   * created if needed and opened here.
   */
  readonly targetHandle?: DirRef;
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
  for (const entry of manifest.entries) {
    if (!isSafeRelativePath(entry.path)) {
      throw new RepoError(RepoErrorCode.SnapshotCorrupt, `snapshot ${manifest.id} holds an unsafe path ${JSON.stringify(entry.path)}`, {
        details: { snapshotId: manifest.id, path: entry.path },
      });
    }
  }
  const root = options.targetHandle ?? (await openTarget(targetDir));
  const targetDirs = new TargetDirs(root);
  try {
    return await restoreInto(store, manifest, targetDirs, options, threads, started);
  } finally {
    await targetDirs.close();
    if (!options.targetHandle) await closeDir(root);
  }
}

async function restoreInto(
  store: ChunkStore,
  manifest: SnapshotManifest,
  targetDirs: TargetDirs,
  options: RestoreOptions,
  threads: number,
  started: number,
): Promise<RestoreResult> {
  const inPlace = (await readdir(atDir(targetDirs.root, '.'))).length === 0;
  await store.refreshIndexes();
  const asRoot = process.getuid?.() === 0;
  const dirs = manifest.entries.filter((e) => e.type === 'dir');
  const files = manifest.entries.filter((e) => e.type === 'file');
  const links = manifest.entries.filter((e) => e.type === 'symlink');
  // Directories stay writable (0700 | mode) until the end, so read-only ones can still be filled.
  for (const dir of dirs) if (dir.path !== '.') await targetDirs.make(dir.path);

  const totalBytes = files.reduce((sum, f) => sum + f.size, 0);
  let bytesDone = 0;
  let filesDone = 0;
  // A thread costs tens of ms of CPU to start: a small restore (a pod volume of a few files, as a
  // node agent runs hundreds of) opens its chunks faster on this thread than it could start one.
  const useThreads = totalBytes >= THREADED_RESTORE_MIN_BYTES ? threads : 0;
  const reader = store.reader({ threads: useThreads });
  reader.expect(files.flatMap((f) => f.chunks ?? []));
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
        await targetDirs.use(parentOf(entry.path), (dir) =>
          inPlace
            ? restoreFileInPlace(reader, lookahead, entry, dir, asRoot, onBytes)
            : restoreFile(reader, lookahead, entry, dir, asRoot, onBytes),
        );
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
    await targetDirs.use(parentOf(link.path), async (dir) => {
      const path = atDir(dir, basename(link.path));
      await unlink(path).catch((error: unknown) => {
        if (errnoCode(error) !== 'ENOENT') throw error;
      });
      await symlink(link.target ?? '', path);
      if (asRoot) await lchown(path, link.uid, link.gid).catch(() => {});
      await lutimes(path, link.mtimeMs / 1000, link.mtimeMs / 1000).catch(() => {});
    });
  }
  // Every directory is opened again from the root, one checked component at a time: one that a
  // link or another directory replaced since it was made fails the restore, naming it.
  await targetDirs.forget();
  // Deepest first, so setting a parent's mtime is not undone by work in its children. On the
  // descriptors: a pod cannot redirect a chmod, chown or utimes to a directory outside.
  for (const dir of [...dirs].reverse()) {
    await targetDirs.use(dir.path, async ({ handle }) => {
      if (asRoot) await handle.chown(dir.uid, dir.gid).catch(() => {});
      await handle.chmod(dir.mode);
      await handle.utimes(dir.mtimeMs / 1000, dir.mtimeMs / 1000);
    });
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

/** Creates the target if needed and opens it (not through a link). */
async function openTarget(targetDir: string): Promise<DirRef> {
  try {
    const st = await lstat(targetDir);
    if (!st.isDirectory()) {
      throw new RepoError(RepoErrorCode.RestoreTargetInvalid, `the restore target ${targetDir} exists and is not a directory`, {
        details: { path: targetDir },
      });
    }
    return await openDir(targetDir);
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
    return openDir(targetDir);
  }
}

function parentOf(path: string): string {
  const parent = dirname(path);
  return parent === '' ? '.' : parent;
}

/** Descriptors kept open per directory at most (the most recently used; more while all are in use). */
const OPEN_DIRS_MAX = 256;

/**
 * The directories of a restore target, made and opened one component at a time beneath the root,
 * never through a link (dir-fd.ts). Each made directory's identity (device, inode) is kept: one
 * opened again later (after its descriptor was closed to bound how many are open) must still be
 * it, so a pod that swapped it for a link or another directory gets the restore failed, not
 * redirected.
 */
class TargetDirs {
  private readonly known = new Map<string, { dev: number; ino: number }>();
  /** Open directories by path, least recently used first; `pins` > 0 while in use. */
  private readonly opened = new Map<string, { dir: DirRef; pins: number }>();
  private readonly opening = new Map<string, Promise<{ dir: DirRef; pins: number }>>();

  constructor(readonly root: DirRef) {
    this.known.set('.', { dev: root.dev, ino: root.ino });
  }

  /** Creates `path` (mode 0700 until the end; missing parents too) or takes the directory there. */
  async make(path: string): Promise<void> {
    if (this.known.has(path)) return;
    const parent = parentOf(path);
    await this.make(parent);
    await this.use(parent, async (dir) => {
      const made = await makeDirAt(dir, basename(path), 0o700);
      this.known.set(path, { dev: made.dev, ino: made.ino });
      this.add(path, { dir: made, pins: 0 });
    });
  }

  /** Runs `fn` with the directory `path` open (made or taken earlier). */
  async use<T>(path: string, fn: (dir: DirRef) => Promise<T>): Promise<T> {
    const entry = await this.acquire(path);
    try {
      return await fn(entry.dir);
    } finally {
      entry.pins--;
      this.evict();
    }
  }

  /** Closes every open directory but the root: the next use of each opens it again from the root, checked. */
  async forget(): Promise<void> {
    for (const [path, entry] of [...this.opened]) {
      this.opened.delete(path);
      await closeDir(entry.dir);
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.opening.values());
    await this.forget();
  }

  private async acquire(path: string): Promise<{ dir: DirRef; pins: number }> {
    if (path === '.') return { dir: this.root, pins: 1 };
    const cached = this.opened.get(path);
    if (cached) {
      this.opened.delete(path);
      this.opened.set(path, cached);
      cached.pins++;
      return cached;
    }
    let pending = this.opening.get(path);
    if (!pending) {
      const identity = this.known.get(path);
      if (!identity) throw new Error(`restore: directory ${path} used before it was made`);
      pending = this.use(parentOf(path), (parent) => openDirAt(parent, basename(path), identity)).then((dir) => {
        const entry = { dir, pins: 0 };
        this.add(path, entry);
        return entry;
      });
      this.opening.set(path, pending);
      pending.then(
        () => this.opening.delete(path),
        () => this.opening.delete(path),
      );
    }
    const entry = await pending;
    entry.pins++;
    return entry;
  }

  private add(path: string, entry: { dir: DirRef; pins: number }): void {
    this.opened.set(path, entry);
    this.evict();
  }

  private evict(): void {
    if (this.opened.size <= OPEN_DIRS_MAX) return;
    for (const [path, entry] of this.opened) {
      if (this.opened.size <= OPEN_DIRS_MAX) break;
      if (entry.pins > 0) continue;
      this.opened.delete(path);
      void closeDir(entry.dir);
    }
  }
}

// Plain fds and the callback API: about half the CPU of FileHandle per small file (measured in backup).
const openFd = promisify(open);
const closeFd = promisify(close);
const fchmodFd = promisify(fchmod);
const futimesFd = promisify(futimes);
const fchownFd = promisify(fchown);

/** A new file, never through a link (O_EXCL refuses one already there; O_NOFOLLOW says so too). */
const CREATE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

async function restoreFile(
  reader: ChunkReader,
  lookahead: Lookahead,
  entry: TreeEntry,
  dir: DirRef,
  asRoot: boolean,
  onBytes: (n: number) => Promise<void>,
): Promise<void> {
  const path = atDir(dir, basename(entry.path));
  const tmp = atDir(dir, `.stowage-restore-${randomBytes(6).toString('hex')}`);
  let fd: number | undefined = await openFd(tmp, CREATE_NEW, 0o600);
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
  dir: DirRef,
  asRoot: boolean,
  onBytes: (n: number) => Promise<void>,
): Promise<void> {
  const path = atDir(dir, basename(entry.path));
  const chunks = entry.chunks ?? [];
  const modeIsSet = createdWithMode(entry.mode);
  const seconds = entry.mtimeMs / 1000;
  if (chunks.length <= 1 && entry.size <= SYNC_WRITE_MAX_BYTES) {
    const data = chunks.length === 1 ? await readChunk(reader, chunks[0]!, entry) : Buffer.alloc(0);
    checkSize(entry, data.length);
    const fd = openSync(path, CREATE_NEW, entry.mode & 0o777);
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
  let fd: number | undefined = await openFd(path, CREATE_NEW, entry.mode & 0o777);
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
