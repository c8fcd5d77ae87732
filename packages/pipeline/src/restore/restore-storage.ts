import { type BackupStorage, readGzipJson, writeGzipJson } from '@stowage/storage';
import type { HookRunRecord, LogLine } from '../state/run-state.js';
import type { RestoreTierPlan } from './restore-plan-types.js';
import type { ItemResult, PvrStateRecord, RestoreRecord } from './restore-state.js';

/** Where a finished restore lives in backup storage (Velero keeps restores beside backups). */
export function restoreLayout(restoreName: string): { dir: string; record: string; results: string; logs: string; items: string } {
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(restoreName))
    throw new Error(`restore name ${JSON.stringify(restoreName)} cannot be a storage path segment`);
  const dir = `restores/${restoreName}/`;
  return {
    dir,
    record: `${dir}restore.json`,
    results: `${dir}${restoreName}-results.gz`,
    logs: `${dir}${restoreName}-logs.gz`,
    items: `${dir}${restoreName}-items.json.gz`,
  };
}

export interface RestoreResultSet {
  /** Messages about Stowage itself / the run. */
  velero: string[];
  cluster: string[];
  namespaces: Record<string, string[]>;
}

/** Version of `restore.json`; a reader refuses a version it does not know. */
export const RESTORE_ARCHIVE_FORMAT_VERSION = 1;

/**
 * `restore.json`: everything a finished restore's view shows but its item results and log (their
 * own sidecars), so the API can answer for it when Redis no longer holds it.
 */
export interface RestoreArchive {
  formatVersion: typeof RESTORE_ARCHIVE_FORMAT_VERSION;
  record: RestoreRecord;
  counters: Record<string, number>;
  tiers: RestoreTierPlan[];
  pvrs: PvrStateRecord[];
  hookRuns: HookRunRecord[];
}

/** Writes `<restore>-results.gz` (Velero's shape: errors and warnings by namespace), the log, per-item results and `restore.json` last. */
export async function writeRestoreSidecars(
  storage: BackupStorage,
  restoreName: string,
  input: {
    record: RestoreArchive;
    results: { errors: RestoreResultSet; warnings: RestoreResultSet };
    logLines: readonly LogLine[];
    items: Record<string, ItemResult>;
  },
): Promise<void> {
  const layout = restoreLayout(restoreName);
  await writeGzipJson(storage, layout.results, input.results);
  await writeGzipJson(storage, layout.logs, input.logLines);
  await writeGzipJson(storage, layout.items, input.items);
  await storage.putObject(layout.record, JSON.stringify(input.record));
}

/** A finished restore's `restore.json` from storage, or undefined when storage has none. */
export async function readRestoreArchive(
  storage: Pick<BackupStorage, 'getObject'>,
  restoreName: string,
): Promise<RestoreArchive | undefined> {
  const raw = await storage.getObject(restoreLayout(restoreName).record);
  if (!raw) return undefined;
  const doc = JSON.parse(raw.toString('utf8')) as Partial<RestoreArchive>;
  if (doc.formatVersion !== RESTORE_ARCHIVE_FORMAT_VERSION) {
    throw new Error(
      `${restoreLayout(restoreName).record} has format version ${String(doc.formatVersion)}; this Stowage reads ${RESTORE_ARCHIVE_FORMAT_VERSION}`,
    );
  }
  return doc as RestoreArchive;
}

/** A finished restore's per-item results from storage (empty when the sidecar is missing). */
export async function readRestoreArchiveItems(
  storage: Pick<BackupStorage, 'getObject'>,
  restoreName: string,
): Promise<Record<string, ItemResult>> {
  return ((await readGzipJson(storage, restoreLayout(restoreName).items)) ?? {}) as Record<string, ItemResult>;
}

/** A finished restore's log lines from storage (empty when the sidecar is missing). */
export async function readRestoreArchiveLogs(storage: Pick<BackupStorage, 'getObject'>, restoreName: string): Promise<LogLine[]> {
  return ((await readGzipJson(storage, restoreLayout(restoreName).logs)) ?? []) as LogLine[];
}
