/**
 * Backup storage: a flat key space of '/'-separated keys, like an object store, so an S3
 * backend can implement it later. Keys are validated (STORAGE_BAD_KEY). Writes are atomic
 * (a reader sees the old object or the new one, never a part) and safe to repeat.
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
}

export interface BackupStorage {
  /** Writes (or replaces) an object atomically. Writing the same bytes again is harmless. */
  putObject(key: string, data: Buffer | string, opts?: PutOptions): Promise<void>;
  /** Streams an object in (large tarballs); atomic like putObject: nothing is visible until it is complete. */
  putStream(key: string, body: AsyncIterable<Uint8Array>): Promise<void>;
  /** The object's bytes, or undefined when there is none. */
  getObject(key: string): Promise<Buffer | undefined>;
  exists(key: string): Promise<boolean>;
  /** Every key starting with `prefix`, sorted by code unit ('' lists everything). */
  list(prefix: string): Promise<string[]>;
  /** Deletes every object whose key starts with `prefix`; returns how many. */
  deletePrefix(prefix: string): Promise<number>;
}
