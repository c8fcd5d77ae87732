import {
  type HookRunRecord,
  type ItemResult,
  interruptedRun,
  type PvrStateRecord,
  type RestoreArchive,
  type RestoreRecord,
  type RestoreState,
  type RestoreTierPlan,
  type RunEvent,
  type RunLogLine,
  readRestoreArchive,
  readRestoreArchiveEvents,
  readRestoreArchiveItems,
  readRestoreArchiveLogs,
  restoreLayout,
  STORAGE_COUNTER,
  storageCostFromCounters,
} from '@stowage/pipeline';
import type { BackupStorage } from '@stowage/storage';
import type { z } from 'zod';
import { readAcrossArchiving } from './archive-race.js';
import type { restoreItemListSchema, restoreSchema, restoreSummarySchema } from './restore.schema.js';

/*
 * Maps a restore to what the API returns. Reads only. A restore in Redis is read from its live
 * state; one Redis no longer holds (lost, or a fresh install on the same storage) from the
 * `restores/<name>/` archive finalize wrote — both through the same mapping (toRestoreView).
 */

export type RestoreView = z.output<typeof restoreSchema>;
type RestoreSummaryView = z.output<typeof restoreSummarySchema>;

const iso = (ms: number | undefined): string | undefined =>
  ms === undefined || !Number.isFinite(ms) ? undefined : new Date(ms).toISOString();

export function toRestoreSummary(rec: RestoreRecord): RestoreSummaryView {
  return {
    name: rec.name,
    ...(rec.namespace ? { namespace: rec.namespace } : {}),
    uid: rec.uid,
    backupName: rec.backupName,
    phase: rec.phase,
    createdAt: iso(rec.createdAt) ?? new Date(0).toISOString(),
    startedAt: iso(rec.startedAt),
    completedAt: iso(rec.completedAt),
  };
}

const PVR_PHASES = ['New', 'InProgress', 'Completed', 'Failed', 'Canceling', 'Canceled'] as const;

/** What a restore's view is made of, from Redis or from its archive. */
export interface RestoreParts {
  counters: Record<string, number>;
  tiers: RestoreTierPlan[];
  pvrs: PvrStateRecord[];
  hookRuns: HookRunRecord[];
}

export async function readRestoreView(state: RestoreState, rec: RestoreRecord): Promise<RestoreView> {
  const [counters, tiers, pvrNames, hookRuns] = await Promise.all([
    state.counters(rec.name),
    state.getTiers(rec.name),
    state.allPvrNames(rec.name),
    state.hookRuns(rec.name),
  ]);
  const pvrs = (await state.getPvrs(rec.name, pvrNames)).filter((r) => r !== undefined);
  return toRestoreView(rec, { counters, tiers, pvrs, hookRuns });
}

export function toRestoreView(rec: RestoreRecord, parts: RestoreParts): RestoreView {
  const { counters, tiers, hookRuns } = parts;
  const n = (field: string) => (Number.isFinite(counters[field]) ? (counters[field] as number) : 0);
  const pvrRecords = parts.pvrs;
  const pvrCounts = { total: pvrRecords.length, New: 0, InProgress: 0, Completed: 0, Failed: 0, Canceling: 0, Canceled: 0, TimedOut: 0 };
  for (const r of pvrRecords) {
    if (r.timedOut) pvrCounts.TimedOut++;
    else if ((PVR_PHASES as readonly string[]).includes(r.phase)) pvrCounts[r.phase as (typeof PVR_PHASES)[number]]++;
  }
  const ended = rec.completedAt !== undefined;
  return {
    ...toRestoreSummary(rec),
    spec: rec.spec,
    requestId: rec.requestId,
    progress: { totalItems: n('totalItems'), itemsRestored: n('itemsRestored') },
    itemResults: {
      created: n('itemsCreated'),
      updated: n('itemsUpdated'),
      existsSkipped: n('itemsSkipped'),
      failed: n('itemsFailed'),
      notSelected: n('itemsNotSelected'),
    },
    hookStatus: { hooksAttempted: n('hooksAttempted'), hooksFailed: n('hooksFailed') },
    podVolumeRestores: pvrCounts,
    tiers: tiers.map((t: RestoreTierPlan) => ({
      index: t.index,
      groupResources: t.groupResources,
      items: t.items,
      batches: t.batches,
      waitUntil: t.waitUntil,
    })),
    pvrs: pvrRecords.map((r) => ({
      name: r.name,
      pod: `${r.podNamespace}/${r.podName}`,
      volume: r.volume,
      snapshotID: r.snapshotID,
      phase: r.timedOut ? 'TimedOut' : r.phase,
      node: r.node,
      totalBytes: r.totalBytes,
      bytesDone: r.bytesDone,
      message: r.message,
      startTimestamp: r.startTimestamp,
      completionTimestamp: r.completionTimestamp,
    })),
    hookRuns: hookRuns.map((raw) => {
      const run = ended && raw.outcome === 'running' ? interruptedRun(raw, 'the restore ended') : raw;
      return {
        pod: `${run.podNamespace}/${run.podName}`,
        container: run.container,
        phase: run.phase,
        source: run.source,
        command: run.command,
        outcome: run.outcome,
        exitCode: run.exitCode,
        startedAt: iso(run.startedAt),
        endedAt: iso(run.endedAt),
        durationMs: run.startedAt !== undefined && run.endedAt !== undefined ? run.endedAt - run.startedAt : undefined,
        stdoutTail: run.stdoutTail,
        stderrTail: run.stderrTail,
        message: run.message,
      };
    }),
    errors: n('errors'),
    warnings: n('warnings'),
    storage: storageCostFromCounters(counters),
    failureReason: rec.failureReason,
    cancelRequestedAt: iso(rec.cancelRequestedAt),
  };
}

type ItemsQuery = { outcome?: string | undefined; limit: number; cursor?: string | undefined };

export async function readRestoreItems(
  state: RestoreState,
  name: string,
  query: ItemsQuery,
): Promise<z.output<typeof restoreItemListSchema>> {
  return itemsPage(await state.itemResults(name), query);
}

function itemsPage(results: Record<string, ItemResult>, query: ItemsQuery): z.output<typeof restoreItemListSchema> {
  const all = Object.entries(results)
    .filter(([, r]) => query.outcome === undefined || r.outcome === query.outcome)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const offset = query.cursor ? Number(query.cursor) : 0;
  const page = all.slice(offset, offset + query.limit);
  return {
    items: page.map(([key, r]) => ({ key, outcome: r.outcome, reason: r.reason, at: iso(r.at) ?? new Date(0).toISOString() })),
    total: all.length,
    ...(offset + page.length < all.length ? { nextCursor: String(offset + page.length) } : {}),
  };
}

/** A restore as the API finds it: in Redis (live), or only in storage (archived). */
export type FoundRestore = { rec: RestoreRecord; archive?: undefined } | { rec: RestoreRecord; archive: RestoreArchive };

/** The one place the restore routes read a restore through. */
export class RestoreReads {
  constructor(
    readonly state: RestoreState,
    private readonly storage: Pick<BackupStorage, 'getObject'>,
  ) {}

  /**
   * Redis's record while the restore is live; the archive in storage once finalize archived it
   * (`archivedAt`), or when Redis does not know the restore (state dropped, fresh install) — then
   * the record carries `archivedAt` too, so every reader treats it as finished. Else undefined.
   */
  async find(name: string): Promise<FoundRestore | undefined> {
    const rec = await this.state.getRestore(name);
    if (rec && rec.archivedAt === undefined) return { rec };
    const archive = await readRestoreArchive(this.storage, name);
    if (!archive) {
      if (rec) throw new Error(`restore "${name}" is archived but ${restoreLayout(name).record} is missing from storage`);
      return undefined;
    }
    const archivedAt = rec?.archivedAt ?? archive.record.completedAt ?? archive.record.createdAt;
    return { rec: { ...archive.record, archivedAt }, archive };
  }

  /** The record (for the events route): live, or archived with `archivedAt` set. */
  async record(name: string): Promise<RestoreRecord | undefined> {
    return (await this.find(name))?.rec;
  }

  /** An archived restore's events after `afterId` (exclusive), from storage. */
  async *archivedEvents(rec: RestoreRecord, afterId: string): AsyncGenerator<RunEvent[]> {
    const archive = await readRestoreArchive(this.storage, rec.name);
    if (archive) yield* readRestoreArchiveEvents(this.storage, archive, afterId);
  }

  async view(found: FoundRestore): Promise<RestoreView> {
    return this.consistent(found, async (f) => {
      if (!f.archive) return await readRestoreView(this.state, f.rec);
      // The archive's counters were read before finalize counted its own archive writes; the
      // catalogue entry's (Redis) have every count.
      const live = await this.state.counters(f.rec.name);
      const storage = Object.fromEntries(Object.values(STORAGE_COUNTER).flatMap((field) => (field in live ? [[field, live[field]!]] : [])));
      return toRestoreView(f.rec, { ...f.archive, counters: { ...f.archive.counters, ...storage } });
    });
  }

  async items(found: FoundRestore, query: ItemsQuery): Promise<z.output<typeof restoreItemListSchema>> {
    return this.consistent(found, async (f) =>
      f.archive
        ? itemsPage(await readRestoreArchiveItems(this.storage, f.rec.name), query)
        : readRestoreItems(this.state, f.rec.name, query),
    );
  }

  /** The log lines, a chunk at a time (read whole first, so a read that overlaps the archiving is read again from storage). */
  async *logChunks(found: FoundRestore, chunk = 1000): AsyncGenerator<RunLogLine[]> {
    const all = await this.consistent(found, async (f) => {
      if (f.archive) return await readRestoreArchiveLogs(this.storage, f.rec.name);
      const lines: RunLogLine[] = [];
      for (let start = 0; ; start += chunk) {
        const rows = await this.state.readLogs(f.rec.name, start, start + chunk - 1);
        lines.push(...rows);
        if (rows.length < chunk) return lines;
      }
    });
    for (let i = 0; i < all.length; i += chunk) yield all.slice(i, i + chunk);
  }

  /**
   * Reads a live restore from Redis; if it was archived meanwhile (restore-finalize sets
   * `archivedAt` before it drops the live state), reads it again from storage, as backups' views do.
   */
  private consistent<T>(found: FoundRestore, read: (found: FoundRestore) => Promise<T>): Promise<T> {
    return readAcrossArchiving(found, { isArchived: (f) => f.archive !== undefined, reload: () => this.find(found.rec.name), read });
  }
}
