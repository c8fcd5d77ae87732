import { PVB_PHASES, specForDisplay } from '@stowage/core';
import {
  type ArchivedBlock,
  type BackupArchiveManifest,
  BackupArchiveReader,
  type BackupEvent,
  type BackupRecord,
  type BackupState,
  type BlockPlan,
  countLivePvbPhases,
  type HookRunRecord,
  interruptedRun,
  type LogLine,
  type PvbStateRecord,
  readLiveBlocks,
  storageCostFromCounters,
  volumeOutcomes,
} from '@stowage/pipeline';
import type { BackupStorage } from '@stowage/storage';
import type { z } from 'zod';
import type { backupSchema, backupSummarySchema, blockSchema, pvbCountsSchema } from './api.schema.js';
import { readAcrossArchiving } from './archive-race.js';

/*
 * The one place the API reads a backup through (REST views, SSE, metrics). A running backup is
 * read from its live state in Redis; a finished one (record `archivedAt`) from backup storage,
 * where finalize wrote it (pipeline's backup-archive) — Redis keeps only its record and counters.
 * Both map to the same responses. Reads only; the pipeline owns every write.
 */

export type BackupView = z.output<typeof backupSchema>;
export type BackupSummaryView = z.output<typeof backupSummarySchema>;
export type BlockView = z.output<typeof blockSchema>;
type PvbCounts = z.output<typeof pvbCountsSchema>;

const iso = (ms: number | undefined): string | undefined =>
  ms === undefined || !Number.isFinite(ms) ? undefined : new Date(ms).toISOString();

export function toBackupSummary(rec: BackupRecord): BackupSummaryView {
  return {
    name: rec.name,
    ...(rec.namespace ? { namespace: rec.namespace } : {}),
    uid: rec.uid,
    phase: rec.phase,
    createdAt: iso(rec.createdAt) ?? new Date(0).toISOString(),
    startedAt: iso(rec.startedAt),
    completedAt: iso(rec.completedAt),
    expiration: iso(expirationOf(rec)),
    ...(rec.labels ? { labels: rec.labels } : {}),
  };
}

/** Counter fields of the backup's `cnt` hash (written once per key by the pipeline). */
export const COUNTER = {
  totalItems: 'totalItems',
  itemsBackedUp: 'itemsBackedUp',
  hooksAttempted: 'hooksAttempted',
  hooksFailed: 'hooksFailed',
  errors: 'errors',
  warnings: 'warnings',
  /** `pvb<Phase>` e.g. `pvbCompleted`: PVBs that reached the phase (terminal ones counted once). */
  pvbPhasePrefix: 'pvb',
} as const;

/** Finished backups' manifests kept in memory (about a KiB each; a manifest never changes once its backup is archived). */
const MANIFEST_CACHE_SIZE = 256;

export class BackupReads {
  readonly state: BackupState;
  private readonly archive: BackupArchiveReader;
  private readonly manifests = new Map<string, BackupArchiveManifest>();

  constructor(state: BackupState, storage: Pick<BackupStorage, 'getObject'>) {
    this.state = state;
    this.archive = new BackupArchiveReader(storage);
  }

  /** The backup's record (the catalogue entry once it has finished), or undefined. */
  async record(name: string): Promise<BackupRecord | undefined> {
    return await this.state.getBackup(name);
  }

  async view(rec: BackupRecord): Promise<BackupView> {
    const [counters, pvbCounts] = await Promise.all([this.state.counters(rec.name), this.consistent(rec, (r) => this.pvbCounts(r))]);
    const n = (field: string): number => {
      const v = counters[field];
      return v !== undefined && Number.isFinite(v) ? v : 0;
    };
    return {
      ...toBackupSummary(rec),
      spec: specForDisplay(rec.spec),
      requestId: rec.requestId,
      progress: { totalItems: n(COUNTER.totalItems), itemsBackedUp: n(COUNTER.itemsBackedUp) },
      hookStatus: { hooksAttempted: n(COUNTER.hooksAttempted), hooksFailed: n(COUNTER.hooksFailed) },
      podVolumeBackups: pvbCounts,
      errors: n(COUNTER.errors),
      warnings: n(COUNTER.warnings),
      storage: storageCostFromCounters(counters),
      failureReason: rec.failureReason,
      cancelRequestedAt: iso(rec.cancelRequestedAt),
      ...(rec.annotations ? { annotations: rec.annotations } : {}),
      backupHooks: backupHooksView(rec.backupHooks),
    };
  }

  /** PVBs by their current phase, from the PVB records themselves (kept with the record once finished). */
  private async pvbCounts(rec: BackupRecord): Promise<PvbCounts> {
    const byPhase = rec.archivedAt !== undefined ? (rec.pvbPhases ?? {}) : await countLivePvbPhases(this.state, rec.name);
    const counts: PvbCounts = { total: 0, New: 0, InProgress: 0, Completed: 0, Failed: 0, Canceling: 0, Canceled: 0 };
    for (const [phase, n] of Object.entries(byPhase)) {
      counts.total += n;
      const known = (PVB_PHASES as readonly string[]).includes(phase) ? (phase as (typeof PVB_PHASES)[number]) : 'New';
      counts[known] += n;
    }
    return counts;
  }

  /** A page of blocks in plan order, each with its pods, items, PVBs and hook runs. */
  async blockPage(rec: BackupRecord, offset: number, limit: number): Promise<{ items: BlockView[]; total: number; nextCursor?: string }> {
    const page = await this.consistent(rec, (r) => this.rawBlockPage(r, offset, limit));
    const items = page.blocks.map(toBlockView);
    const next = offset + items.length;
    return next < page.total ? { items, total: page.total, nextCursor: String(next) } : { items, total: page.total };
  }

  private async rawBlockPage(rec: BackupRecord, offset: number, limit: number): Promise<{ blocks: ArchivedBlock[]; total: number }> {
    if (rec.archivedAt !== undefined) {
      const manifest = await this.manifest(rec);
      if (!manifest) return { blocks: [], total: 0 };
      return { blocks: await this.archive.blocks(manifest, offset, limit), total: manifest.blocks.count };
    }
    const [total, blocks] = await Promise.all([this.state.blockCount(rec.name), readLiveBlocks(this.state, rec.name, offset, limit)]);
    return { blocks, total };
  }

  /** The backup's log lines, in chunks (a running backup's list is bounded by BackupState's maxLogLines). */
  async *logs(rec: BackupRecord): AsyncGenerator<LogLine[]> {
    const lines = await this.consistent(rec, async (r) => {
      if (r.archivedAt !== undefined) return await this.archive.logs(r.name);
      const all: LogLine[] = [];
      for (let start = 0; ; start += LOG_CHUNK) {
        const rows = await this.state.readLogs(r.name, start, start + LOG_CHUNK - 1);
        all.push(...rows);
        if (rows.length < LOG_CHUNK) return all;
      }
    });
    for (let i = 0; i < lines.length; i += LOG_CHUNK) yield lines.slice(i, i + LOG_CHUNK);
  }

  /**
   * Reads a running backup's live state; if the backup was archived meanwhile (finalize sets
   * `archivedAt` before it drops the live state), reads it again from storage.
   */
  private consistent<T>(rec: BackupRecord, read: (rec: BackupRecord) => Promise<T>): Promise<T> {
    return readAcrossArchiving(rec, { isArchived: (r) => r.archivedAt !== undefined, reload: () => this.state.getBackup(rec.name), read });
  }

  /** A finished backup's events after `afterId` (exclusive), a segment at a time. */
  async *archivedEvents(rec: BackupRecord, afterId: string): AsyncGenerator<BackupEvent[]> {
    const manifest = await this.manifest(rec);
    if (manifest) yield* this.archive.events(manifest, afterId);
  }

  /** Every PVB record of the backup (metrics): a running backup's from its PVB set, a finished one's a block page at a time. */
  async *pvbs(rec: BackupRecord): AsyncGenerator<PvbStateRecord[]> {
    if (rec.archivedAt === undefined) {
      const live = await this.consistent(rec, async (r) => {
        if (r.archivedAt !== undefined) return undefined;
        const names = await this.state.allPvbNames(r.name);
        return (await this.state.getPvbs(r.name, names)).filter((p): p is PvbStateRecord => p !== undefined);
      });
      if (live) {
        yield live;
        return;
      }
      // Archived while it was read: from storage below.
      rec = (await this.state.getBackup(rec.name)) ?? rec;
    }
    const manifest = await this.manifest(rec);
    if (!manifest) return;
    for (let offset = 0; offset < manifest.blocks.count; offset += PVB_SCAN_BLOCKS) {
      yield (await this.archive.blocks(manifest, offset, PVB_SCAN_BLOCKS)).flatMap((b) => b.pvbs);
    }
  }

  /** The manifest of a finished backup (undefined when storage has none: a backup lost while it ran). */
  private async manifest(rec: BackupRecord): Promise<BackupArchiveManifest | undefined> {
    const key = `${rec.name}@${rec.archivedAt}`;
    const cached = this.manifests.get(key);
    if (cached) return cached;
    const manifest = await this.archive.manifest(rec.name);
    if (this.manifests.size >= MANIFEST_CACHE_SIZE) this.manifests.delete(this.manifests.keys().next().value as string);
    // A missing manifest is not cached: sync may yet find it written.
    if (manifest) this.manifests.set(key, manifest);
    return manifest;
  }
}

const LOG_CHUNK = 1000;
const PVB_SCAN_BLOCKS = 500;

const ENDED_BLOCK_STATES: ReadonlySet<string> = new Set(['Completed', 'PartiallyFailed', 'Failed', 'Canceled']);

function toBlockView(entry: ArchivedBlock): BlockView {
  const { id, block, pvbs } = entry;
  let runs = entry.hookRuns;
  // A hook still `running` in a block that has ended will never report: its job was cut off.
  if (block?.state !== undefined && ENDED_BLOCK_STATES.has(block.state)) {
    runs = runs.map((r) => (r.outcome === 'running' ? interruptedRun(r, 'its block ended without it') : r));
  }
  return {
    id,
    state: block?.state ?? 'Pending',
    pods: entry.pods,
    itemCount: entry.itemCount,
    itemsWritten: numberOrUndefined(block?.itemsWritten),
    failedPods: block?.failedPods,
    skipped: typeof block?.skipped === 'string' ? block.skipped : undefined,
    error: typeof block?.error === 'string' ? block.error : undefined,
    startedAt: iso(numberOrUndefined(block?.startedAt)),
    itemsDoneAt: iso(numberOrUndefined(block?.itemsDoneAt)),
    completedAt: iso(numberOrUndefined(block?.completedAt)),
    podVolumeBackups: pvbs.map((p) => ({
      name: p.name,
      pod: `${p.podNamespace}/${p.podName}`,
      node: p.node,
      volume: p.volume,
      phase: p.phase,
      totalBytes: numberOrUndefined(p.totalBytes),
      bytesDone: numberOrUndefined(p.bytesDone),
      message: typeof p.message === 'string' ? p.message : undefined,
      startTimestamp: typeof p.startTimestamp === 'string' ? p.startTimestamp : undefined,
      completionTimestamp: typeof p.completionTimestamp === 'string' ? p.completionTimestamp : undefined,
    })),
    volumes: isBlockPlan(entry.plan) ? volumeOutcomes(entry.plan, block) : [],
    hookRuns: runs.map(toHookRunView),
  };
}

function toHookRunView(r: HookRunRecord): BlockView['hookRuns'][number] {
  const startedAt = numberOrUndefined(r.startedAt);
  const endedAt = numberOrUndefined(r.endedAt);
  return {
    pod: `${r.podNamespace}/${r.podName}`,
    container: r.container,
    phase: r.phase,
    source: r.source,
    command: r.command,
    outcome: r.outcome,
    exitCode: numberOrUndefined(r.exitCode),
    startedAt: iso(startedAt),
    endedAt: iso(endedAt),
    durationMs: startedAt !== undefined && endedAt !== undefined ? endedAt - startedAt : undefined,
    stdoutTail: typeof r.stdoutTail === 'string' && r.stdoutTail !== '' ? r.stdoutTail : undefined,
    stderrTail: typeof r.stderrTail === 'string' && r.stderrTail !== '' ? r.stderrTail : undefined,
    message: r.message,
    hookName: typeof r.hookName === 'string' && r.hookName !== '' ? r.hookName : undefined,
    try: numberOrUndefined(r.try),
    tries: numberOrUndefined(r.tries),
  };
}

/** The backup-level hooks' record (pipeline's BackupHooksRecord) as the API shows it. */
function backupHooksView(raw: unknown): BackupView['backupHooks'] {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const phase = (p: unknown) => {
    if (typeof p !== 'object' || p === null) return undefined;
    const r = p as { doneAt?: unknown; failed?: unknown; hooksRun?: unknown; hooksFailed?: unknown; runs?: unknown };
    return {
      doneAt: iso(numberOrUndefined(r.doneAt)) ?? new Date(0).toISOString(),
      failed: typeof r.failed === 'string' ? r.failed : undefined,
      hooksRun: numberOrUndefined(r.hooksRun) ?? 0,
      hooksFailed: numberOrUndefined(r.hooksFailed) ?? 0,
      runs: Array.isArray(r.runs) ? (r.runs as HookRunRecord[]).map(toHookRunView) : [],
    };
  };
  const { pre, post } = raw as { pre?: unknown; post?: unknown };
  return { pre: phase(pre), post: phase(post) };
}

const isBlockPlan = (plan: unknown): plan is { pods: BlockPlan['pods'] } =>
  typeof plan === 'object' && plan !== null && Array.isArray((plan as { pods?: unknown }).pods);

const numberOrUndefined = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** When the backup's delete-backup job deletes it: created + ttl (Velero: start + ttl). */
function expirationOf(rec: BackupRecord): number | undefined {
  const ttlMs = (rec.spec as { ttlMs?: unknown } | undefined)?.ttlMs;
  return typeof ttlMs === 'number' && ttlMs > 0 ? rec.createdAt + ttlMs : undefined;
}
