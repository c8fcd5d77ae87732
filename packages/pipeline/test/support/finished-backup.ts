import type { BackupStorage } from '@stowage/storage';
import { type LoadedBackupArchive, loadBackupArchive } from '../../src/state/backup-archive.js';
import type { PvbStateRecord } from '../../src/state/backup-state.js';

/** A finished backup as storage holds it (Redis keeps only its record and counters). */
export interface FinishedBackup extends LoadedBackupArchive {
  pvb(name: string): PvbStateRecord | undefined;
}

/** Reads everything of a finished backup back from storage (the backup must have finished). */
export async function readFinishedBackup(storage: Pick<BackupStorage, 'getObject'>, name: string): Promise<FinishedBackup> {
  const loaded = await loadBackupArchive(storage, name);
  return { ...loaded, pvb: (pvbName) => loaded.blocks.flatMap((b) => b.pvbs).find((p) => p.name === pvbName) };
}
