/**
 * Backup storage: a flat key space of '/'-separated keys, like an object store, so an S3
 * backend can implement it later. Keys are validated (STORAGE_BAD_KEY). Writes are atomic
 * (a reader sees the old object or the new one, never a part) and safe to repeat.
 */
export interface BackupStorage {
  /** Writes (or replaces) an object atomically. Writing the same bytes again is harmless. */
  putObject(key: string, data: Buffer | string): Promise<void>;
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
