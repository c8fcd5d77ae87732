import { ENDED_BACKUP_PHASES, runKeyScopes, SCHEDULE_NAME_LABEL } from '@stowage/core';
import {
  BackupArchiveReader,
  type BackupRecord,
  type BackupState,
  type RestoreState,
  type ScheduleArchive,
  type ScheduleControl,
  type ScheduleStore,
} from '@stowage/pipeline';
import { BACKUPS_ROOT, type BackupStorage, backupLayout, stowageSidecarLayout } from '@stowage/storage';
import type { Logger } from 'pino';
import { STRAY_RECORD_REASON, syncCatalogue } from './catalogue-sync.js';
import { type RestoreSyncResult, syncRestoreCatalogue } from './restore-sync.js';
import { type ScheduleSyncResult, syncScheduleCatalogue } from './schedule-sync.js';

/*
 * Backup sync (Velero's, docs/architecture.md#backup-sync): the catalogue in Redis follows the backups in storage. A
 * finished backup in storage that Redis does not know is added (a fresh install, or Redis lost);
 * a catalogued finished backup whose storage is gone is removed. Storage is read only through the
 * BackupStorage interface (list, getObject, exists), so it works on every backend.
 *
 * Finished means "has its final marker": finalize writes velero-backup.json last, after the Stowage
 * sidecars. A directory without it is a backup being written — or, when Redis has no record of it,
 * one whose state was lost while it ran: that one is listed as Failed, saying so, never as finished.
 *
 * Schedules come first in a pass (schedule-sync.ts: back, paused), so that each backup added
 * after them joins its schedule (the `stowage.dev/schedule-name` label): the schedule's last and
 * last successful backup show again.
 */

export interface BackupSyncOptions {
  state: BackupState;
  /** When given, the same pass syncs the restore catalogue too (restore-sync.ts). */
  restores?: RestoreState | undefined;
  /** When given, the pass first brings back schedules found in storage, paused (schedule-sync.ts). */
  schedules?: { store: ScheduleStore; control: ScheduleControl; archive: ScheduleArchive } | undefined;
  storage: Pick<BackupStorage, 'list' | 'getObject' | 'exists'>;
  logger: Pick<Logger, 'info' | 'warn'>;
  now?: () => number;
}

export interface BackupSyncResult {
  /** Finished backups found in storage and added to the catalogue. */
  added: string[];
  /** Backups in storage without their final marker and unknown to Redis: catalogued as Failed. */
  lost: string[];
  /** Catalogue entries removed because their backup is no longer in storage. */
  removed: string[];
  /** Backups in storage that could not be catalogued, with the reason (also logged). */
  skipped: Array<{ name: string; reason: string }>;
  /** The restores' pass, when `restores` was given. */
  restores?: RestoreSyncResult;
  /** The schedules' pass, when `schedules` was given. */
  schedules?: ScheduleSyncResult;
}

/** failureReason of a backup whose state in Redis was lost while it ran (exported for tests). */
export const LOST_IN_FLIGHT_REASON =
  'the backup was still running when its state in Redis was lost; storage holds only part of it (no final velero-backup.json), so it cannot be used';

const ENDED: ReadonlySet<string> = new Set(ENDED_BACKUP_PHASES);

/** One pass of backup sync. Safe to run concurrently from several replicas (every add is atomic per name). */
export async function syncBackupCatalogue(opts: BackupSyncOptions): Promise<BackupSyncResult> {
  const { state, storage, logger } = opts;
  const now = opts.now ?? Date.now;
  const reader = new BackupArchiveReader(storage);
  const lost: string[] = [];
  const schedules = opts.schedules ? await syncScheduleCatalogue({ ...opts, schedules: opts.schedules }) : undefined;

  const { added, removed, skipped } = await syncCatalogue<{ marker: boolean }, BackupRecord>(
    {
      noun: 'backup',
      root: BACKUPS_ROOT,
      noteKey: (listed, rest) => ({ marker: (listed?.marker ?? false) || rest === 'velero-backup.json' }),
      knownNames: () => state.allBackupNames(),
      add: (name, { marker }) => (marker ? addFinished(name) : addLost(name)),
      isWhole: (listed) => listed?.marker === true,
      record: (name) => state.getBackup(name),
      goneFromStorage: async (name, rec) =>
        rec.failureReason === LOST_IN_FLIGHT_REASON
          ? (await storage.list(backupLayout(name).dir)).length === 0
          : !(await storage.exists(backupLayout(name).metadata)),
      remove: (name) => state.deleteBackup(name),
    },
    storage,
    logger,
  );
  const result: BackupSyncResult = { added, lost, removed, skipped, ...(schedules ? { schedules } : {}) };
  if (opts.restores) result.restores = await syncRestoreCatalogue({ ...opts, restores: opts.restores });
  return result;

  async function addFinished(name: string): Promise<{ phase: string } | undefined> {
    const manifest = await reader.manifest(name);
    if (!manifest)
      throw new Error(
        `${backupLayout(name).metadata} exists but ${stowageSidecarLayout(name).manifest} does not (not written by this Stowage)`,
      );
    const { record } = manifest;
    if (record.name !== name) throw new Error(`${stowageSidecarLayout(name).manifest} names backup "${record.name}", not "${name}"`);
    if (!ENDED.has(record.phase)) throw new Error(`${stowageSidecarLayout(name).manifest} has phase ${record.phase}, not an ended one`);
    const { added, known } = await state.catalogueBackup(
      { ...record, archivedAt: now(), pvbPhases: manifest.pvbPhases },
      manifest.counters,
    );
    if (known) throw new Error(STRAY_RECORD_REASON);
    const schedule = record.labels?.[SCHEDULE_NAME_LABEL];
    if (added && schedule && opts.schedules) await opts.schedules.store.linkBackup(schedule, name, record.createdAt);
    return added ? { phase: record.phase } : undefined;
  }

  /** Backup-only: a directory without the final marker that Redis does not know was lost in flight. */
  async function addLost(name: string): Promise<undefined> {
    // Still there? (A DELETE may have removed it, and then its record, since the listing.)
    if ((await storage.list(backupLayout(name).dir)).length === 0) return undefined;
    const at = now();
    // Nothing in storage says its scope yet (the manifest and velero-backup.json come last), but a
    // namespaced backup's name does (core's runKey): it stays its namespace's, visible to its team.
    const [scope] = runKeyScopes(name);
    const record: BackupRecord = {
      name,
      ...(scope ? { namespace: scope } : {}),
      uid: '',
      spec: {},
      phase: 'Failed',
      createdAt: at,
      completedAt: at,
      failureReason: LOST_IN_FLIGHT_REASON,
      archivedAt: at,
      pvbPhases: {},
    };
    const { added, known } = await state.catalogueBackup(record, { errors: 1 });
    if (known) throw new Error(STRAY_RECORD_REASON);
    if (!added) return undefined;
    lost.push(name);
    logger.warn({ backup: name }, `backup sync: ${LOST_IN_FLIGHT_REASON}`);
    return undefined;
  }
}

export interface BackupSyncLoop {
  /** Ends the loop (a pass under way finishes first). */
  stop(): Promise<void>;
}

/**
 * Runs backup sync every `intervalMs` (0 = never after the first pass, which the caller awaits with
 * syncBackupCatalogue). Passes never overlap; a failed pass is logged and the next one tries again.
 */
export function startBackupSyncLoop(opts: BackupSyncOptions & { intervalMs: number }): BackupSyncLoop {
  let running: Promise<unknown> | undefined;
  let stopped = false;
  const timer =
    opts.intervalMs > 0
      ? setInterval(() => {
          if (running || stopped) return;
          running = syncBackupCatalogue(opts)
            .catch((err: Error) => opts.logger.warn({ err }, 'backup sync failed; retrying at the next interval'))
            .finally(() => {
              running = undefined;
            });
        }, opts.intervalMs)
      : undefined;
  timer?.unref();
  return {
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      await running;
    },
  };
}
