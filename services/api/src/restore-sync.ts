import { ENDED_RESTORE_PHASES, type RestoreState, readRestoreArchive, restoreLayout } from '@stowage/pipeline';
import type { BackupStorage } from '@stowage/storage';
import type { Logger } from 'pino';

/*
 * Restore sync, beside backup sync and in the same passes: the restore catalogue in Redis follows
 * the finished restores in storage (`restores/<name>/restore.json`, written last by finalize). One
 * in storage that Redis does not know is added (a fresh install, or its state dropped); a catalogued
 * archived restore whose restore.json is gone is removed. Running restores are never touched.
 */

export interface RestoreSyncResult {
  added: string[];
  removed: string[];
  skipped: Array<{ name: string; reason: string }>;
}

const RESTORES_ROOT = 'restores/';
const ENDED: ReadonlySet<string> = new Set(ENDED_RESTORE_PHASES);

export async function syncRestoreCatalogue(opts: {
  restores: RestoreState;
  storage: Pick<BackupStorage, 'list' | 'getObject' | 'exists'>;
  logger: Pick<Logger, 'info' | 'warn'>;
  now?: () => number;
}): Promise<RestoreSyncResult> {
  const { restores, storage, logger } = opts;
  const now = opts.now ?? Date.now;
  const result: RestoreSyncResult = { added: [], removed: [], skipped: [] };

  // Storage first, then Redis: a restore created in between has a record before its first object.
  const finished = new Set<string>();
  for (const key of await storage.list(RESTORES_ROOT)) {
    const [name, file, ...rest] = key.slice(RESTORES_ROOT.length).split('/');
    if (name && file === 'restore.json' && rest.length === 0) finished.add(name);
  }
  const known = new Set(await restores.allRunNames());

  for (const name of finished) {
    if (known.has(name)) continue;
    try {
      const archive = await readRestoreArchive(storage, name);
      if (!archive) continue; // deleted since the listing
      const { record } = archive;
      if (record.name !== name) throw new Error(`${restoreLayout(name).record} names restore "${record.name}", not "${name}"`);
      if (!ENDED.has(record.phase)) throw new Error(`${restoreLayout(name).record} has phase ${record.phase}, not an ended one`);
      const { added, known: other } = await restores.catalogueRestore({ ...record, archivedAt: now() }, archive.counters);
      if (other) throw new Error('Redis holds a record of that name that is not in the catalogue (a stray write after its data was lost?)');
      if (!added) continue;
      result.added.push(name);
      logger.info({ restore: name, phase: record.phase }, 'restore sync: added a finished restore found in storage');
    } catch (err) {
      const reason = (err as Error).message;
      result.skipped.push({ name, reason });
      logger.warn({ restore: name, err: reason }, 'restore sync: could not catalogue a restore found in storage');
    }
  }

  for (const name of known) {
    if (finished.has(name)) continue;
    const rec = await restores.getRestore(name);
    // Only entries that stand for storage follow it; a running (or not yet archived) restore never.
    if (rec?.archivedAt === undefined) continue;
    // Re-checked now: the listing may predate the restore's final write.
    if (await storage.exists(restoreLayout(name).record)) continue;
    await restores.deleteRestore(name);
    result.removed.push(name);
    logger.info({ restore: name }, 'restore sync: removed a restore deleted from storage');
  }
  return result;
}
