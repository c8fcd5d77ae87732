import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { BackupStorage, ObjectStore } from './backup-storage.js';
import { StorageError, StorageErrorCode } from './errors.js';
import { backupLayout } from './layout.js';
import { readTar } from './tar-reader.js';

/** Inflated bytes per chunk: small, so a chunk's passed-over entries are garbage while still young. */
const GUNZIP_CHUNK_BYTES = 64 * 1024;

/** One item read back from a backup's tarball, with where its path says it belongs. */
export interface TarballItem {
  /** The entry's path: `resources/<gr>/namespaces/<ns>/<name>.json` or `resources/<gr>/cluster/<name>.json`. */
  path: string;
  /** `pods`, `deployments.apps`. */
  groupResource: string;
  /** null for a cluster-scoped item. */
  namespace: string | null;
  name: string;
  object: Record<string, unknown>;
}

const ITEM_PATH = /^resources\/([^/]+)\/(?:namespaces\/([^/]+)|cluster)\/([^/]+)\.json$/;

/** Where an item entry of the tarball is, from its path alone. */
export type TarballItemRef = Omit<TarballItem, 'object'>;

export interface ReadTarballOptions {
  /**
   * Called with each item entry before its bytes are read; false passes it over: its bytes are
   * skipped, never parsed, and it is not yielded (the caller accounts for it). Default: every item.
   */
  select?: (item: TarballItemRef) => boolean;
}

/**
 * Every item of a backup's tarball (`<name>.tar.gz`), streamed: the object is read as a stream
 * when the store offers one (ObjectStore.getStream), then gunzip → readTar (tar-reader.ts), one
 * chunk in memory at a time — never the whole archive (issue #45). Velero's `<version>-preferredversion/`
 * copies and `metadata/` entries are not items and are passed over, as are items `select`
 * declines; an item entry that does not parse as a JSON object throws STORAGE_CORRUPT_ITEM (a
 * restore must never skip an item silently). Throws STORAGE_IO when the backup has no tarball.
 * A stream cut or changed in storage fails when it ends (after items were yielded): callers keep
 * nothing of a read that throws.
 */
export async function* readBackupTarball(
  storage: BackupStorage | ObjectStore,
  backupName: string,
  opts: ReadTarballOptions = {},
): AsyncGenerator<TarballItem> {
  const body = await openBackupTarball(storage, backupName);
  yield* readTarballItems(body, `backup ${backupName}`, `backup ${backupName}'s tarball ${backupLayout(backupName).tarball}`, opts);
}

/** A backup's tarball's bytes, as a stream when the store offers one; STORAGE_IO when the backup has none. */
export async function openBackupTarball(
  storage: BackupStorage | ObjectStore,
  backupName: string,
): Promise<AsyncIterable<Uint8Array> | Iterable<Uint8Array>> {
  const key = backupLayout(backupName).tarball;
  const body = 'getStream' in storage ? await storage.getStream(key) : await storage.getObject(key).then((b) => b && [b]);
  if (!body) throw new StorageError(StorageErrorCode.io, `backup ${backupName} has no tarball at ${key}`);
  return body;
}

/**
 * The items of a tarball's bytes (`body`: the store's stream, or a pipe from the process that read
 * it), as readBackupTarball yields them; `label` starts each error message (`backup <name>`),
 * `archive` names the archive in a tar error.
 */
export async function* readTarballItems(
  body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  label: string,
  archive: string,
  opts: ReadTarballOptions = {},
): AsyncGenerator<TarballItem> {
  const source = Readable.from(body);
  const gunzip = createGunzip({ chunkSize: GUNZIP_CHUNK_BYTES });
  source.on('error', (err) => gunzip.destroy(err));
  source.pipe(gunzip);
  // The path is matched (and `select` asked) at the header: a passed-over item's body is skipped.
  const want = (path: string): boolean => {
    const match = ITEM_PATH.exec(path);
    if (!match) return false;
    return !opts.select || opts.select({ path, groupResource: match[1] as string, namespace: match[2] ?? null, name: match[3] as string });
  };
  try {
    for await (const file of readTar(gunzip, want, archive)) {
      const match = ITEM_PATH.exec(file.path) as RegExpExecArray;
      let object: unknown;
      try {
        object = JSON.parse(file.body.toString('utf8'));
      } catch (err) {
        throw new StorageError(StorageErrorCode.corruptItem, `${label}: ${file.path} is not JSON: ${(err as Error).message}`);
      }
      if (typeof object !== 'object' || object === null || Array.isArray(object)) {
        throw new StorageError(StorageErrorCode.corruptItem, `${label}: ${file.path} is not a JSON object`);
      }
      yield {
        path: file.path,
        groupResource: match[1] as string,
        namespace: match[2] ?? null,
        name: match[3] as string,
        object: object as Record<string, unknown>,
      };
    }
  } finally {
    // A consumer that stops early (or a throw) must not leave the store's stream open.
    source.destroy();
    gunzip.destroy();
  }
}
