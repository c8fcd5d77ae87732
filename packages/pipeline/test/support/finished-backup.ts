import type { BackupStorage } from '@stowage/storage';
import { type ArchivedBlock, type BackupArchiveManifest, BackupArchiveReader } from '../../src/state/backup-archive.js';
import type { BackupEvent, LogLine, PvbStateRecord } from '../../src/state/backup-state.js';

/** A finished backup as storage holds it (Redis keeps only its record and counters). */
export interface FinishedBackup {
  manifest: BackupArchiveManifest;
  blocks: ArchivedBlock[];
  logs: LogLine[];
  events: BackupEvent[];
  pvb(name: string): PvbStateRecord | undefined;
}

/** Reads everything of a finished backup back from storage (the backup must have finished). */
export async function readFinishedBackup(storage: Pick<BackupStorage, 'getObject'>, name: string): Promise<FinishedBackup> {
  const reader = new BackupArchiveReader(storage);
  const manifest = await reader.manifest(name);
  if (!manifest) throw new Error(`backup ${name} has no manifest in storage: it has not finished`);
  const events: BackupEvent[] = [];
  for await (const segment of reader.events(manifest, '0')) events.push(...segment);
  const blocks = await reader.blocks(manifest, 0, manifest.blocks.count);
  return {
    manifest,
    blocks,
    logs: await reader.logs(name),
    events,
    pvb: (pvbName) => blocks.flatMap((b) => b.pvbs).find((p) => p.name === pvbName),
  };
}
