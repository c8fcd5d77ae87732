import { type BackupStorage, writeGzipJson } from '@stowage/storage';

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

/** Writes `<restore>-results.gz` (Velero's shape: errors and warnings by namespace), the log and per-item results. */
export async function writeRestoreSidecars(
  storage: BackupStorage,
  restoreName: string,
  input: {
    record: unknown;
    results: { errors: RestoreResultSet; warnings: RestoreResultSet };
    logLines: readonly unknown[];
    items: unknown;
  },
): Promise<void> {
  const layout = restoreLayout(restoreName);
  await writeGzipJson(storage, layout.results, input.results);
  await writeGzipJson(storage, layout.logs, input.logLines);
  await writeGzipJson(storage, layout.items, input.items);
  await storage.putObject(layout.record, JSON.stringify(input.record));
}
