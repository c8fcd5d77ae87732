import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-stream';
import type { BackupStorage } from './backup-storage.js';
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

/**
 * Every item of a backup's tarball (`<name>.tar.gz`), streamed: gunzip → tar-stream, one entry in
 * memory at a time. Velero's `<version>-preferredversion/` copies and `metadata/` entries are not
 * items and are passed over; an item entry that does not parse as a JSON object throws
 * STORAGE_CORRUPT_ITEM (a restore must never skip an item silently). Throws STORAGE_IO when the
 * backup has no tarball.
 */
export async function* readBackupTarball(storage: BackupStorage, backupName: string): AsyncGenerator<TarballItem> {
  const key = backupLayout(backupName).tarball;
  const bytes = await storage.getObject(key);
  if (!bytes) throw new StorageError(StorageErrorCode.io, `backup ${backupName} has no tarball at ${key}`);
  const entries = extract();
  Readable.from([bytes])
    .pipe(createGunzip())
    .on('error', (err) => entries.destroy(err))
    .pipe(entries);
  for await (const entry of entries) {
    const path = entry.header.name;
    const match = entry.header.type === 'file' ? ITEM_PATH.exec(path) : null;
    if (!match) {
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
    yield {
      path,
      groupResource: match[1] as string,
      namespace: match[2] ?? null,
      name: match[3] as string,
      object: object as Record<string, unknown>,
    };
  }
}
