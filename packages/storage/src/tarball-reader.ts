import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-stream';
import type { BackupStorage, ObjectStore } from './backup-storage.js';
import { StorageError, StorageErrorCode } from './errors.js';
import { backupLayout } from './layout.js';

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
 * when the store offers one (ObjectStore.getStream), then gunzip → tar-stream, one entry in
 * memory at a time — never the whole archive (issue #45). Velero's `<version>-preferredversion/`
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
  const key = backupLayout(backupName).tarball;
  const body = 'getStream' in storage ? await storage.getStream(key) : await storage.getObject(key).then((b) => b && [b]);
  if (!body) throw new StorageError(StorageErrorCode.io, `backup ${backupName} has no tarball at ${key}`);
  const entries = extract();
  const source = Readable.from(body);
  source.on('error', (err) => entries.destroy(err));
  source
    .pipe(createGunzip())
    .on('error', (err) => entries.destroy(err))
    .pipe(entries);
  try {
    for await (const entry of entries) {
      const path = entry.header.name;
      const match = entry.header.type === 'file' ? ITEM_PATH.exec(path) : null;
      const ref: TarballItemRef | undefined = match
        ? { path, groupResource: match[1] as string, namespace: match[2] ?? null, name: match[3] as string }
        : undefined;
      if (!ref || (opts.select && !opts.select(ref))) {
        entry.resume();
        continue;
      }
      const chunks: Buffer[] = [];
      for await (const chunk of entry) chunks.push(chunk as Buffer);
      let object: unknown;
      try {
        object = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch (err) {
        throw new StorageError(StorageErrorCode.corruptItem, `backup ${backupName}: ${path} is not JSON: ${(err as Error).message}`);
      }
      if (typeof object !== 'object' || object === null || Array.isArray(object)) {
        throw new StorageError(StorageErrorCode.corruptItem, `backup ${backupName}: ${path} is not a JSON object`);
      }
      yield { ...ref, object: object as Record<string, unknown> };
    }
  } finally {
    // A consumer that stops early (or a throw) must not leave the store's stream open.
    source.destroy();
  }
}
