/**
 * Backup storage: a flat key space of '/'-separated keys, like an object store. Keys are
 * validated (STORAGE_BAD_KEY). Writes are atomic (a reader sees the old object or the new one,
 * never a part) and safe to repeat.
 *
 * `BackupStorage` is what backup code has used from the start; `ObjectStore` adds what an object
 * store offers beyond it (streaming reads, head, single deletes, paginated listing). Both backends
 * (FileSystemStorage, S3Storage) implement ObjectStore; code that needs only the older methods
 * keeps taking a BackupStorage.
 */
export interface PutOptions {
  /**
   * Default true: the object is on stable storage when the call returns. `false` keeps the write
   * atomic for readers (and across a crash of the writing process) but does not flush it: a crash
   * of the machine may lose the object or leave it empty or truncated, so the caller must validate
   * it before relying on it (staged items: finalize parses every item it packs, see
   * assembleTarball). Backends that are always durable (object stores) ignore it.
   */
  durable?: boolean;
  /**
   * The SHA-256 (lowercase hex) the caller expects the bytes to have (content-addressed objects:
   * packs, chunks). The put fails with STORAGE_CHECKSUM_MISMATCH, and nothing is written, when
   * the bytes differ.
   */
  sha256?: string;
  /**
   * Create only: fail with STORAGE_EXISTS, writing nothing, when the key already holds an object
   * (a repository's config: of two writers, exactly one wins). Atomic on a directory (link) and
   * on stores with conditional writes (AWS S3, MinIO: If-None-Match); a store that ignores
   * If-None-Match gets only the check before the write.
   */
  ifAbsent?: boolean;
}

export interface BackupStorage {
  /** Writes (or replaces) an object atomically. Writing the same bytes again is harmless. */
  putObject(key: string, data: Buffer | string, opts?: PutOptions): Promise<void>;
  /** Streams an object in (large tarballs); atomic like putObject: nothing is visible until it is complete. */
  putStream(key: string, body: AsyncIterable<Uint8Array>): Promise<void>;
  /**
   * The object's bytes, or undefined when there is none. A backend that records a checksum
   * (S3Storage) verifies it and throws STORAGE_CORRUPT_OBJECT for cut or changed bytes.
   */
  getObject(key: string): Promise<Buffer | undefined>;
  exists(key: string): Promise<boolean>;
  /** Every key starting with `prefix`, sorted by code unit ('' lists everything). */
  list(prefix: string): Promise<string[]>;
  /** Deletes every object whose key starts with `prefix`; returns how many. */
  deletePrefix(prefix: string): Promise<number>;
}

/** What `head` and `listPage` tell about one object. */
export interface ObjectInfo {
  key: string;
  size: number;
  /** SHA-256 (hex) recorded at put time, when the backend records one (S3Storage does; a directory does not). */
  sha256?: string;
}

export interface ListPageOptions {
  /** Keys strictly after this one (the `next` of the previous page). */
  after?: string;
  /** At most this many keys (default and cap 1,000, S3's page size). */
  limit?: number;
}

export interface ListPage {
  objects: ObjectInfo[];
  /** Pass as `after` for the next page; undefined on the last page. */
  next?: string;
}

export interface ObjectStore extends BackupStorage {
  /**
   * The object's bytes as a stream (memory bounded whatever its size), or undefined when there
   * is none. Checksums recorded at put time are verified as the stream ends: cut or changed bytes
   * make the stream fail with STORAGE_CORRUPT_OBJECT instead of ending normally.
   */
  getStream(key: string): Promise<AsyncIterable<Buffer> | undefined>;
  /**
   * Up to `length` bytes from `offset` (fewer at the end of the object, empty past it), or
   * undefined when there is no object. Not checked against the object's checksum (a part cannot
   * be): callers read parts of objects that authenticate themselves (the repository's sealed blobs).
   */
  getRange(key: string, offset: number, length: number): Promise<Buffer | undefined>;
  /** Size (and recorded checksum) of an object, or undefined when there is none. */
  head(key: string): Promise<ObjectInfo | undefined>;
  /** Deletes one object (one request: whether it existed is not asked). Deleting a missing key is not an error. */
  delete(key: string): Promise<void>;
  /** One page of the keys starting with `prefix`, sorted by code unit. */
  listPage(prefix: string, opts?: ListPageOptions): Promise<ListPage>;
  /**
   * Checks that the store can be used (bucket exists, credentials accepted, endpoint reachable)
   * and throws a StorageError with a one-line explanation when not. Called once at service start.
   */
  checkAccess(): Promise<void>;
  /** A short description for logs (`dir:/var/lib/stowage`, `s3://bucket/prefix`); never a secret. */
  readonly location: string;
}

/** S3's page size: a listing page never holds more keys than this. */
export const MAX_LIST_PAGE = 1000;
