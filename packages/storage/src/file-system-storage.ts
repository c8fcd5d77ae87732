import { randomUUID } from 'node:crypto';
import {
  closeSync,
  createReadStream,
  createWriteStream,
  fstatSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { type FileHandle, link, mkdir, open, readFile, rename, rm, rmdir, stat, unlink } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  type ListPage,
  type ListPageOptions,
  MAX_LIST_PAGE,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
} from './backup-storage.js';
import { assertChecksum } from './checksum.js';
import { StorageError, StorageErrorCode, StorageUnavailableError } from './errors.js';
import { assertRange, assertValidKey, assertValidPrefix, TEMP_FILE_MARKER } from './keys.js';
import { countStorageRequest, countStorageRequests, listPagesFor } from './request-meter.js';

function isNotFound(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

function ioError(action: string, key: string, cause: unknown): StorageError {
  return new StorageError(StorageErrorCode.io, `${action} ${JSON.stringify(key)} failed: ${(cause as Error)?.message ?? cause}`, { cause });
}

/**
 * Backup storage in a directory: key `a/b/c` is file `<root>/a/b/c`. A write goes to a temp
 * file in the target's directory, is fsynced, then renamed over the target (atomic on POSIX),
 * and the directory is fsynced so the rename survives a crash. A `durable: false` put skips both
 * fsyncs (still atomic for readers and across a process crash; see PutOptions).
 *
 * Each call is counted as the requests S3 would answer for it (request-meter.ts): a put, a get,
 * a head, a list page per 1,000 keys, a delete (a batch per 1,000 keys for deletePrefix).
 */
export class FileSystemStorage implements ObjectStore {
  readonly rootDir: string;
  readonly location: string;

  constructor(rootDir: string) {
    this.rootDir = resolve(rootDir);
    this.location = `dir:${this.rootDir}`;
  }

  private pathOf(key: string): string {
    return join(this.rootDir, ...key.split('/'));
  }

  async putObject(key: string, data: Buffer | string, opts: PutOptions = {}): Promise<void> {
    assertValidKey(key);
    if (opts.sha256 !== undefined) assertChecksum(key, data, opts.sha256);
    countStorageRequest('put', typeof data === 'string' ? Buffer.byteLength(data) : data.length);
    const durable = opts.durable ?? true;
    if (opts.ifAbsent) {
      await this.createOnly(key, data, durable);
      return;
    }
    if ((typeof data === 'string' ? Buffer.byteLength(data) : data.length) <= SMALL_OBJECT_BYTES) {
      this.putSmallSync(key, data, durable);
      return;
    }
    await this.writeAtomically(
      key,
      async (tempPath) => {
        const handle = await openCreatingDirectory(tempPath);
        try {
          await handle.writeFile(data);
          if (durable) await handle.sync();
        } finally {
          await handle.close();
        }
      },
      durable,
    );
  }

  async putStream(key: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    assertValidKey(key);
    let bytes = 0;
    async function* counted(): AsyncGenerator<Uint8Array> {
      for await (const chunk of body) {
        bytes += chunk.length;
        yield chunk;
      }
    }
    try {
      await this.writeStream(key, counted());
    } finally {
      countStorageRequest('put', bytes);
    }
  }

  private async writeStream(key: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    await this.writeAtomically(key, async (tempPath) => {
      await mkdir(dirname(tempPath), { recursive: true });
      await pipeline(Readable.from(body), createWriteStream(tempPath, { flags: 'wx', mode: 0o644 }));
      const handle = await open(tempPath, 'r');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
    });
  }

  /** Writes a temp file, then link()s it to the key: link fails with EEXIST instead of replacing, so one writer wins. */
  private async createOnly(key: string, data: Buffer | string, durable: boolean): Promise<void> {
    const target = this.pathOf(key);
    const tempPath = join(dirname(target), `${TEMP_FILE_MARKER}${randomUUID()}`);
    try {
      const handle = await openCreatingDirectory(tempPath);
      try {
        await handle.writeFile(data);
        if (durable) await handle.sync();
      } finally {
        await handle.close();
      }
      await link(tempPath, target);
      if (durable) await syncDirectory(dirname(target));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
        throw new StorageError(
          StorageErrorCode.exists,
          `create-only put of ${JSON.stringify(key)} refused: the key already holds an object`,
        );
      }
      throw ioError('writing', key, err);
    } finally {
      await rm(tempPath, { force: true }).catch(() => {});
    }
  }

  /** `write` creates the temp file (and its directory when missing); then rename, and with `durable` a directory fsync. */
  private async writeAtomically(key: string, write: (tempPath: string) => Promise<void>, durable = true): Promise<void> {
    const target = this.pathOf(key);
    const dir = dirname(target);
    const tempPath = join(dir, `${TEMP_FILE_MARKER}${randomUUID()}`);
    try {
      await write(tempPath);
      await rename(tempPath, target);
      if (durable) await syncDirectory(dir);
    } catch (err) {
      await rm(tempPath, { force: true }).catch(() => {});
      if (err instanceof StorageError) throw err;
      throw ioError('writing', key, err);
    }
  }

  /**
   * A small put with synchronous calls (same steps: temp file, write, [fsync,] rename[, fsync of
   * the directory]). An asynchronous fs call costs a thread-pool round trip several times the call
   * itself on our VMs, and on a busy machine each round trip waits for a core. Without fsync these
   * calls only touch the page cache (staged item segments); a durable put adds two fsyncs (~0.5 ms
   * each on an idle disk): finalize's few sidecars, where nine sequential round trips per file
   * made up most of finalize (≈ 50 ms for the PVB sidecar alone in the fs-backup benchmark).
   */
  private putSmallSync(key: string, data: Buffer | string, durable: boolean): void {
    const target = this.pathOf(key);
    const dir = dirname(target);
    const tempPath = join(dir, `${TEMP_FILE_MARKER}${randomUUID()}`);
    try {
      let fd: number;
      try {
        fd = openSync(tempPath, 'wx', 0o644);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        mkdirSync(dir, { recursive: true });
        fd = openSync(tempPath, 'wx', 0o644);
      }
      try {
        const bytes = typeof data === 'string' ? Buffer.from(data) : data;
        let off = 0;
        while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
        if (durable) fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(tempPath, target);
      if (durable) syncDirectorySync(dir);
    } catch (err) {
      rmSync(tempPath, { force: true });
      throw ioError('writing', key, err);
    }
  }

  async getObject(key: string): Promise<Buffer | undefined> {
    assertValidKey(key);
    const bytes = await this.readObject(key);
    countStorageRequest('get', 0, bytes?.length ?? 0);
    return bytes;
  }

  private async readObject(key: string): Promise<Buffer | undefined> {
    try {
      // Small objects (staged items, sidecars) are read synchronously, for the reason given at
      // putSmallSync (finalize reads every staged item).
      const small = readSmallSync(this.pathOf(key));
      if (small !== undefined) return small === 'directory' ? undefined : small;
      return await readFile(this.pathOf(key));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      // A "key" that is a directory here is a prefix of other keys, not an object.
      if ((err as NodeJS.ErrnoException).code === 'EISDIR') return undefined;
      throw ioError('reading', key, err);
    }
  }

  async getStream(key: string): Promise<AsyncIterable<Buffer> | undefined> {
    assertValidKey(key);
    const handle = await open(this.pathOf(key), 'r').catch((err: NodeJS.ErrnoException) => {
      if (isNotFound(err) || err.code === 'EISDIR') return undefined;
      throw ioError('reading', key, err);
    });
    if (!handle) {
      countStorageRequest('get');
      return undefined;
    }
    const st = await handle.stat();
    countStorageRequest('get', 0, st.isFile() ? st.size : 0);
    if (!st.isFile()) {
      await handle.close();
      return undefined;
    }
    // The open handle keeps reading the bytes it opened even if a put renames a new file over it.
    return createReadStream('', { fd: handle, highWaterMark: 256 * 1024 });
  }

  async getRange(key: string, offset: number, length: number): Promise<Buffer | undefined> {
    assertValidKey(key);
    assertRange(key, offset, length);
    let handle: FileHandle;
    let filled = 0;
    try {
      handle = await open(this.pathOf(key), 'r');
    } catch (err) {
      countStorageRequest('get');
      if (isNotFound(err) || (err as NodeJS.ErrnoException).code === 'EISDIR') return undefined;
      throw ioError('reading', key, err);
    }
    try {
      const out = Buffer.allocUnsafe(length);
      while (filled < length) {
        const { bytesRead } = await handle.read(out, filled, length - filled, offset + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return out.subarray(0, filled);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EISDIR') return undefined;
      throw ioError('reading', key, err);
    } finally {
      countStorageRequest('get', 0, filled);
      await handle.close();
    }
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    assertValidKey(key);
    countStorageRequest('head');
    return this.stat(key);
  }

  private async stat(key: string): Promise<ObjectInfo | undefined> {
    try {
      const st = await stat(this.pathOf(key));
      return st.isFile() ? { key, size: st.size } : undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw ioError('checking', key, err);
    }
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key);
    countStorageRequest('delete');
    try {
      await unlink(this.pathOf(key));
    } catch (err) {
      if (isNotFound(err) || (err as NodeJS.ErrnoException).code === 'EISDIR' || (err as NodeJS.ErrnoException).code === 'EPERM') return;
      throw ioError('deleting', key, err);
    }
    await this.pruneEmptyDirectories(new Set([dirname(this.pathOf(key))]));
  }

  async listPage(prefix: string, opts: ListPageOptions = {}): Promise<ListPage> {
    const limit = Math.min(Math.max(1, opts.limit ?? MAX_LIST_PAGE), MAX_LIST_PAGE);
    countStorageRequest('list');
    const keys = await this.listKeys(prefix);
    const after = opts.after;
    const start = after === undefined ? 0 : keys.findIndex((key) => key > after);
    const page = start < 0 ? [] : keys.slice(start, start + limit);
    const objects: ObjectInfo[] = [];
    for (const key of page) {
      const info = await this.stat(key);
      if (info) objects.push(info); // deleted meanwhile: not listed
    }
    const more = start >= 0 && start + limit < keys.length;
    return { objects, next: more ? page[page.length - 1] : undefined };
  }

  /** The root must be a writable directory (created when missing, as the first put would). */
  async checkAccess(): Promise<void> {
    countStorageRequest('head');
    countStorageRequest('put');
    countStorageRequest('delete');
    try {
      await mkdir(this.rootDir, { recursive: true });
      const probe = join(this.rootDir, `${TEMP_FILE_MARKER}probe-${randomUUID()}`);
      const handle = await open(probe, 'wx', 0o600);
      await handle.close();
      await unlink(probe);
    } catch (err) {
      throw new StorageUnavailableError(
        'directory',
        `the storage directory ${this.rootDir} is not a writable directory: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
        { cause: err },
      );
    }
  }

  async exists(key: string): Promise<boolean> {
    assertValidKey(key);
    countStorageRequest('head');
    try {
      return (await stat(this.pathOf(key))).isFile();
    } catch (err) {
      if (isNotFound(err)) return false;
      throw ioError('checking', key, err);
    }
  }

  async list(prefix: string): Promise<string[]> {
    const keys = await this.listKeys(prefix);
    countStorageRequests('list', listPagesFor(keys.length));
    return keys;
  }

  private async listKeys(prefix: string): Promise<string[]> {
    assertValidPrefix(prefix);
    // Walk only the deepest directory the prefix fully names.
    const cut = prefix.lastIndexOf('/');
    const baseKey = cut >= 0 ? prefix.slice(0, cut) : '';
    const keys: string[] = [];
    await this.walk(baseKey, keys);
    return keys.filter((key) => key.startsWith(prefix)).sort();
  }

  private async walk(dirKey: string, out: string[]): Promise<void> {
    const dirPath = dirKey === '' ? this.rootDir : this.pathOf(dirKey);
    let entries: import('node:fs').Dirent[];
    try {
      // Synchronous, as small reads are (getObject): a directory listing is one quick syscall.
      entries = readdirSync(dirPath, { withFileTypes: true });
    } catch (err) {
      if (isNotFound(err)) return;
      throw ioError('listing', dirKey, err);
    }
    for (const entry of entries) {
      if (entry.name.startsWith(TEMP_FILE_MARKER)) continue;
      const key = dirKey === '' ? entry.name : `${dirKey}/${entry.name}`;
      if (entry.isDirectory()) await this.walk(key, out);
      else if (entry.isFile()) out.push(key);
    }
  }

  async deletePrefix(prefix: string): Promise<number> {
    const keys = await this.list(prefix);
    countStorageRequests('delete', Math.ceil(keys.length / MAX_LIST_PAGE));
    for (const key of keys) {
      try {
        await unlink(this.pathOf(key));
      } catch (err) {
        if (!isNotFound(err)) throw ioError('deleting', key, err);
      }
    }
    await this.pruneEmptyDirectories(new Set(keys.map((key) => dirname(this.pathOf(key)))));
    return keys.length;
  }

  /** Removes directories left empty by a delete, walking up to (not including) the root. */
  private async pruneEmptyDirectories(dirs: Set<string>): Promise<void> {
    const ordered = [...dirs].sort((a, b) => b.length - a.length);
    for (let dir of ordered) {
      while (dir.startsWith(this.rootDir + sep)) {
        try {
          await rmdir(dir);
        } catch {
          break; // not empty (or gone): stop climbing
        }
        dir = dirname(dir);
      }
    }
  }
}

/** Objects up to this size take the synchronous paths (putSmallSync for non-durable puts, readSmallSync). */
const SMALL_OBJECT_BYTES = 256 * 1024;

/** The file's bytes when it is small, 'directory' for a directory, undefined when it is large. Throws ENOENT like readFile. */
function readSmallSync(path: string): Buffer | 'directory' | undefined {
  const fd = openSync(path, 'r');
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) return 'directory';
    if (st.size > SMALL_OBJECT_BYTES) return undefined;
    const out = Buffer.allocUnsafe(st.size);
    let off = 0;
    while (off < st.size) {
      const n = readSync(fd, out, off, st.size - off, off);
      if (n === 0) break; // shrank meanwhile (a concurrent replace renames, so this is rare)
      off += n;
    }
    return off === st.size ? out : out.subarray(0, off);
  } finally {
    closeSync(fd);
  }
}

/**
 * Opens a new file for writing; creates its directory only when the open says it is missing (a
 * `mkdir -p` before every write cost more than the write itself for small items).
 */
async function openCreatingDirectory(path: string): Promise<FileHandle> {
  try {
    return await open(path, 'wx', 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await mkdir(dirname(path), { recursive: true });
  return await open(path, 'wx', 0o644);
}

function syncDirectorySync(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
