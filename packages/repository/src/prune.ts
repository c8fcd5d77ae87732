import { hostname } from 'node:os';
import { ObjectExistsError, ObjectNotFoundError } from './backend.js';
import { sealJson, unsealJson } from './blob.js';
import { ChunkKeySet } from './chunk-key-set.js';
import type { ChunkStore } from './chunk-store.js';
import { isRepoError, RepoError, RepoErrorCode } from './errors.js';
import {
  baseName,
  CHUNK_ID,
  HEX_ID,
  INDEX_PREFIX,
  indexKey,
  looseKey,
  packKey,
  RETIRED_INDEX_PREFIX,
  RETIRED_LOOSE_PREFIX,
  randomId,
  retiredIndexKey,
  retiredLooseKey,
} from './layout.js';
import type { SnapshotManifest } from './snapshot.js';

/**
 * Repository garbage collection. The protocol and its proof are in README "Prune"; in short:
 * unused data is first *retired* (its index or loose file moved under `prune/`, so no backup
 * starting later can deduplicate against it) and only deleted by a later run that starts at
 * least `graceMs` (longer than any backup) after the retirement, after copying out any chunk
 * that a snapshot written in between references.
 */
export const PRUNE_LOCK_KEY = 'prune/lock';
const BATCH_PREFIX = 'prune/batches/';

/** Default grace: longer than any backup or restore is expected to run (Velero's fs-backup timeout is 4 h). */
export const DEFAULT_PRUNE_GRACE_MS = 24 * 3600 * 1000;
/** A pack with more than this fraction of unused bytes is rewritten ("mostly garbage"). */
export const DEFAULT_REPACK_UNUSED_FRACTION = 0.5;
/** A lock not refreshed for this long belongs to a dead prune. */
const LOCK_STALE_MS = 5 * 60 * 1000;

export interface PruneOptions {
  /** How long retired data is kept before deletion; must exceed the longest backup (and restore). Default 24 h. */
  readonly graceMs?: number;
  /** Packs with more than this fraction of unused bytes are rewritten. Default 0.5. */
  readonly repackUnusedFraction?: number;
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: PruneProgress) => void;
  /** For tests: the clock. */
  readonly now?: () => number;
}

export interface PruneProgress {
  readonly phase: 'mark' | 'sweep' | 'retire' | 'delete';
  readonly done: number;
  readonly total: number;
}

export interface PruneSummary {
  readonly snapshots: number;
  /** Distinct chunks referenced by the snapshots. */
  readonly liveChunks: number;
  readonly packsScanned: number;
  /** Packs whose index could not be read: left alone. */
  readonly packsSkipped: number;
  /** Packs rewritten because they were mostly garbage (their live chunks copied to new packs). */
  readonly packsRewritten: number;
  /** Packs and loose chunks retired by this run (deleted by a run at least graceMs later). */
  readonly packsRetired: number;
  readonly looseRetired: number;
  readonly bytesRetired: number;
  /** Retired packs and loose chunks deleted by this run. */
  readonly packsDeleted: number;
  readonly looseDeleted: number;
  readonly bytesDeleted: number;
  /** Bytes written into new packs (rewritten and rescued chunks). */
  readonly bytesWritten: number;
  /** bytesDeleted − bytesWritten. */
  readonly bytesFreed: number;
  /** Live chunks copied out of retired data before deleting it (a backup deduplicated against them meanwhile). */
  readonly chunksRescued: number;
  /** Retirement batches still waiting for their grace period. */
  readonly batchesPending: number;
  readonly durationMs: number;
}

export interface PruneContext {
  readonly store: ChunkStore;
  snapshotIds(): Promise<string[]>;
  getSnapshot(snapshotId: string): Promise<SnapshotManifest>;
}

interface Batch {
  readonly id: string;
  /** When every retirement of the batch was complete (taken after the last one). */
  readonly time: number;
  readonly packs: readonly string[];
  readonly loose: readonly string[];
}

interface IndexEntry {
  readonly id: string;
  readonly offset: number;
  readonly length: number;
}

type RescueSource = { readonly packId: string; readonly offset: number; readonly length: number } | { readonly loose: true };

export async function runPrune(ctx: PruneContext, options: PruneOptions = {}): Promise<PruneSummary> {
  const graceMs = options.graceMs ?? DEFAULT_PRUNE_GRACE_MS;
  const repackAbove = options.repackUnusedFraction ?? DEFAULT_REPACK_UNUSED_FRACTION;
  if (!Number.isFinite(graceMs) || graceMs < 0)
    throw new RepoError(RepoErrorCode.InvalidArgument, `prune: graceMs must be ≥ 0, got ${graceMs}`);
  if (!(repackAbove >= 0 && repackAbove <= 1))
    throw new RepoError(RepoErrorCode.InvalidArgument, `prune: repackUnusedFraction must be between 0 and 1, got ${repackAbove}`);
  const now = options.now ?? Date.now;
  const { store } = ctx;
  const { backend, keys } = store;
  const started = now();
  const lock = await acquireLock(ctx, now);
  try {
    const signal = options.signal;
    const progress = (phase: PruneProgress['phase'], done: number, total: number) => options.onProgress?.({ phase, done, total });
    const openIndex = (packId: string, sealed: Uint8Array) =>
      (unsealJson(keys.encryptionKey, `index:${packId}`, sealed) as { entries: IndexEntry[] }).entries;

    // 0. What earlier runs retired, and retirements a crash left without a batch record.
    const batches: Batch[] = [];
    for (const key of await backend.list(BATCH_PREFIX)) {
      const id = baseName(key);
      if (!HEX_ID.test(id)) continue;
      batches.push(unsealJson(keys.encryptionKey, `prune-batch:${id}`, await backend.get(key)) as Batch);
    }
    const inBatch = new Set(batches.flatMap((b) => [...b.packs, ...b.loose]));
    const currentPacks = (await backend.list(INDEX_PREFIX)).map(baseName).filter((id) => HEX_ID.test(id));
    const current = new Set(currentPacks);
    const retirePacks: string[] = [];
    const retireLoose: string[] = [];
    for (const packId of (await backend.list(RETIRED_INDEX_PREFIX)).map(baseName)) {
      if (!HEX_ID.test(packId) || inBatch.has(packId)) continue;
      // Index still in place: the retirement was cut short before it happened; undo it. Otherwise it is retired as of this run.
      if (current.has(packId)) await backend.delete(retiredIndexKey(packId));
      else retirePacks.push(packId);
    }
    for (const chunkId of (await backend.list(RETIRED_LOOSE_PREFIX)).map(baseName)) {
      if (!CHUNK_ID.test(chunkId) || inBatch.has(chunkId)) continue;
      if (await backend.exists(looseKey(chunkId))) await backend.delete(retiredLooseKey(chunkId));
      else retireLoose.push(chunkId);
    }

    // 1. Mark: one manifest at a time; only the chunk keys are kept.
    const markStart = now();
    const snapshotIds = await ctx.snapshotIds();
    const live = new ChunkKeySet();
    for (const [i, snapshotId] of snapshotIds.entries()) {
      signal?.throwIfAborted();
      let manifest: SnapshotManifest;
      try {
        manifest = await ctx.getSnapshot(snapshotId);
      } catch (cause) {
        if (isRepoError(cause, RepoErrorCode.SnapshotNotFound)) continue; // forgotten since the list: its chunks are not needed
        throw new RepoError(
          RepoErrorCode.PruneUnsafe,
          `prune stopped before deleting anything: snapshot ${snapshotId} cannot be read, so the chunks it needs are unknown (run repo verify)`,
          { cause, details: { snapshotId } },
        );
      }
      for (const entry of manifest.entries) for (const chunkId of entry.chunks ?? []) live.add(chunkId);
      progress('mark', i + 1, snapshotIds.length);
    }

    // 2. Retired data now past its grace: which live chunks (referenced by a snapshot written since) it holds.
    const due = batches.filter((b) => b.time + graceMs <= markStart);
    const needRescue = new Map<string, RescueSource>();
    const duePackBytes = new Map<string, number>();
    for (const batch of due) {
      for (const packId of batch.packs) {
        let entries: IndexEntry[];
        try {
          entries = openIndex(packId, await backend.get(retiredIndexKey(packId)));
        } catch (error) {
          if (error instanceof ObjectNotFoundError) continue; // deleted (pack first, then this) by a run cut short
          throw error;
        }
        duePackBytes.set(
          packId,
          entries.reduce((sum, e) => Math.max(sum, e.offset + e.length), 0),
        );
        for (const e of entries) if (live.has(e.id)) needRescue.set(e.id, { packId, offset: e.offset, length: e.length });
      }
      for (const chunkId of batch.loose) if (live.has(chunkId)) needRescue.set(chunkId, { loose: true });
    }

    // 3. Sweep the current packs: keep, rewrite (mostly garbage) or retire (all garbage).
    const writer = store.writer();
    let packsSkipped = 0;
    let packsRewritten = 0;
    let bytesWritten = 0;
    let bytesRetired = 0;
    for (const [i, packId] of currentPacks.entries()) {
      signal?.throwIfAborted();
      let entries: IndexEntry[];
      try {
        entries = openIndex(packId, await backend.get(indexKey(packId)));
      } catch {
        packsSkipped++; // unreadable or gone: verify reports it; prune never deletes what it cannot read
        continue;
      }
      const total = entries.reduce((sum, e) => sum + e.length, 0);
      const liveEntries = entries.filter((e) => live.has(e.id));
      const liveBytes = liveEntries.reduce((sum, e) => sum + e.length, 0);
      if (liveEntries.length > 0 && (total - liveBytes) / total <= repackAbove) {
        for (const e of liveEntries) needRescue.delete(e.id);
      } else {
        if (liveEntries.length > 0) {
          const pack = await backend.get(packKey(packId));
          for (const e of liveEntries) {
            await writer.appendSealed(e.id, pack.subarray(e.offset, e.offset + e.length));
            needRescue.delete(e.id);
            bytesWritten += e.length;
          }
          packsRewritten++;
        }
        retirePacks.push(packId);
        bytesRetired += total;
      }
      progress('sweep', i + 1, currentPacks.length);
    }
    for (const chunkId of await store.listLoose()) {
      if (live.has(chunkId)) needRescue.delete(chunkId);
      else retireLoose.push(chunkId);
    }

    // 4. Rescue: a live chunk whose only copy is retired data past its grace is copied into a new pack.
    for (const [chunkId, source] of needRescue) {
      let blob: Buffer;
      try {
        blob =
          'loose' in source
            ? await backend.get(retiredLooseKey(chunkId))
            : await backend.getRange(packKey(source.packId), source.offset, source.length);
      } catch (cause) {
        throw new RepoError(RepoErrorCode.PruneUnsafe, `prune stopped: live chunk ${chunkId} has no readable copy left (run repo verify)`, {
          cause,
          details: { chunkId },
        });
      }
      await writer.appendSealed(chunkId, blob);
      bytesWritten += blob.length;
    }
    // New packs are complete and indexed before anything they replace is retired or deleted.
    await writer.finish();

    // 5. Retire: the index (or loose file) moves under prune/, so backups starting from now on cannot see it.
    for (const [i, packId] of retirePacks.entries()) {
      signal?.throwIfAborted();
      if (current.has(packId)) {
        await backend.put(retiredIndexKey(packId), await backend.get(indexKey(packId)));
        await backend.delete(indexKey(packId));
      }
      progress('retire', i + 1, retirePacks.length);
    }
    for (const chunkId of retireLoose) {
      signal?.throwIfAborted();
      const blob = await backend.get(looseKey(chunkId)).catch((error: unknown) => {
        if (error instanceof ObjectNotFoundError) return undefined; // an orphan: already moved
        throw error;
      });
      if (blob) {
        await backend.put(retiredLooseKey(chunkId), blob);
        await backend.delete(looseKey(chunkId));
        bytesRetired += blob.length;
      }
    }
    if (retirePacks.length > 0 || retireLoose.length > 0) {
      // Taken after the last retirement: a backup that could still see any of it started before this time.
      const batch: Batch = { id: randomId(), time: now(), packs: retirePacks, loose: retireLoose };
      await backend.put(`${BATCH_PREFIX}${batch.id}`, sealJson(keys.encryptionKey, `prune-batch:${batch.id}`, batch));
    }

    // 6. Delete what is past its grace (pack first, its retired index last: a cut-short run redoes the rest).
    let packsDeleted = 0;
    let looseDeleted = 0;
    let bytesDeleted = 0;
    const dueItems = due.reduce((sum, b) => sum + b.packs.length + b.loose.length, 0);
    let deleted = 0;
    for (const batch of due) {
      for (const packId of batch.packs) {
        signal?.throwIfAborted();
        await backend.delete(packKey(packId));
        await backend.delete(retiredIndexKey(packId));
        if (duePackBytes.has(packId)) {
          packsDeleted++;
          bytesDeleted += duePackBytes.get(packId)!;
        }
        progress('delete', ++deleted, dueItems);
      }
      for (const chunkId of batch.loose) {
        const blob = await backend.get(retiredLooseKey(chunkId)).catch(() => undefined);
        await backend.delete(retiredLooseKey(chunkId));
        if (blob) {
          looseDeleted++;
          bytesDeleted += blob.length;
        }
        progress('delete', ++deleted, dueItems);
      }
      await backend.delete(`${BATCH_PREFIX}${batch.id}`);
    }
    return {
      snapshots: snapshotIds.length,
      liveChunks: live.size,
      packsScanned: currentPacks.length,
      packsSkipped,
      packsRewritten,
      packsRetired: retirePacks.length,
      looseRetired: retireLoose.length,
      bytesRetired,
      packsDeleted,
      looseDeleted,
      bytesDeleted,
      bytesWritten,
      bytesFreed: bytesDeleted - bytesWritten,
      chunksRescued: needRescue.size,
      batchesPending: batches.length - due.length + (retirePacks.length > 0 || retireLoose.length > 0 ? 1 : 0),
      durationMs: now() - started,
    };
  } finally {
    await lock.release();
  }
}

interface LockRecord {
  readonly runId: string;
  readonly host: string;
  readonly pid: number;
  /** Refreshed while the prune runs. */
  readonly time: number;
}

/**
 * At most one prune per repository: `prune/lock` created exclusively (link() in a directory,
 * If-None-Match in S3) and refreshed while the run lasts. A lock left by a dead process is taken
 * over: on the same host when its pid is gone, anywhere once it is not refreshed for 5 minutes.
 */
async function acquireLock(ctx: PruneContext, now: () => number): Promise<{ release(): Promise<void> }> {
  const { backend } = ctx.store;
  const record = (): LockRecord => ({ runId, host: hostname(), pid: process.pid, time: now() });
  const runId = randomId();
  const encode = () => Buffer.from(JSON.stringify(record()));
  const tryCreate = async () => {
    try {
      await backend.put(PRUNE_LOCK_KEY, encode(), { exclusive: true });
      return true;
    } catch (error) {
      if (error instanceof ObjectExistsError) return false;
      throw error;
    }
  };
  if (!(await tryCreate())) {
    const holder = await readLock(ctx);
    if (holder && !isDead(holder, now())) {
      throw new RepoError(
        RepoErrorCode.PruneLocked,
        `another prune is running on this repository (host ${holder.host}, pid ${holder.pid}, lock refreshed ${new Date(holder.time).toISOString()})`,
        { details: { ...holder } },
      );
    }
    await backend.delete(PRUNE_LOCK_KEY);
    if (!(await tryCreate())) throw new RepoError(RepoErrorCode.PruneLocked, 'another prune took the repository lock at the same moment');
  }
  const mine = await readLock(ctx);
  if (mine?.runId !== runId) {
    throw new RepoError(RepoErrorCode.PruneLocked, 'another prune took the repository lock at the same moment; try again');
  }
  const heartbeat = setInterval(() => {
    backend.put(PRUNE_LOCK_KEY, encode()).catch(() => {});
  }, LOCK_STALE_MS / 5);
  heartbeat.unref();
  return {
    async release() {
      clearInterval(heartbeat);
      if ((await readLock(ctx))?.runId === runId) await backend.delete(PRUNE_LOCK_KEY);
    },
  };
}

async function readLock(ctx: PruneContext): Promise<LockRecord | undefined> {
  try {
    return JSON.parse((await ctx.store.backend.get(PRUNE_LOCK_KEY)).toString('utf8')) as LockRecord;
  } catch {
    return undefined;
  }
}

function isDead(holder: LockRecord, at: number): boolean {
  if (at - holder.time > LOCK_STALE_MS) return true;
  if (holder.host !== hostname()) return false;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
