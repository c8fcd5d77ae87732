import { promisify } from 'node:util';
import { gunzip as gunzipCallback, gzip as gzipCallback, gzipSync } from 'node:zlib';
import type { BackupStorage } from './backup-storage.js';
import { StorageError, StorageErrorCode } from './errors.js';
import { backupLayout } from './layout.js';

const gzip = promisify(gzipCallback);
const gunzip = promisify(gunzipCallback);

/** Up to this size a sidecar is gzip'd on the event loop (see gzipSidecar). */
const SYNC_GZIP_BYTES = 1024 * 1024;

/**
 * A sidecar of a few hundred KiB deflates in a millisecond or two: on the event loop that costs
 * less than the thread-pool round trip, which waits for a core when the machine is busy.
 */
async function gzipSidecar(bytes: Buffer): Promise<Buffer> {
  return bytes.length <= SYNC_GZIP_BYTES ? gzipSync(bytes) : await gzip(bytes);
}

/** Writes `value` as gzip'd JSON (the `*.json.gz` sidecars). */
export async function writeGzipJson(storage: BackupStorage, key: string, value: unknown): Promise<void> {
  await storage.putObject(key, await gzipSidecar(Buffer.from(JSON.stringify(value))));
}

/** Reads a gzip'd JSON object written by writeGzipJson; undefined when it does not exist. */
export async function readGzipJson(storage: Pick<BackupStorage, 'getObject'>, key: string): Promise<unknown> {
  const bytes = await storage.getObject(key);
  if (!bytes) return undefined;
  try {
    return JSON.parse((await gunzip(bytes)).toString('utf8'));
  } catch (cause) {
    throw new StorageError(StorageErrorCode.corruptItem, `${key} is not gzip'd JSON`, { cause });
  }
}

/** `backups/<name>/velero-backup.json`: the Backup object as plain JSON. */
export async function writeBackupMetadata(storage: BackupStorage, backupName: string, backup: unknown): Promise<string> {
  const key = backupLayout(backupName).metadata;
  await storage.putObject(key, JSON.stringify(backup));
  return key;
}

/** `backups/<name>/<name>-podvolumebackups.json.gz`: JSON array of the PVB objects. */
export async function writePodVolumeBackupsSidecar(storage: BackupStorage, backupName: string, pvbs: readonly unknown[]): Promise<string> {
  const key = backupLayout(backupName).podVolumeBackups;
  await writeGzipJson(storage, key, pvbs);
  return key;
}

/** `backups/<name>/<name>-resource-list.json.gz`: `"<apiVersion>/<Kind>"` → sorted `ns/name` list (see assembleTarball). */
export async function writeResourceListSidecar(
  storage: BackupStorage,
  backupName: string,
  resourceList: Record<string, string[]>,
): Promise<string> {
  const key = backupLayout(backupName).resourceList;
  await writeGzipJson(storage, key, resourceList);
  return key;
}

/** Velero's result set: messages for Velero itself, for cluster-scoped items, and per namespace. */
export interface ResultSet {
  velero?: string[];
  cluster?: string[];
  namespaces?: Record<string, string[]>;
}

export interface BackupResults {
  errors: ResultSet;
  warnings: ResultSet;
}

/** `backups/<name>/<name>-results.gz`: `{"errors": …, "warnings": …}`. */
export async function writeResultsSidecar(storage: BackupStorage, backupName: string, results: BackupResults): Promise<string> {
  const key = backupLayout(backupName).results;
  await writeGzipJson(storage, key, results);
  return key;
}

/** `backups/<name>/<name>-logs.gz`: the backup's log lines (JSON lines), gzip'd. */
export async function writeLogsSidecar(storage: BackupStorage, backupName: string, lines: readonly string[]): Promise<string> {
  const key = backupLayout(backupName).logs;
  const text = lines.length === 0 ? '' : `${lines.join('\n')}\n`;
  await storage.putObject(key, await gzipSidecar(Buffer.from(text)));
  return key;
}

/** The lines of `backups/<name>/<name>-logs.gz` (each a JSON log line); undefined when it does not exist. */
export async function readLogsSidecar(storage: Pick<BackupStorage, 'getObject'>, backupName: string): Promise<string[] | undefined> {
  const key = backupLayout(backupName).logs;
  const bytes = await storage.getObject(key);
  if (!bytes) return undefined;
  let text: string;
  try {
    text = (await gunzip(bytes)).toString('utf8');
  } catch (cause) {
    throw new StorageError(StorageErrorCode.corruptItem, `${key} is not gzip'd text`, { cause });
  }
  return text === '' ? [] : text.replace(/\n$/, '').split('\n');
}
