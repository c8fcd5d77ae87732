import { hostname } from 'node:os';
import { ObjectExistsError, ObjectNotFoundError, type RepoBackend } from './backend.js';
import { sealJson, unsealJson } from './blob.js';
import { ChunkKeySet } from './chunk-key-set.js';
import { type ChunkStore, INDEX_MAX_ENTRIES, openIndexObject, type PackIndex, sealIndexObject } from './chunk-store.js';
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
/**
 * Unused bytes tolerated in packs that also hold live chunks, as a fraction of the packed bytes
 * left after the run (restic's `--max-unused`, default 5 %): partly used packs are rewritten, most
 * unused first, only until the rest is under it. Below it prune reads no pack at all.
 */
export const DEFAULT_MAX_UNUSED_FRACTION = 0.05;
/** A lock (or a backup's lease) not refreshed for this long belongs to a dead process. */
const LOCK_STALE_MS = 5 * 60 * 1000;
/** Hosts' clocks may differ by this much: a backup that started up to this long after a retirement may still have seen the retired data. */
const CLOCK_SKEW_MS = LOCK_STALE_MS;
/** Running backups' leases (`leases/<id>`): prune deletes no retired data a running backup may reference. */
export const BACKUP_LEASE_PREFIX = 'leases/';

interface BackupLease {
  readonly startedAt: number;
  /** Refreshed while the backup runs. */
  readonly time: number;
  readonly host: string;
  readonly pid: number;
}

/**
 * Registers a running backup before it loads the indexes it deduplicates against, and refreshes
 * that every LOCK_STALE_MS / 5 until `release()`: prune keeps any retired data that a backup
 * which started before its retirement may reference, however long the backup runs (issue 44).
 * A backup whose process died stops counting once its lease is stale.
 */
export async function holdBackupLease(backend: RepoBackend): Promise<{ release(): Promise<void> }> {
  const key = `${BACKUP_LEASE_PREFIX}${randomId()}`;
  const startedAt = Date.now();
  const encode = (): Buffer =>
    Buffer.from(JSON.stringify({ startedAt, time: Date.now(), host: hostname(), pid: process.pid } satisfies BackupLease));
  await backend.put(key, encode());
  const heartbeat = setInterval(() => {
    backend.put(key, encode()).catch(() => {});
  }, LOCK_STALE_MS / 5);
  heartbeat.unref();
  return {
    async release() {
      clearInterval(heartbeat);
      await backend.delete(key).catch(() => {});
    },
  };
}

/** The leases of backups still running (refreshed within LOCK_STALE_MS of `at`). */
async function readBackupLeases(backend: RepoBackend, at: number): Promise<BackupLease[]> {
  const leases: BackupLease[] = [];
  for (const key of await backend.list(BACKUP_LEASE_PREFIX)) {
    try {
      const lease = JSON.parse((await backend.get(key)).toString('utf8')) as BackupLease;
      if (typeof lease.startedAt === 'number' && typeof lease.time === 'number' && at - lease.time <= LOCK_STALE_MS) leases.push(lease);
    } catch (error) {
      if (!(error instanceof ObjectNotFoundError)) throw error; // ended since the listing
    }
  }
  return leases;
}

export interface PruneOptions {
  /** How long retired data is kept before deletion; must exceed the longest backup (and restore). Default 24 h. */
  readonly graceMs?: number;
  /**
   * Unused bytes tolerated in partly used packs, as a fraction of the packed bytes kept: above it
   * the most unused of them are rewritten until it holds. 0 rewrites every partly used pack, 1 none.
   * Default 0.05 (restic's `--max-unused`).
   */
  readonly maxUnusedFraction?: number;
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
  /** Index objects that could not be read: the packs they name are left alone. */
  readonly packsSkipped: number;
  /** Partly used packs rewritten (their live chunks copied to new packs) to bring the unused bytes under maxUnusedFraction. */
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
  /** Retirement batches past their grace but kept for a backup that started before them and still runs. */
  readonly batchesHeld: number;
  /** Retirement batches still waiting for their grace period (or for a running backup). */
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
  const maxUnused = options.maxUnusedFraction ?? DEFAULT_MAX_UNUSED_FRACTION;
  if (!Number.isFinite(graceMs) || graceMs < 0)
    throw new RepoError(RepoErrorCode.InvalidArgument, `prune: graceMs must be ≥ 0, got ${graceMs}`);
  if (!(maxUnused >= 0 && maxUnused <= 1))
    throw new RepoError(RepoErrorCode.InvalidArgument, `prune: maxUnusedFraction must be between 0 and 1, got ${maxUnused}`);
  const now = options.now ?? Date.now;
  const { store } = ctx;
  const { backend, keys } = store;
  const started = now();
  const lock = await acquireLock(ctx, now);
  try {
    const signal = options.signal;
    const progress = (phase: PruneProgress['phase'], done: number, total: number) => options.onProgress?.({ phase, done, total });
    // A retired index names one pack (it is named after it).
    const openIndex = (packId: string, sealed: Uint8Array): readonly IndexEntry[] =>
      openIndexObject(keys.encryptionKey, packId, sealed).find((p) => p.packId === packId)?.entries ?? [];

    // 0. What earlier runs retired, and retirements a crash left without a batch record.
    const batches: Batch[] = [];
    for (const key of await backend.list(BATCH_PREFIX)) {
      const id = baseName(key);
      if (!HEX_ID.test(id)) continue;
      batches.push(unsealJson(keys.encryptionKey, `prune-batch:${id}`, await backend.get(key)) as Batch);
    }
    const inBatch = new Set(batches.flatMap((b) => [...b.packs, ...b.loose]));
    // The index objects (several packs each, or one per pack as written before) and the packs they name.
    const indexes: { readonly name: string; readonly packs: readonly PackIndex[] }[] = [];
    const unreadableIndexes: string[] = [];
    for (const name of (await backend.list(INDEX_PREFIX)).map(baseName).filter((id) => HEX_ID.test(id))) {
      try {
        indexes.push({ name, packs: openIndexObject(keys.encryptionKey, name, await backend.get(indexKey(name))) });
      } catch {
        unreadableIndexes.push(name); // unreadable or gone: verify reports it; prune never deletes what it cannot read
      }
    }
    const current = new Set(indexes.flatMap((index) => index.packs.map((p) => p.packId)));
    const retirePacks: string[] = [];
    const retireLoose: string[] = [];
    for (const packId of (await backend.list(RETIRED_INDEX_PREFIX)).map(baseName)) {
      if (!HEX_ID.test(packId) || inBatch.has(packId)) continue;
      // An unreadable index may name it (an old one is named after its pack): leave it until that is resolved.
      if (unreadableIndexes.length > 0) continue;
      // Index still in place: the retirement was cut short before it happened; undo it. Otherwise it is retired as of this run.
      if (current.has(packId)) await backend.delete(retiredIndexKey(packId));
      else retirePacks.push(packId);
    }
    for (const chunkId of (await backend.list(RETIRED_LOOSE_PREFIX)).map(baseName)) {
      if (!CHUNK_ID.test(chunkId) || inBatch.has(chunkId)) continue;
      if (await backend.exists(looseKey(chunkId))) await backend.delete(retiredLooseKey(chunkId));
      else retireLoose.push(chunkId);
    }

    // Running backups, read before the snapshots are listed: one that ends after this wrote its
    // snapshot after the listing, so the retired data it may have deduplicated against is held.
    const leases = await readBackupLeases(ctx.store.backend, now());

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
    // A batch is held, whatever its age, while a backup that started before it was retired (and
    // so may deduplicate against it) still runs: a backup longer than the grace loses nothing.
    const due = batches.filter((b) => b.time + graceMs <= markStart && !leases.some((l) => l.startedAt <= b.time + CLOCK_SKEW_MS));
    const batchesHeld = batches.filter((b) => b.time + graceMs <= markStart).length - due.length;
    const needRescue = new Map<string, RescueSource>();
    const duePackBytes = new Map<string, number>();
    for (const batch of due) {
      for (const packId of batch.packs) {
        let entries: readonly IndexEntry[];
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

    // 3. Sweep the current packs: retire the wholly unused ones; rewrite partly used ones (most
    // unused first) only while their unused bytes exceed maxUnusedFraction — otherwise no pack is read.
    const packsSkipped = unreadableIndexes.length;
    const packs: { packId: string; entries: readonly IndexEntry[]; total: number; live: IndexEntry[]; liveBytes: number }[] = [];
    const seen = new Set<string>();
    for (const index of indexes) {
      for (const { packId, entries } of index.packs) {
        if (seen.has(packId)) continue; // named twice: a prune cut short between writing an index and deleting the old one
        seen.add(packId);
        signal?.throwIfAborted();
        const liveEntries = entries.filter((e) => live.has(e.id));
        packs.push({
          packId,
          entries,
          total: entries.reduce((sum, e) => sum + e.length, 0),
          live: liveEntries,
          liveBytes: liveEntries.reduce((sum, e) => sum + e.length, 0),
        });
        progress('sweep', packs.length, current.size);
      }
    }
    const writer = store.writer();
    let packsRewritten = 0;
    let bytesWritten = 0;
    let bytesRetired = 0;
    let usedBytes = 0;
    let unusedBytes = 0;
    const partlyUsed: typeof packs = [];
    for (const pack of packs) {
      if (pack.live.length === 0) {
        retirePacks.push(pack.packId);
        bytesRetired += pack.total;
        continue;
      }
      for (const e of pack.live) needRescue.delete(e.id);
      usedBytes += pack.liveBytes;
      if (pack.liveBytes < pack.total) {
        unusedBytes += pack.total - pack.liveBytes;
        partlyUsed.push(pack);
      }
    }
    // restic's rule: unused ≤ fraction × (used + unused), i.e. unused ≤ fraction / (1 − fraction) × used.
    const tolerated = maxUnused >= 1 ? Number.POSITIVE_INFINITY : (maxUnused / (1 - maxUnused)) * usedBytes;
    const unusedShare = (p: (typeof packs)[number]) => (p.total - p.liveBytes) / p.total;
    partlyUsed.sort((a, b) => unusedShare(b) - unusedShare(a));
    for (const pack of partlyUsed) {
      if (unusedBytes <= tolerated) break;
      signal?.throwIfAborted();
      const bytes = await backend.get(packKey(pack.packId));
      for (const e of pack.live) {
        await writer.appendSealed(e.id, bytes.subarray(e.offset, e.offset + e.length));
        bytesWritten += e.length;
      }
      packsRewritten++;
      retirePacks.push(pack.packId);
      bytesRetired += pack.total;
      unusedBytes -= pack.total - pack.liveBytes;
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

    // 5. Retire: a pack's entries are put under prune/retired-index/, then every index object naming
    // it is replaced by one without it (the new one put before the old one is deleted), so backups
    // starting from now on cannot see it; a loose file moves under prune/. The index objects that
    // change anyway, and small ones (one per backup), are merged into as few as INDEX_MAX_ENTRIES allows.
    await lock.assertHeld();
    const retiring = new Set(retirePacks.filter((packId) => current.has(packId)));
    const entriesOf = new Map(packs.map((p) => [p.packId, p.entries]));
    for (const [i, packId] of retirePacks.entries()) {
      signal?.throwIfAborted();
      if (retiring.has(packId)) {
        const retired: PackIndex = { packId, entries: entriesOf.get(packId) ?? [] };
        await backend.put(retiredIndexKey(packId), sealJson(keys.encryptionKey, `index:${packId}`, retired));
      }
      progress('retire', i + 1, retirePacks.length);
    }
    const namings = new Map<string, number>();
    for (const index of indexes) for (const { packId } of index.packs) namings.set(packId, (namings.get(packId) ?? 0) + 1);
    const entryCount = (index: (typeof indexes)[number]) => index.packs.reduce((sum, p) => sum + p.entries.length, 0);
    const small = indexes.filter((index) => entryCount(index) < INDEX_MAX_ENTRIES / 2);
    const rewrite = indexes.filter(
      (index) =>
        index.packs.some((p) => retiring.has(p.packId) || namings.get(p.packId)! > 1) || (small.length > 1 && small.includes(index)),
    );
    // Every object naming a pack twice is rewritten: each kept pack goes into exactly one new object.
    const kept = new Map<string, PackIndex>();
    for (const index of rewrite) for (const pack of index.packs) if (!retiring.has(pack.packId)) kept.set(pack.packId, pack);
    let group: PackIndex[] = [];
    let groupEntries = 0;
    const putGroup = async () => {
      if (group.length === 0) return;
      const name = randomId();
      await backend.put(indexKey(name), sealIndexObject(keys.encryptionKey, name, group));
      group = [];
      groupEntries = 0;
    };
    for (const pack of kept.values()) {
      if (groupEntries > 0 && groupEntries + pack.entries.length > INDEX_MAX_ENTRIES) await putGroup();
      group.push(pack);
      groupEntries += pack.entries.length;
    }
    await putGroup();
    for (const index of rewrite) {
      signal?.throwIfAborted();
      await backend.delete(indexKey(index.name));
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
    await lock.assertHeld();
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
      packsScanned: current.size,
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
      batchesHeld,
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
async function acquireLock(ctx: PruneContext, now: () => number): Promise<{ assertHeld(): Promise<void>; release(): Promise<void> }> {
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
  // Compare, then set: a run whose lock was taken over (it stalled past LOCK_STALE_MS) never
  // writes it back over the new holder's, and stops before retiring or deleting anything.
  let lost = false;
  const heartbeat = setInterval(() => {
    void (async () => {
      const holder = await readLock(ctx);
      if (holder?.runId !== runId) {
        lost = true;
        clearInterval(heartbeat);
        return;
      }
      await backend.put(PRUNE_LOCK_KEY, encode());
    })().catch(() => {});
  }, LOCK_STALE_MS / 5);
  heartbeat.unref();
  return {
    async assertHeld() {
      if (!lost && (await readLock(ctx))?.runId === runId) return;
      lost = true;
      throw new RepoError(
        RepoErrorCode.PruneLocked,
        'this prune lost the repository lock (it stalled and another prune took over); it stopped before retiring or deleting anything',
      );
    },
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
