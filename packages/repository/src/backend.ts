import { close, fdatasync, open, read, write, writev } from 'node:fs';
import { link, mkdir, readdir, readFile, rename, stat, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { countStorageRequest, countStorageRequests, listPagesFor } from '@stowage/storage/request-meter';
import { errnoCode } from './errors.js';
import { writeFileAtomic } from './fs-util.js';
import { randomId } from './layout.js';

/**
 * Where a repository's objects live. Every read and write of packs, loose chunks, indexes,
 * snapshots and the config goes through this, so an object store (S3) can replace the
 * directory. Keys are `/`-separated (`packs/ab/<id>`, `index/<id>`, `config.json`).
 *
 * The one guarantee the repository builds on: an object is visible (to get, list, exists) only
 * once it is complete — and, when the backend is durable, on disk.
 */
export interface RepoBackend {
  /** For messages: a path or URL. */
  readonly location: string;
  /** Stores a whole object atomically. `exclusive`: fail with ObjectExistsError if the key exists. */
  put(key: string, data: Uint8Array | readonly Uint8Array[], options?: { readonly exclusive?: boolean }): Promise<void>;
  /** Starts an object written in appended parts (a pack); nothing is visible before `commit` resolves. */
  upload(key: string): ObjectUpload;
  /** The whole object; ObjectNotFoundError if absent. */
  get(key: string): Promise<Buffer>;
  /** Up to `length` bytes from `offset` (fewer if the object is shorter); ObjectNotFoundError if absent. */
  getRange(key: string, offset: number, length: number): Promise<Buffer>;
  /** Optional: getRange into the caller's memory (`target.length` bytes from `offset`); resolves to the bytes read (fewer at the end). */
  getRangeInto?(key: string, offset: number, target: Uint8Array): Promise<number>;
  /** Every key starting with `prefix` (a folder-like prefix ending in `/`), in no particular order. */
  list(prefix: string): Promise<string[]>;
  /** Removes an object; absent is fine. */
  delete(key: string): Promise<void>;
  exists(key: string): Promise<boolean>;
  /**
   * True for object storage, which bills by request: a restore then reads a pack's needed chunks
   * in a few large ranged reads rather than one per chunk (ChunkReader.expect).
   */
  readonly billedPerRequest?: boolean;
}

export interface ObjectUpload {
  /** Appends parts in call order. */
  write(parts: readonly Uint8Array[]): Promise<void>;
  /** Makes the object visible under its key, complete. */
  commit(): Promise<void>;
  /** Drops what was written; the key never appears. */
  abort(): Promise<void>;
}

export class ObjectNotFoundError extends Error {
  override readonly name = 'ObjectNotFoundError';
  constructor(
    readonly key: string,
    options?: { cause?: unknown },
  ) {
    super(`no object ${key}`, options);
  }
}

export class ObjectExistsError extends Error {
  override readonly name = 'ObjectExistsError';
  constructor(
    readonly key: string,
    options?: { cause?: unknown },
  ) {
    super(`object ${key} already exists`, options);
  }
}

// Plain fds and the callback API: about half the CPU of FileHandle per call (measured in backup).
const openFd = promisify(open);
const closeFd = promisify(close);
const datasyncFd = promisify(fdatasync);
const writevFd = promisify(writev);
const writeFd = promisify(write);
function readFd(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): Promise<number> {
  return new Promise((resolve, reject) =>
    read(fd, buffer, offset, length, position, (error, bytesRead) => (error ? reject(error) : resolve(bytesRead))),
  );
}

/** Open read handles kept for range reads (packs are immutable once visible). */
const OPEN_READ_HANDLES = 16;
/** Cached read handles are closed after this long without use. */
const READ_HANDLE_IDLE_MS = 2000;

/**
 * A repository in a local (or mounted) directory. Objects are written under `tmp/` and renamed
 * into place (after fdatasync when `durable`), so a crash never leaves a partial object under
 * its key. Parent directories are created on first use. Each call is counted as the request an
 * object store would answer for it (@stowage/storage's request meter), so a repository's cost
 * reads the same in a directory as in a bucket.
 */
export class DirectoryBackend implements RepoBackend {
  private readonly readHandles = new Map<string, ReadHandle>();
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly dir: string,
    readonly durable: boolean,
  ) {}

  /** Creates the folders a repository uses up front, so writers rarely need to mkdir and an empty repository is inspectable. */
  async createLayout(): Promise<void> {
    const fanOut = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
    for (const sub of ['tmp', 'index', 'snapshots', ...fanOut.map((ab) => `packs/${ab}`)]) {
      await mkdir(join(this.dir, sub), { recursive: true });
    }
  }

  get location(): string {
    return this.dir;
  }

  private path(key: string): string {
    return join(this.dir, key);
  }

  private tmpPath(): string {
    return join(this.dir, 'tmp', `${randomId()}.tmp`);
  }

  async put(key: string, data: Uint8Array | readonly Uint8Array[], options: { readonly exclusive?: boolean } = {}): Promise<void> {
    const bytes = data instanceof Uint8Array ? data : Buffer.concat(data as Uint8Array[]);
    const final = this.path(key);
    countStorageRequest('put', bytes.length);
    if (options.exclusive) {
      // link() fails if the key exists, so two writers never overwrite each other.
      const tmp = await this.withParents(() => this.writeTmp(bytes));
      try {
        await this.withParents(() => link(tmp, final), final);
      } catch (cause) {
        if (errnoCode(cause) === 'EEXIST') throw new ObjectExistsError(key, { cause });
        throw cause;
      } finally {
        await unlink(tmp).catch(() => {});
      }
      return;
    }
    await this.withParents(() => writeFileAtomic(this.tmpPath(), final, bytes, this.durable), final);
  }

  private async writeTmp(bytes: Uint8Array): Promise<string> {
    const tmp = this.tmpPath();
    const fd = await openFd(tmp, 'wx', 0o600);
    try {
      for (let off = 0; off < bytes.length; ) off += (await writeFd(fd, bytes, off, bytes.length - off, off)).bytesWritten;
      if (this.durable) await datasyncFd(fd);
    } finally {
      await closeFd(fd);
    }
    return tmp;
  }

  /** Runs `op`; on ENOENT creates `tmp/` and the parent of `finalPath`, then runs it once more. */
  private async withParents<T>(op: () => Promise<T>, finalPath?: string): Promise<T> {
    try {
      return await op();
    } catch (error) {
      if (errnoCode(error) !== 'ENOENT') throw error;
      await mkdir(join(this.dir, 'tmp'), { recursive: true });
      if (finalPath) await mkdir(dirname(finalPath), { recursive: true });
      return op();
    }
  }

  upload(key: string): ObjectUpload {
    const tmp = this.tmpPath();
    const final = this.path(key);
    const fd = this.withParents(() => openFd(tmp, 'wx', 0o600));
    fd.catch(() => {});
    let position = 0;
    let tail: Promise<void> = fd.then(() => {});
    let ended = false;
    const durable = this.durable;
    const withParents = this.withParents.bind(this);
    return {
      write(parts) {
        if (ended) return Promise.reject(new Error(`upload of ${key} already ended`));
        const at = position;
        for (const part of parts) position += part.length;
        // Writes go to fixed offsets, so they need no ordering among themselves.
        const written = fd.then((handle) => writeAllAt(handle, parts, at));
        tail = Promise.all([tail, written]).then(() => {});
        tail.catch(() => {});
        return written;
      },
      async commit() {
        ended = true;
        countStorageRequest('put', position);
        const handle = await fd;
        try {
          await tail;
          if (durable) await datasyncFd(handle);
        } catch (error) {
          // A failed write or sync: the object never appears, and no temp file is left behind.
          await closeFd(handle).catch(() => {});
          await unlink(tmp).catch(() => {});
          throw error;
        }
        await closeFd(handle);
        try {
          await withParents(() => rename(tmp, final), final);
        } catch (error) {
          await unlink(tmp).catch(() => {});
          throw error;
        }
      },
      async abort() {
        ended = true;
        await tail.catch(() => {});
        const handle = await fd.catch(() => undefined);
        if (handle !== undefined) await closeFd(handle).catch(() => {});
        await unlink(tmp).catch(() => {});
      },
    };
  }

  async get(key: string): Promise<Buffer> {
    try {
      const bytes = await readFile(this.path(key));
      countStorageRequest('get', 0, bytes.length);
      return bytes;
    } catch (cause) {
      countStorageRequest('get');
      if (errnoCode(cause) === 'ENOENT') throw new ObjectNotFoundError(key, { cause });
      throw cause;
    }
  }

  async getRange(key: string, offset: number, length: number): Promise<Buffer> {
    const buffer = Buffer.allocUnsafe(length);
    const filled = await this.getRangeInto(key, offset, buffer);
    return filled < length ? buffer.subarray(0, filled) : buffer;
  }

  async getRangeInto(key: string, offset: number, target: Uint8Array): Promise<number> {
    let handle = this.readHandles.get(key);
    if (!handle) {
      if (this.readHandles.size >= OPEN_READ_HANDLES) this.evictOldest();
      handle = { fd: openFd(this.path(key), 'r'), users: 0, evicted: false };
      handle.fd.catch(() => {});
      this.readHandles.set(key, handle);
    }
    this.armIdleClose();
    handle.users++;
    try {
      let fd: number;
      try {
        fd = await handle.fd;
      } catch (cause) {
        countStorageRequest('get');
        if (this.readHandles.get(key) === handle) this.readHandles.delete(key);
        if (errnoCode(cause) === 'ENOENT') throw new ObjectNotFoundError(key, { cause });
        throw cause;
      }
      const length = target.length;
      let filled = 0;
      while (filled < length) {
        const n = await readFd(fd, target, filled, length - filled, offset + filled);
        if (n === 0) break;
        filled += n;
      }
      countStorageRequest('get', 0, filled);
      return filled;
    } finally {
      handle.users--;
      if (handle.evicted && handle.users === 0) closeHandle(handle);
    }
  }

  /** Drops the least recently opened handle; it is closed once no read uses it any more. */
  private evictOldest(): void {
    const first = this.readHandles.entries().next().value;
    if (!first) return;
    this.readHandles.delete(first[0]);
    first[1].evicted = true;
    if (first[1].users === 0) closeHandle(first[1]);
  }

  private armIdleClose(): void {
    if (this.idleTimer) this.idleTimer.refresh();
    else {
      this.idleTimer = setTimeout(() => {
        this.idleTimer = undefined;
        while (this.readHandles.size > 0) this.evictOldest();
      }, READ_HANDLE_IDLE_MS);
      this.idleTimer.unref();
    }
  }

  async list(prefix: string): Promise<string[]> {
    const base = this.path(prefix);
    let names: string[];
    try {
      names = (await readdir(base, { recursive: true, withFileTypes: true }))
        .filter((d) => d.isFile())
        .map((d) =>
          join(d.parentPath ?? d.path, d.name)
            .slice(base.length)
            .replace(/^\//, ''),
        );
    } catch (error) {
      countStorageRequest('list');
      if (errnoCode(error) === 'ENOENT') return [];
      throw error;
    }
    countStorageRequests('list', listPagesFor(names.length));
    return names.map((name) => `${prefix}${name}`);
  }

  async delete(key: string): Promise<void> {
    countStorageRequest('delete');
    await unlink(this.path(key)).catch((error: unknown) => {
      if (errnoCode(error) !== 'ENOENT') throw error;
    });
  }

  async exists(key: string): Promise<boolean> {
    countStorageRequest('head');
    try {
      await stat(this.path(key));
      return true;
    } catch (error) {
      if (errnoCode(error) === 'ENOENT') return false;
      throw error;
    }
  }
}

interface ReadHandle {
  readonly fd: Promise<number>;
  /** Reads using the fd right now: it is closed only when evicted and unused. */
  users: number;
  evicted: boolean;
}

function closeHandle(handle: ReadHandle): void {
  handle.fd.then((fd) => close(fd, () => {})).catch(() => {});
}

async function writeAllAt(fd: number, parts: readonly Uint8Array[], position: number): Promise<void> {
  const total = parts.reduce((sum, p) => sum + p.length, 0);
  const { bytesWritten } = await writevFd(fd, parts as NodeJS.ArrayBufferView[], position);
  if (bytesWritten < total) {
    // Short writes are rare on regular files; finish the rest plainly.
    const rest = Buffer.concat(parts as Uint8Array[]).subarray(bytesWritten);
    for (let off = bytesWritten; off < total; ) {
      const n = (await writeFd(fd, rest, off - bytesWritten, total - off, position + off)).bytesWritten;
      off += n;
    }
  }
}
