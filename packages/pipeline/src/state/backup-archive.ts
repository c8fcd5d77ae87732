import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import {
  type BackupResults,
  type BackupStorage,
  backupLayout,
  type ResultSet,
  readGzipJson,
  readLogsSidecar,
  stowageSidecarLayout,
  writeGzipJson,
  writeLogsSidecar,
  writeResultsSidecar,
} from '@stowage/storage';
import type { BackupEvent, BackupRecord, BackupState, BlockStateRecord, HookRunRecord, LogLine, PvbStateRecord } from './backup-state.js';
import { type EventSegmentIndex, readEventSegments, writeEventSegments } from './event-archive.js';
import { countersWithOwnPuts } from './storage-cost.js';

export { ARCHIVE_EVENTS_PER_SEGMENT, compareStreamIds } from './event-archive.js';

/*
 * A finished backup in storage: everything its views show, so Redis can drop all of it but a small
 * catalogue entry (docs/architecture.md#where-a-backup-lives-once-it-has-ended). Finalize writes it (writeBackupArchive) after the final phase is
 * recorded, and before velero-backup.json, the final marker; the api service reads it back
 * (BackupArchiveReader) and backup sync catalogues it. Layout and format: the storage README.
 */

/** Version of the `stowage/` sidecars; a reader refuses a version it does not know. */
export const ARCHIVE_FORMAT_VERSION = 1;
/** Blocks per `blocks-<page>.json.gz`: a page of a large backup is read without the rest. */
export const ARCHIVE_BLOCKS_PER_PAGE = 200;

/** One block as its views show it: plan summary, live state at the end, its PVBs and hook runs. */
export interface ArchivedBlock {
  id: string;
  /** The block's state record (undefined when it never started). */
  block?: BlockStateRecord | undefined;
  /** `namespace/name` of its pods, in plan order. */
  pods: string[];
  itemCount: number;
  /** The block's plan as stored by plan (pipeline's BlockPlan: pods, items without manifests, skips). */
  plan?: unknown;
  pvbs: PvbStateRecord[];
  hookRuns: HookRunRecord[];
}

/** `stowage/backup.json.gz`: the record, counters and the index of the pages. */
export interface BackupArchiveManifest {
  formatVersion: typeof ARCHIVE_FORMAT_VERSION;
  /** The writing whose pages this manifest names (`stowage/<generation>/…`). */
  generation: string;
  record: BackupRecord;
  counters: Record<string, number>;
  /** PVBs by their final phase (from the PVB records). */
  pvbPhases: Record<string, number>;
  blocks: { count: number; perPage: number; pages: number };
  events: EventSegmentIndex;
  logLines: number;
}

/**
 * Blocks `[offset, offset + limit)` in plan order from the backup's live state in Redis, with their
 * PVBs and hook runs. The one reader of live blocks: the API's views of a running backup use it, and
 * the archive is written from it. `runs` (every hook run of the backup) may be passed when read already.
 */
export async function readLiveBlocks(
  state: BackupState,
  name: string,
  offset: number,
  limit: number,
  runs?: readonly HookRunRecord[],
): Promise<ArchivedBlock[]> {
  const [ids, allRuns] = await Promise.all([state.blockIds(name, offset, offset + limit - 1), runs ?? state.hookRuns(name)]);
  if (ids.length === 0) return [];
  const wanted = new Set(ids);
  const runsByBlock = new Map<string, HookRunRecord[]>();
  for (const r of allRuns) {
    if (!wanted.has(r.blockId)) continue;
    const list = runsByBlock.get(r.blockId) ?? [];
    list.push(r);
    runsByBlock.set(r.blockId, list);
  }
  const [blocks, plans] = await Promise.all([state.getBlocks(name, ids), state.getBlockPlans(name, ids)]);
  const pvbNames = blocks.flatMap((b) => b?.pvbs ?? []);
  const pvbByName = new Map<string, PvbStateRecord>();
  for (let i = 0; i < pvbNames.length; i += 500) {
    for (const p of await state.getPvbs(name, pvbNames.slice(i, i + 500))) if (p) pvbByName.set(p.name, p);
  }
  return ids.map((id, i) => {
    const block = blocks[i];
    return {
      id,
      block,
      ...describePlan(plans[i]),
      plan: plans[i],
      pvbs: (block?.pvbs ?? []).flatMap((n) => pvbByName.get(n) ?? []),
      hookRuns: runsByBlock.get(id) ?? [],
    };
  });
}

/** Pods and item count of a stored block plan; tolerant, since old plans (and tests) store pods as strings. */
function describePlan(plan: unknown): { pods: string[]; itemCount: number } {
  if (typeof plan !== 'object' || plan === null) return { pods: [], itemCount: 0 };
  const p = plan as Record<string, unknown>;
  const pods = Array.isArray(p.pods)
    ? p.pods.map((pod) => {
        if (typeof pod === 'string') return pod;
        const o = (pod ?? {}) as Record<string, unknown>;
        return `${String(o.namespace ?? '')}/${String(o.name ?? '')}`;
      })
    : [];
  const itemCount = typeof p.itemCount === 'number' ? p.itemCount : Array.isArray(p.items) ? p.items.length : 0;
  return { pods, itemCount };
}

/**
 * PVBs by their phase, over every PVB the backup registered. `read`: records the caller has read
 * already (the archive's block pages), not read again — only a PVB no block names is.
 */
export async function countLivePvbPhases(
  state: BackupState,
  name: string,
  read: ReadonlyMap<string, PvbStateRecord> = new Map(),
): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  const names = await state.allPvbNames(name);
  const count = (p: PvbStateRecord | undefined) => {
    if (p) counts[p.phase] = (counts[p.phase] ?? 0) + 1;
  };
  const unread = names.filter((n) => {
    if (!read.has(n)) return true;
    count(read.get(n));
    return false;
  });
  for (let i = 0; i < unread.length; i += 500) {
    for (const p of await state.getPvbs(name, unread.slice(i, i + 500))) count(p);
  }
  return counts;
}

/**
 * Writes everything the views of an ended backup show to storage: block pages, event segments, the
 * logs and results sidecars, then the manifest. `record` is the record with its final phase (the
 * terminal `backup.phase` event is in the stream by then).
 *
 * Safe to run again and alongside another run (finalize re-delivered while a stalled first run goes
 * on): pages go to this run's own generation, and the manifest is written only if, once every read
 * is done, the backup is still not archived — else another run archived it and may have dropped
 * the live state under this one's reads, so this run writes no manifest and returns undefined.
 *
 * `metadata`: the Backup object for `velero-backup.json`, from the final counters, written after
 * the manifest (a backup without it is being written, never finished). The counters both hold
 * include finalize's own writes, those two last.
 */
export async function writeBackupArchive(
  storage: BackupStorage,
  state: BackupState,
  record: BackupRecord,
  metadata?: (counters: Record<string, number>) => unknown,
): Promise<BackupArchiveManifest | undefined> {
  const { name } = record;
  const keys = stowageSidecarLayout(name);
  const generation = `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;

  const [count, runs] = await Promise.all([state.blockCount(name), state.hookRuns(name)]);
  const pages = Math.ceil(count / ARCHIVE_BLOCKS_PER_PAGE);
  // The PVB records the pages hold: the manifest's phase counts come from them (one read per PVB).
  const pvbsRead = new Map<string, PvbStateRecord>();
  for (let page = 0; page < pages; page++) {
    const blocks = await readLiveBlocks(state, name, page * ARCHIVE_BLOCKS_PER_PAGE, ARCHIVE_BLOCKS_PER_PAGE, runs);
    for (const block of blocks) for (const p of block.pvbs) pvbsRead.set(p.name, p);
    await writeGzipJson(storage, keys.blocksPage(generation, page), blocks);
  }

  const events = await writeEventSegments(storage, state, name, (segment) => keys.eventsSegment(generation, segment));

  const logs = await state.readLogs(name);
  const [counters, pvbPhases] = await Promise.all([state.counters(name), countLivePvbPhases(state, name, pvbsRead)]);
  if ((await state.getBackup(name))?.archivedAt !== undefined) return undefined;
  await Promise.all([
    writeLogsSidecar(
      storage,
      name,
      logs.map((l) => JSON.stringify(l)),
    ),
    writeResultsSidecar(storage, name, resultsFromLogs(logs)),
  ]);

  const manifest: BackupArchiveManifest = {
    formatVersion: ARCHIVE_FORMAT_VERSION,
    generation,
    record,
    counters,
    pvbPhases,
    blocks: { count, perPage: ARCHIVE_BLOCKS_PER_PAGE, pages },
    events,
    logLines: logs.length,
  };
  const own = await countersWithOwnPuts(
    counters,
    (c) => [
      gzipSync(Buffer.from(JSON.stringify({ ...manifest, counters: c }))),
      ...(metadata ? [Buffer.from(JSON.stringify(metadata(c)))] : []),
    ],
    { lastIsJson: metadata !== undefined },
  );
  await storage.putObject(keys.manifest, own.bodies[0]!);
  if (metadata) await storage.putObject(backupLayout(name).metadata, own.bodies[1]!);
  return { ...manifest, counters: own.counters };
}

/** Velero's results file: errors and warnings for Velero itself, cluster-scoped items, and per namespace. */
export function resultsFromLogs(logs: readonly LogLine[]): BackupResults {
  const errors: ResultSet = {};
  const warnings: ResultSet = {};
  for (const line of logs) {
    const set = line.level === 'error' ? errors : line.level === 'warn' ? warnings : undefined;
    if (!set) continue;
    const ns = typeof line.namespace === 'string' && line.namespace ? line.namespace : undefined;
    if (ns) {
      const byNamespace = set.namespaces ?? {};
      set.namespaces = byNamespace;
      byNamespace[ns] = [...(byNamespace[ns] ?? []), line.msg];
    } else {
      set.velero = [...(set.velero ?? []), line.msg];
    }
  }
  return { errors, warnings };
}

/** Thrown when a sidecar of a finished backup is missing or not what this version writes. */
export class BackupArchiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BackupArchiveError';
  }
}

/** Reads finished backups back from storage, a page or a segment at a time. */
export class BackupArchiveReader {
  constructor(private readonly storage: Pick<BackupStorage, 'getObject'>) {}

  /** The manifest, or undefined when the backup has none (not finished, or not written by Stowage). */
  async manifest(name: string): Promise<BackupArchiveManifest | undefined> {
    const key = stowageSidecarLayout(name).manifest;
    const raw = (await readGzipJson(this.storage, key)) as Partial<BackupArchiveManifest> | undefined;
    if (raw === undefined) return undefined;
    if (raw.formatVersion !== ARCHIVE_FORMAT_VERSION) {
      throw new BackupArchiveError(
        `${key}: formatVersion ${JSON.stringify(raw.formatVersion)} is not one this Stowage reads (${ARCHIVE_FORMAT_VERSION})`,
      );
    }
    if (typeof raw.record?.name !== 'string' || typeof raw.record.phase !== 'string' || !raw.blocks || !raw.events || !raw.generation) {
      throw new BackupArchiveError(`${key}: record, generation, blocks or events missing`);
    }
    return raw as BackupArchiveManifest;
  }

  /** Blocks `[offset, offset + limit)` in plan order, reading only the pages they are on. */
  async blocks(manifest: BackupArchiveManifest, offset: number, limit: number): Promise<ArchivedBlock[]> {
    const { count, perPage } = manifest.blocks;
    const end = Math.min(count, offset + limit);
    const out: ArchivedBlock[] = [];
    for (let page = Math.floor(offset / perPage); page * perPage < end; page++) {
      const key = stowageSidecarLayout(manifest.record.name).blocksPage(manifest.generation, page);
      const blocks = (await readGzipJson(this.storage, key)) as ArchivedBlock[] | undefined;
      if (!Array.isArray(blocks)) throw new BackupArchiveError(`${key} is missing: the finished backup's blocks cannot be read`);
      const first = page * perPage;
      out.push(...blocks.slice(Math.max(0, offset - first), end - first));
    }
    return out;
  }

  /** Events after `afterId` (exclusive; `0` from the start), a segment at a time. */
  async *events(manifest: BackupArchiveManifest, afterId: string): AsyncGenerator<BackupEvent[]> {
    const { name } = manifest.record;
    yield* readEventSegments(this.storage, manifest.events, afterId, (segment) =>
      stowageSidecarLayout(name).eventsSegment(manifest.generation, segment),
    );
  }

  /** Every log line (the `-logs.gz` sidecar); [] when the backup has none. */
  async logs(name: string): Promise<LogLine[]> {
    const lines = (await readLogsSidecar(this.storage, name)) ?? [];
    return lines.map((l) => JSON.parse(l) as LogLine);
  }
}

/** A finished backup read back whole. */
export interface LoadedBackupArchive {
  manifest: BackupArchiveManifest;
  blocks: ArchivedBlock[];
  events: BackupEvent[];
  logs: LogLine[];
}

/**
 * Everything of a finished backup at once, for tests, benchmarks and tools (the API reads a page
 * or a segment at a time instead). Throws when the backup has no manifest: it has not finished.
 */
export async function loadBackupArchive(storage: Pick<BackupStorage, 'getObject'>, name: string): Promise<LoadedBackupArchive> {
  const reader = new BackupArchiveReader(storage);
  const manifest = await reader.manifest(name);
  if (!manifest) throw new BackupArchiveError(`backup ${name} has no manifest in storage: it has not finished`);
  const events: BackupEvent[] = [];
  for await (const segment of reader.events(manifest, '0')) events.push(...segment);
  return { manifest, blocks: await reader.blocks(manifest, 0, manifest.blocks.count), events, logs: await reader.logs(name) };
}
