import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { RepoError, RepoErrorCode } from './errors.js';
import { IdleStop, THREADS_IDLE_MS } from './worker-threads.js';

/** One file of a batch: its bytes, or why there are none. */
export type SmallFileRead =
  | { readonly kind: 'read'; readonly data: Buffer }
  /** Larger than the walk said: the caller streams it instead. */
  | { readonly kind: 'grew' }
  /** Removed since the walk. */
  | { readonly kind: 'missing' }
  /** No longer the file the walk saw (replaced by a link, a FIFO or another file): not read. */
  | { readonly kind: 'changed'; readonly message: string }
  | { readonly kind: 'failed'; readonly code: string | undefined; readonly message: string };

interface WorkerReply {
  readonly id: number;
  readonly buffer: ArrayBuffer;
  readonly results: (
    | { kind: 'read'; offset: number; length: number }
    | { kind: 'grew' | 'missing' }
    | { kind: 'changed'; message: string }
    | { kind: 'failed'; code?: string; message: string }
  )[];
}

/** One entry found by a walk: what tree-walk turns into a TreeEntry or a skip. */
export interface WalkedEntry {
  readonly rel: string;
  /** 'gone': removed between readdir and lstat; 'other': socket, FIFO or device. */
  readonly kind: 'file' | 'dir' | 'symlink' | 'gone' | 'other';
  readonly mode: number;
  readonly size: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
  readonly ino: number;
  readonly dev: number;
  readonly uid: number;
  readonly gid: number;
  readonly target?: string;
}

/** A walk of one directory (and, if recursive, its subtree): entries in manifest order. */
export interface WalkReply {
  readonly id: number;
  /** -1 for the root's own listing, else the index of the top-level subdirectory (in `subdirs`) this is the subtree of. */
  readonly index: number;
  readonly entries: WalkedEntry[];
  /** In the root's listing: its subdirectories, in order, whose subtrees follow. */
  readonly subdirs?: (FileIdentity & { readonly rel: string })[];
  /** Directories that vanished while being walked. */
  readonly vanished: string[];
  /** Directories that were no longer the ones their parent's listing saw (a link swapped in): not listed. */
  readonly replaced: string[];
  readonly error?: { readonly code: string | undefined; readonly message: string; readonly absPath: string; readonly rel: string };
}

/**
 * Plain JavaScript, so it runs the same under tsx, vitest and the compiled package. Reads each file
 * of a batch with synchronous calls into one ArrayBuffer (transferred back, not copied): one
 * message per batch instead of three thread-pool round trips (open, read, close) per file.
 *
 * The pod whose volume this is keeps running and may swap any entry for a link elsewhere between
 * the walk and the read (SECURITY.md). So nothing is opened through a link: a directory is
 * opened with O_NOFOLLOW | O_DIRECTORY, its identity (device, inode) checked against its parent's
 * listing, and then listed and lstat'ed through /proc/self/fd/<fd> (Linux's way to resolve names
 * relative to a descriptor, openat's effect, which Node lacks); a file is opened with O_NOFOLLOW
 * (and O_NONBLOCK: a FIFO swapped in must not block) and read only if fstat on the descriptor shows
 * the regular file, device and inode the walk saw. Anything else is reported as changed, not read.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { openSync, readSync, closeSync, readdirSync, lstatSync, readlinkSync, fstatSync, existsSync, constants } = require('node:fs');
const { join } = require('node:path');

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const FILE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const FD_DIR = existsSync('/proc/self/fd') ? '/proc/self/fd/' : undefined;
// A link or a non-directory where a directory was: ELOOP (the last component), ENOTDIR (an earlier one).
const SWAPPED = new Set(['ELOOP', 'ENOTDIR', 'EMLINK']);

// Opens dir.rel under root, without following a link, and checks it is the directory that was listed.
function openDir(root, dir) {
  const absDir = dir.rel === '.' ? root : join(root, dir.rel);
  let fd;
  try {
    fd = openSync(absDir, DIR_FLAGS);
  } catch (error) {
    if (SWAPPED.has(error.code)) return { replaced: true };
    if (error.code === 'ENOENT' && dir.rel !== '.') return { vanished: true };
    return { error: { code: error.code, message: error.message, absPath: absDir, rel: dir.rel } };
  }
  const st = fstatSync(fd);
  if (st.dev !== dir.dev || st.ino !== dir.ino) {
    closeSync(fd);
    return { replaced: true };
  }
  return { fd, base: FD_DIR ? FD_DIR + fd : absDir, absDir };
}

// Walks dir ({ rel, dev, ino } under root): its children sorted by name, then each subdirectory's
// subtree in order (parents before children), with synchronous calls.
function walk(root, dir, recursive) {
  const entries = [];
  const vanished = [];
  const replaced = [];
  const pending = [dir];
  while (pending.length > 0) {
    const current = pending.shift();
    const dirPath = current.rel;
    const opened = openDir(root, current);
    if (opened.replaced) { replaced.push(dirPath); continue; }
    if (opened.vanished) { vanished.push(dirPath); continue; }
    if (opened.error) return { entries, vanished, replaced, error: opened.error };
    const subdirs = [];
    try {
      let names;
      try {
        names = readdirSync(opened.base);
      } catch (error) {
        return { entries, vanished, replaced, error: { code: error.code, message: error.message, absPath: opened.absDir, rel: dirPath } };
      }
      names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      for (const name of names) {
        const rel = dirPath === '.' ? name : dirPath + '/' + name;
        const abs = opened.base + '/' + name;
        let st;
        let target;
        try {
          st = lstatSync(abs, { throwIfNoEntry: false });
          if (st && st.isSymbolicLink()) target = readlinkSync(abs);
        } catch (error) {
          // ENOENT: removed since the listing. EINVAL: the link lstat saw was replaced since (readlink of a
          // non-link) — a pod swapping entries; either way the entry the walk saw is gone, not an error.
          if (error.code !== 'ENOENT' && error.code !== 'EINVAL') return { entries, vanished, replaced, error: { code: error.code, message: error.message, absPath: join(opened.absDir, name), rel } };
          st = undefined;
        }
        if (!st) { entries.push({ rel, kind: 'gone' }); continue; }
        const kind = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : st.isSymbolicLink() && target !== undefined ? 'symlink' : 'other';
        entries.push({ rel, kind, mode: st.mode & 0o7777, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino, dev: st.dev, uid: st.uid, gid: st.gid, target });
        if (kind === 'dir') subdirs.push({ rel, dev: st.dev, ino: st.ino });
      }
    } finally {
      closeSync(opened.fd);
    }
    if (recursive) pending.unshift(...subdirs);
  }
  return { entries, vanished, replaced };
}

// Takes top-level subtrees one at a time from the counter all threads of this walk share, until
// none is left (or the main thread set it past the end to stop).
function walkSubtrees(id, root, subdirs, claim) {
  const counter = new Int32Array(claim);
  for (let index = Atomics.add(counter, 0, 1); index < subdirs.length; index = Atomics.add(counter, 0, 1)) {
    parentPort.postMessage({ id, index, ...walk(root, subdirs[index], true) });
  }
}

parentPort.on('message', (message) => {
  if (message.walkRoot) {
    // The root's listing, then straight on to subtrees: the main thread (often busy decrypting
    // the parent snapshot then) is not in the way before the first subtree starts.
    const { root, dev, ino, claim } = message.walkRoot;
    const top = walk(root, { rel: '.', dev, ino }, false);
    const subdirs = top.error ? [] : top.entries.filter((e) => e.kind === 'dir').map((e) => ({ rel: e.rel, dev: e.dev, ino: e.ino }));
    parentPort.postMessage({ id: message.id, index: -1, subdirs, ...top });
    walkSubtrees(message.id, root, subdirs, claim);
    return;
  }
  if (message.walkSubtrees) {
    walkSubtrees(message.id, message.walkSubtrees.root, message.walkSubtrees.subdirs, message.walkSubtrees.claim);
    return;
  }
  const { id, files } = message;
  let total = 0;
  for (const f of files) total += f.size + 1;
  const buffer = new ArrayBuffer(total);
  const bytes = new Uint8Array(buffer);
  const results = [];
  let offset = 0;
  for (const f of files) {
    let fd;
    try {
      fd = openSync(f.path, FILE_FLAGS);
      const st = fstatSync(fd);
      if (!st.isFile() || st.dev !== f.dev || st.ino !== f.ino) {
        results.push({ kind: 'changed', message: st.isFile() ? 'replaced by another file' : 'replaced by something not a regular file' });
        offset += f.size + 1;
        continue;
      }
      // size + 1 bytes: reading one more than the walk saw tells that the file grew.
      let length = 0;
      for (;;) {
        const n = readSync(fd, bytes, offset + length, f.size + 1 - length, length);
        if (n === 0) break;
        length += n;
        if (length > f.size) break;
      }
      results.push(length > f.size ? { kind: 'grew' } : { kind: 'read', offset, length });
    } catch (error) {
      if (error.code === 'ENOENT') results.push({ kind: 'missing' });
      else if (SWAPPED.has(error.code)) results.push({ kind: 'changed', message: 'replaced by a symbolic link (not followed)' });
      else results.push({ kind: 'failed', code: error.code, message: error.message });
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
    offset += f.size + 1;
  }
  parentPort.postMessage({ id, buffer, results }, [buffer]);
});
`;

/** Threads reading small files: `STOWAGE_REPO_THREADS`, default one per core, 2 to 8 (more only added contention on our 2-core VMs). */
export function defaultReadThreads(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.STOWAGE_REPO_THREADS;
  if (raw === undefined || raw.trim() === '') return Math.min(8, Math.max(2, availableParallelism()));
  const configured = Number(raw);
  if (!Number.isInteger(configured) || configured < 1 || configured > 64) {
    throw new RepoError(
      RepoErrorCode.InvalidArgument,
      `STOWAGE_REPO_THREADS must be a whole number from 1 to 64, got ${JSON.stringify(raw)}`,
      {
        details: { field: 'STOWAGE_REPO_THREADS' },
      },
    );
  }
  return configured;
}

/** Which file a walk saw: what a later open must find again. */
export interface FileIdentity {
  readonly dev: number;
  readonly ino: number;
}

export interface SmallFileRequest extends FileIdentity {
  readonly path: string;
  readonly size: number;
}

/** A tree walk in progress on the threads (SmallFileReader.walkTree). */
export interface TreeWalk {
  /** The root's own entries, and its subdirectories (`subdirs`) in order. */
  readonly top: Promise<WalkReply>;
  /** The subtree of `subdirs[index]`: its entries after its own, parents before children. */
  subtree(index: number): Promise<WalkReply>;
  /** Threads take no further subtree (on failure or cancel; harmless once all are in). */
  stop(): void;
}

/**
 * A few worker threads walking directories and reading batches of small files, round robin.
 * Several backups may use one reader at once (every request has its own id); the repository
 * shares one between its backups (SmallFileReaderPool).
 */
export class SmallFileReader {
  private readonly workers: Worker[];
  // biome-ignore lint/suspicious/noExplicitAny: one map for both reply kinds, typed at the call sites
  private readonly pending = new Map<number, { resolve: (reply: any) => void; reject: (error: unknown) => void }>();
  private nextId = 0;
  private nextWorker = 0;
  private closed = false;
  /** A thread crashed or stopped: every request in flight was failed, and this reader is not to be used again. */
  broken = false;

  constructor(threads: number) {
    this.workers = Array.from({ length: threads }, () => {
      const worker = new Worker(WORKER_SOURCE, { eval: true });
      // A read has one reply; a walk one per subtree, so each waiter removes itself when done.
      worker.on('message', (reply: { id: number }) => this.pending.get(reply.id)?.resolve(reply));
      const fail = (error: unknown) => {
        if (this.closed) return;
        this.broken = true;
        for (const waiter of this.pending.values()) waiter.reject(error);
        this.pending.clear();
      };
      worker.on('error', fail);
      worker.on('exit', (code) => fail(new Error(`a small-file reader thread stopped (exit code ${code})`)));
      return worker;
    });
  }

  /** The threads keep the process alive (while a backup waits on them) or not (while idle). */
  ref(): void {
    for (const worker of this.workers) worker.ref();
  }

  unref(): void {
    for (const worker of this.workers) worker.unref();
  }

  /** Why no request can be sent now (the threads are stopped, or one crashed), or undefined. */
  private unusable(): Error | undefined {
    if (this.closed) return new Error('the small-file reader is closed');
    if (this.broken) return new Error('a small-file reader thread crashed');
    return undefined;
  }

  /** Reads each file if it still is the regular file (device, inode) the walk saw. */
  async read(files: readonly SmallFileRequest[]): Promise<SmallFileRead[]> {
    const unusable = this.unusable();
    if (unusable) throw unusable;
    const id = this.nextId++;
    const worker = this.workers[this.nextWorker++ % this.workers.length]!;
    const reply = await new Promise<WorkerReply>((resolve, reject) => {
      this.pending.set(id, {
        resolve: (r: WorkerReply) => {
          this.pending.delete(id);
          resolve(r);
        },
        reject,
      });
      worker.postMessage({ id, files: files.map(({ path, size, dev, ino }) => ({ path, size, dev, ino })) });
    });
    return reply.results.map((r) => {
      if (r.kind === 'read') return { kind: 'read', data: Buffer.from(reply.buffer, r.offset, r.length) };
      if (r.kind === 'failed') return { kind: 'failed', code: r.code, message: r.message };
      if (r.kind === 'changed') return { kind: 'changed', message: r.message };
      return { kind: r.kind };
    });
  }

  /**
   * Walks the tree under `root` on the threads: one lists the root and goes straight on to its
   * subdirectories' subtrees; the others join once the listing is here. Each subtree is taken by
   * whichever thread is free (a shared counter), so no thread waits on this one between them.
   */
  walkTree(root: string, identity: FileIdentity): TreeWalk {
    const unusable = this.unusable();
    if (unusable) throw unusable;
    const id = this.nextId++;
    const claim = new SharedArrayBuffer(4);
    const first = this.workers[this.nextWorker++ % this.workers.length]!;
    const replies = new Map<number, { promise: Promise<WalkReply>; resolve: (r: WalkReply) => void; reject: (e: unknown) => void }>();
    let failure: { error: unknown } | undefined;
    let expected = Number.POSITIVE_INFINITY;
    let received = 0;
    const slot = (index: number) => {
      let entry = replies.get(index);
      if (!entry) {
        let resolve!: (r: WalkReply) => void;
        let reject!: (e: unknown) => void;
        const promise = new Promise<WalkReply>((res, rej) => {
          resolve = res;
          reject = rej;
        });
        promise.catch(() => {}); // a thread's crash after the caller stopped waiting is not unhandled
        entry = { promise, resolve, reject };
        replies.set(index, entry);
        if (failure) reject(failure.error);
      }
      return entry;
    };
    this.pending.set(id, {
      resolve: (reply: WalkReply) => {
        if (reply.index === -1) {
          const subdirs = reply.subdirs ?? [];
          expected = subdirs.length;
          for (const worker of this.workers)
            if (worker !== first && subdirs.length > 0) worker.postMessage({ id, walkSubtrees: { root, subdirs, claim } });
        }
        if (++received === expected + 1) this.pending.delete(id);
        slot(reply.index).resolve(reply);
      },
      reject: (error: unknown) => {
        failure = { error };
        for (const entry of replies.values()) entry.reject(error);
      },
    });
    first.postMessage({ id, walkRoot: { root, dev: identity.dev, ino: identity.ino, claim } });
    return {
      top: slot(-1).promise,
      subtree: (index) => slot(index).promise,
      // Past the end: threads finish the subtree in hand and take no more; their late replies
      // find no waiter (the threads outlive this walk when the repository shares them).
      stop: () => {
        Atomics.store(new Int32Array(claim), 0, 0x3fffffff);
        this.pending.delete(id);
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}

/** One backup's use of the shared reader: `release()` once it is done with it (safe to call twice). */
export interface SmallFileReaderLease {
  readonly reader: SmallFileReader;
  release(): Promise<void>;
}

/**
 * The small-file reader threads of one repository, shared by its backups. Starting a pair of
 * threads costs ~120 ms of CPU, more than backing up a small volume; a node agent backing up many
 * small volumes started two per volume. The threads start with the first backup, stay up while
 * backups come (not holding the process open once idle: a CLI exits when its backup is done),
 * and stop after `idleMs` (THREADS_IDLE_MS) without one. A reader whose thread crashed is
 * replaced for the next backup and stopped when the last backup using it lets go.
 */
export class SmallFileReaderPool {
  private current: { reader: SmallFileReader; users: number } | undefined;
  private readonly idleStop: IdleStop;

  constructor(
    private readonly threads: number,
    idleMs: number = THREADS_IDLE_MS,
  ) {
    this.idleStop = new IdleStop(idleMs, () => {
      const entry = this.current;
      if (!entry || entry.users > 0) return;
      this.current = undefined;
      void entry.reader.close();
    });
  }

  acquire(): SmallFileReaderLease {
    this.idleStop.busy();
    if (this.current?.reader.broken) {
      // A thread died while no backup used it: nobody else will stop the reader's other threads.
      if (this.current.users === 0) void this.current.reader.close();
      this.current = undefined;
    }
    this.current ??= { reader: new SmallFileReader(this.threads), users: 0 };
    const entry = this.current;
    entry.users++;
    entry.reader.ref();
    let released = false;
    return {
      reader: entry.reader,
      release: async () => {
        if (released) return;
        released = true;
        if (--entry.users > 0) return;
        if (entry !== this.current || entry.reader.broken) {
          if (entry === this.current) this.current = undefined;
          await entry.reader.close();
          return;
        }
        entry.reader.unref();
        this.idleStop.idle();
      },
    };
  }

  /** Stops the threads now (the repository is closed); a backup still using them fails. */
  async close(): Promise<void> {
    this.idleStop.busy();
    const entry = this.current;
    this.current = undefined;
    await entry?.reader.close();
  }
}
