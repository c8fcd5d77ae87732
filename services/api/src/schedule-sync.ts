import { SCHEDULES_ROOT, type ScheduleArchive, type ScheduleControl, type ScheduleStore } from '@stowage/pipeline';
import type { BackupStorage } from '@stowage/storage';
import type { Logger } from 'pino';
import { type CatalogueSyncResult, syncCatalogue } from './catalogue-sync.js';

/*
 * Schedule sync, the first step of each backup sync pass: a schedule in storage
 * (`schedules/<name>/schedule.json`, written on every change) that Redis does not know is added
 * back **paused** — Redis was lost, or this is a fresh install on an existing bucket, and nobody
 * has yet said that this install should start backing up. Unpausing it (PATCH, `stowage schedule
 * unpause`, the console) resumes its ticks. A schedule Redis knows is never touched: Redis is
 * where schedules change, and one whose storage copy is missing is written back by the api at
 * start (ScheduleControl.reconcile), not removed.
 */

export type ScheduleSyncResult = CatalogueSyncResult;

export async function syncScheduleCatalogue(opts: {
  schedules: { store: ScheduleStore; control: ScheduleControl; archive: ScheduleArchive };
  storage: Pick<BackupStorage, 'list'>;
  logger: Pick<Logger, 'info' | 'warn'>;
}): Promise<ScheduleSyncResult> {
  const { store, control, archive } = opts.schedules;
  return syncCatalogue<{ present: boolean }, { archivedAt?: undefined }>(
    {
      noun: 'schedule',
      root: SCHEDULES_ROOT,
      noteKey: (listed, rest) => ({ present: (listed?.present ?? false) || rest === 'schedule.json' }),
      knownNames: () => store.names(),
      async add(name, { present }) {
        if (!present) return undefined;
        const archived = await archive.read(name);
        if (!archived) return undefined; // deleted since the listing
        return (await control.restorePaused(archived)) ? { phase: 'Paused' } : undefined;
      },
      isWhole: (listed) => listed?.present === true,
      // Never removed by sync: no catalogued schedule stands for storage.
      record: async () => ({}),
      goneFromStorage: async () => false,
      remove: async () => undefined,
    },
    opts.storage,
    opts.logger,
  );
}
