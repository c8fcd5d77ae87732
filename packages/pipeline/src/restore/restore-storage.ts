import { type BackupStorage, readGzipJson, writeGzipJson } from '@stowage/storage';
import { type EventSegmentIndex, readEventSegments, writeEventSegments } from '../state/event-archive.js';
import type { HookRunRecord, LogLine, RunEvent } from '../state/run-state.js';
import { countersWithOwnPuts } from '../state/storage-cost.js';
import type { RestoreTierPlan } from './restore-plan-types.js';
import type { ItemResult, PvrStateRecord, RestoreRecord, RestoreState } from './restore-state.js';

/** Where a finished restore lives in backup storage (Velero keeps restores beside backups). */
export function restoreLayout(restoreName: string): {
  dir: string;
  record: string;
  results: string;
  logs: string;
  items: string;
  eventsSegment(segment: number): string;
} {
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(restoreName))
    throw new Error(`restore name ${JSON.stringify(restoreName)} cannot be a storage path segment`);
  const dir = `restores/${restoreName}/`;
  return {
    dir,
    record: `${dir}restore.json`,
    results: `${dir}${restoreName}-results.gz`,
    logs: `${dir}${restoreName}-logs.gz`,
    items: `${dir}${restoreName}-items.json.gz`,
    eventsSegment: (segment) => `${dir}events-${String(segment).padStart(6, '0')}.json.gz`,
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
  /** The event stream's segments (`events-<n>.json.gz`); absent in archives written before events were archived. */
  events?: EventSegmentIndex;
}

/** Writes `<restore>-results.gz` (Velero's shape: errors and warnings by namespace), the log and per-item results. */
async function writeRestoreSidecars(
  storage: BackupStorage,
  restoreName: string,
  input: { logLines: readonly LogLine[]; items: Record<string, ItemResult> },
): Promise<void> {
  const layout = restoreLayout(restoreName);
  await writeGzipJson(storage, layout.results, restoreResultsFromLogs(input.logLines));
  await writeGzipJson(storage, layout.logs, input.logLines);
  await writeGzipJson(storage, layout.items, input.items);
}

/** The results file's errors and warnings, from the log's error and warn lines (by namespace when a line names one). */
export function restoreResultsFromLogs(logLines: readonly LogLine[]): { errors: RestoreResultSet; warnings: RestoreResultSet } {
  const results = { errors: emptyResultSet(), warnings: emptyResultSet() };
  for (const line of logLines) {
    if (line.level !== 'error' && line.level !== 'warn') continue;
    const set = line.level === 'error' ? results.errors : results.warnings;
    const ns = typeof line.namespace === 'string' ? line.namespace : undefined;
    if (ns) set.namespaces[ns] = [...(set.namespaces[ns] ?? []), line.msg];
    else set.velero.push(line.msg);
  }
  return results;
}

function emptyResultSet(): RestoreResultSet {
  return { velero: [], cluster: [], namespaces: {} };
}

/**
 * Writes everything an ended restore's views show, from its state in Redis: the event stream (its
 * terminal phase event included, so `record` must have its final phase), the results, log and item
 * sidecars, and then `restore.json`, last — the archive counts as written once it is there.
 *
 * Safe to run again and alongside another run (finalize re-delivered while a stalled first run goes
 * on): the sidecars and `restore.json` are written only if, once every read is done, the restore is
 * still not archived — else another run archived it and may have dropped the live state under this
 * one's reads, so this one writes nothing more and returns undefined. Event segments it wrote before
 * that check hold the same events as the other run's: the stream of an ended restore does not change.
 */
export async function writeRestoreArchive(
  storage: BackupStorage,
  restores: RestoreState,
  record: RestoreRecord,
): Promise<RestoreArchive | undefined> {
  const { name } = record;
  const [counters, tiers, pvrNames, hookRuns, logLines, items] = await Promise.all([
    restores.counters(name),
    restores.getTiers(name),
    restores.allPvrNames(name),
    restores.hookRuns(name),
    restores.readLogs(name),
    restores.itemResults(name),
  ]);
  const pvrs = (await restores.getPvrs(name, pvrNames)).filter((p) => p !== undefined);
  const events = await writeEventSegments(storage, restores, name, restoreLayout(name).eventsSegment);
  if ((await restores.getRestore(name))?.archivedAt !== undefined) return undefined;
  await writeRestoreSidecars(storage, name, { logLines, items });
  const { archivedAt: _notArchivedYet, ...finalRecord } = record;
  const archive: RestoreArchive = {
    formatVersion: RESTORE_ARCHIVE_FORMAT_VERSION,
    record: finalRecord,
    counters,
    tiers,
    pvrs,
    hookRuns,
    events,
  };
  // Its storage figures include finalize's own writes, this one last.
  const own = await countersWithOwnPuts(counters, (c) => [Buffer.from(JSON.stringify({ ...archive, counters: c }))]);
  await storage.putObject(restoreLayout(name).record, own.bodies[0]!);
  return { ...archive, counters: own.counters };
}

/** A finished restore's archived events after `afterId` (exclusive), a segment at a time. */
export async function* readRestoreArchiveEvents(
  storage: Pick<BackupStorage, 'getObject'>,
  archive: RestoreArchive,
  afterId: string,
): AsyncGenerator<RunEvent[]> {
  if (!archive.events) return;
  yield* readEventSegments(storage, archive.events, afterId, restoreLayout(archive.record.name).eventsSegment);
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
