import { ENDED_RESTORE_PHASES } from '@stowage/core';
import { type RestoreRecord, type RestoreState, readRestoreArchive, restoreLayout } from '@stowage/pipeline';
import type { BackupStorage } from '@stowage/storage';
import type { Logger } from 'pino';
import { type CatalogueSyncResult, STRAY_RECORD_REASON, syncCatalogue } from './catalogue-sync.js';

/*
 * Restore sync, beside backup sync and in the same passes: the restore catalogue in Redis follows
 * the finished restores in storage (`restores/<name>/restore.json`, written last by finalize). One
 * in storage that Redis does not know is added (a fresh install, or its state dropped); a catalogued
 * archived restore whose restore.json is gone is removed. Running restores are never touched.
 * The pass itself is the skeleton both kinds share (catalogue-sync.ts); this file says what a
 * restore looks like in storage.
 */

export type RestoreSyncResult = CatalogueSyncResult;

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
  return syncCatalogue<{ finished: boolean }, RestoreRecord>(
    {
      noun: 'restore',
      root: RESTORES_ROOT,
      // Finished means "has restore.json": restore-finalize writes it last.
      noteKey: (listed, rest) => ({ finished: (listed?.finished ?? false) || rest === 'restore.json' }),
      knownNames: () => restores.allRunNames(),
      async add(name, { finished }) {
        if (!finished) return undefined;
        const archive = await readRestoreArchive(storage, name);
        if (!archive) return undefined; // deleted since the listing
        const { record } = archive;
        if (record.name !== name) throw new Error(`${restoreLayout(name).record} names restore "${record.name}", not "${name}"`);
        if (!ENDED.has(record.phase)) throw new Error(`${restoreLayout(name).record} has phase ${record.phase}, not an ended one`);
        const { added, known } = await restores.catalogueRestore({ ...record, archivedAt: now() }, archive.counters);
        if (known) throw new Error(STRAY_RECORD_REASON);
        return added ? { phase: record.phase } : undefined;
      },
      isWhole: (listed) => listed?.finished === true,
      record: (name) => restores.getRestore(name),
      goneFromStorage: async (name) => !(await storage.exists(restoreLayout(name).record)),
      remove: (name) => restores.deleteRestore(name),
    },
    storage,
    logger,
  );
}
