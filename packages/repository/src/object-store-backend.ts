import type { ObjectStore, StorageErrorCode } from '@stowage/storage';
import { ObjectExistsError, ObjectNotFoundError, type ObjectUpload, type RepoBackend } from './backend.js';

/**
 * @stowage/storage's code for a create-only put that found an object. Only types are imported
 * from that package: its index loads the AWS SDK (~0.2 CPU s), which a process using a directory
 * repository never needs; the type keeps this literal in step with the catalogue.
 */
const STORAGE_EXISTS: StorageErrorCode = 'STORAGE_EXISTS';

/**
 * A repository in an object store (@stowage/storage: a directory or an S3 bucket), under one
 * key prefix (`repository/` beside `backups/`, docs/architecture.md#storage-layout). What the repository needs maps onto
 * the store's atomic puts: a pack being written is collected in memory (at most its target
 * size, 16 MiB) and put whole on commit, so nothing partial is ever visible; a create-only
 * put (`exclusive`) is the store's `ifAbsent`. Ranged reads of packs are Range GETs.
 */
export class ObjectStoreBackend implements RepoBackend {
  readonly location: string;
  readonly billedPerRequest = true;

  constructor(
    readonly store: ObjectStore,
    /** The repository's prefix in the store, without a trailing '/'. */
    readonly root = 'repository',
  ) {
    this.location = `${store.location}/${root}`;
  }

  private key(key: string): string {
    return `${this.root}/${key}`;
  }

  async put(key: string, data: Uint8Array | readonly Uint8Array[], options: { readonly exclusive?: boolean } = {}): Promise<void> {
    const bytes = data instanceof Uint8Array ? toBuffer(data) : Buffer.concat(data as Uint8Array[]);
    try {
      await this.store.putObject(this.key(key), bytes, options.exclusive ? { ifAbsent: true } : {});
    } catch (cause) {
      if ((cause as { code?: unknown } | undefined)?.code === STORAGE_EXISTS) throw new ObjectExistsError(key, { cause });
      throw cause;
    }
  }

  upload(key: string): ObjectUpload {
    const parts: Buffer[] = [];
    let ended = false;
    const store = this.store;
    const full = this.key(key);
    return {
      async write(more) {
        if (ended) throw new Error(`upload of ${key} already ended`);
        // Copied: the caller may reuse its buffers once write() resolves, as it may with a file.
        for (const part of more) parts.push(Buffer.from(part));
      },
      async commit() {
        ended = true;
        const bytes = Buffer.concat(parts);
        parts.length = 0;
        await store.putObject(full, bytes);
      },
      async abort() {
        ended = true;
        parts.length = 0;
      },
    };
  }

  async get(key: string): Promise<Buffer> {
    const bytes = await this.store.getObject(this.key(key));
    if (bytes === undefined) throw new ObjectNotFoundError(key);
    return bytes;
  }

  async getRange(key: string, offset: number, length: number): Promise<Buffer> {
    const bytes = await this.store.getRange(this.key(key), offset, length);
    if (bytes === undefined) throw new ObjectNotFoundError(key);
    return bytes;
  }

  async list(prefix: string): Promise<string[]> {
    const cut = this.root.length + 1;
    return (await this.store.list(this.key(prefix))).map((key) => key.slice(cut));
  }

  async delete(key: string): Promise<void> {
    await this.store.delete(this.key(key));
  }

  async exists(key: string): Promise<boolean> {
    return this.store.exists(this.key(key));
  }
}

function toBuffer(part: Uint8Array): Buffer {
  return Buffer.isBuffer(part) ? part : Buffer.from(part.buffer, part.byteOffset, part.byteLength);
}
