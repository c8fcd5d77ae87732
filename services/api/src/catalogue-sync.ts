import type { BackupStorage } from '@stowage/storage';
import type { Logger } from 'pino';

/*
 * The one skeleton of catalogue sync (backup-sync.ts, restore-sync.ts, schedule-sync.ts, docs/architecture.md#backup-sync): list a
 * storage root, add to the catalogue in Redis every run storage holds that Redis does not know,
 * and remove every archived catalogue entry whose run storage no longer holds. What a run looks
 * like in storage, how it is added and when it counts as gone are the kind's hooks.
 */

/** What one kind of run (backups, restores) tells the skeleton. */
export interface CatalogueSyncKind<Listed, Rec extends { archivedAt?: number | undefined }> {
  /** `backup`, `restore`: the log field and the words of the log lines. */
  noun: string;
  /** The storage prefix every run of the kind lives under (`<root><name>/…`). */
  root: string;
  /** Folds one listed key (`rest`: the part after `<root><name>/`) into what is known of that run. */
  noteKey(listed: Listed | undefined, rest: string): Listed;
  /** Every name the catalogue in Redis holds. */
  knownNames(): Promise<string[]>;
  /**
   * Adds a run found in storage that Redis does not know. Returns its phase when it was added now;
   * undefined when there was nothing to add (not finished, gone since the listing, added by another
   * replica meanwhile, or recorded in a kind-specific way). Throws the reason it cannot be added.
   */
  add(name: string, listed: Listed): Promise<{ phase: string } | undefined>;
  /** Whether the listing shows the run whole in storage (then its entry stays without a second look). */
  isWhole(listed: Listed | undefined): boolean;
  /** The catalogued record: only an archived one (`archivedAt`) stands for storage and may be removed. */
  record(name: string): Promise<Rec | undefined>;
  /** Re-checked when the listing did not show the run whole: is it gone from storage now? */
  goneFromStorage(name: string, record: Rec): Promise<boolean>;
  /** Removes the run's catalogue entry. */
  remove(name: string): Promise<void>;
}

export interface CatalogueSyncResult {
  /** Runs found in storage and added to the catalogue. */
  added: string[];
  /** Catalogue entries removed because their run is no longer in storage. */
  removed: string[];
  /** Runs in storage that could not be catalogued, with the reason (also logged). */
  skipped: Array<{ name: string; reason: string }>;
}

/** One pass of catalogue sync for one kind. Safe to run concurrently from several replicas when `add` is atomic per name. */
export async function syncCatalogue<Listed, Rec extends { archivedAt?: number | undefined }>(
  kind: CatalogueSyncKind<Listed, Rec>,
  storage: Pick<BackupStorage, 'list'>,
  logger: Pick<Logger, 'info' | 'warn'>,
): Promise<CatalogueSyncResult> {
  const { noun } = kind;
  const result: CatalogueSyncResult = { added: [], removed: [], skipped: [] };

  // Storage first, then Redis: a run created in between has a record before its first object.
  const inStorage = new Map<string, Listed>();
  for (const key of await storage.list(kind.root)) {
    const rest = key.slice(kind.root.length);
    const slash = rest.indexOf('/');
    if (slash <= 0) continue;
    const name = rest.slice(0, slash);
    inStorage.set(name, kind.noteKey(inStorage.get(name), rest.slice(slash + 1)));
  }
  const known = new Set(await kind.knownNames());

  for (const [name, listed] of inStorage) {
    if (known.has(name)) continue;
    try {
      const added = await kind.add(name, listed);
      if (!added) continue;
      result.added.push(name);
      logger.info({ [noun]: name, phase: added.phase }, `${noun} sync: added a ${noun} found in storage`);
    } catch (err) {
      const reason = (err as Error).message;
      result.skipped.push({ name, reason });
      logger.warn({ [noun]: name, err: reason }, `${noun} sync: could not catalogue a ${noun} found in storage`);
    }
  }

  for (const name of known) {
    if (kind.isWhole(inStorage.get(name))) continue;
    const rec = await kind.record(name);
    // Only entries that stand for storage follow it; a running (or not yet archived) run never.
    if (rec?.archivedAt === undefined) continue;
    // Re-checked now: the listing may predate the run's final write.
    if (!(await kind.goneFromStorage(name, rec))) continue;
    await kind.remove(name);
    result.removed.push(name);
    logger.info({ [noun]: name }, `${noun} sync: removed a ${noun} deleted from storage`);
  }
  return result;
}

/** The reason a catalogue add found a record that is not a catalogue entry (both kinds say the same). */
export const STRAY_RECORD_REASON =
  'Redis holds a record of that name that is not in the catalogue (a stray write after its data was lost?)';
