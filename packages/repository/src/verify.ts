import { ObjectNotFoundError } from './backend.js';
import { type ChunkProblem, ChunkReadError, type ChunkStore } from './chunk-store.js';
import { errnoCode } from './errors.js';
import { looseKey, packKey, retiredLooseKey } from './layout.js';
import type { SnapshotManifest } from './snapshot.js';

export interface DamagedFileRef {
  readonly snapshotId: string;
  readonly path: string;
}

export interface DamagedChunk {
  readonly chunkId: string;
  readonly problem: ChunkProblem;
  /** What was found, for a person: which copy, why. */
  readonly detail: string;
  /** Files (in any snapshot) that cannot be restored because of this chunk. */
  readonly files: DamagedFileRef[];
}

export interface MissingRef {
  readonly snapshotId: string;
  readonly path: string;
  readonly chunkId: string;
}

export interface VerifyReport {
  /** True when nothing is damaged and every reference resolves. */
  readonly ok: boolean;
  readonly chunksChecked: number;
  readonly snapshotsChecked: number;
  /** Chunks with no good copy: missing (referenced but absent) or corrupt. */
  readonly damaged: DamagedChunk[];
  /** Every (snapshot, file, chunk) reference whose chunk has no good copy. */
  readonly missingRefs: MissingRef[];
  /** Snapshot manifests that do not decrypt or parse. */
  readonly damagedSnapshots: { readonly snapshotId: string; readonly detail: string }[];
  /** Pack indexes that do not decrypt (their chunks count as missing). */
  readonly damagedIndexes: { readonly packId: string; readonly detail: string }[];
  /** Extra copies that are damaged while another copy of the same chunk is good (restore still works). */
  readonly damagedCopies: number;
}

export interface VerifyOptions {
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: { chunksChecked: number }) => void;
}

/**
 * Reads every stored chunk copy, decrypts it and checks it hashes to its id; then reads every
 * snapshot manifest and checks each referenced chunk has a good copy.
 */
export async function runVerify(
  store: ChunkStore,
  snapshots: () => AsyncIterable<{ snapshotId: string; manifest?: SnapshotManifest; error?: string }>,
  options: VerifyOptions = {},
): Promise<VerifyReport> {
  await store.refreshIndexes();
  const good = new Set<string>();
  const bad = new Map<string, { problem: ChunkProblem; detail: string }>();
  let chunksChecked = 0;
  let damagedCopies = 0;
  const note = (chunkId: string, outcome: { problem: ChunkProblem; detail: string } | undefined) => {
    chunksChecked++;
    if (!outcome) {
      good.add(chunkId);
      return;
    }
    if (good.has(chunkId) || bad.has(chunkId)) damagedCopies++;
    else bad.set(chunkId, outcome);
  };
  const check = (chunkId: string, blob: Uint8Array) => {
    try {
      store.openBlob(chunkId, blob);
      return undefined;
    } catch (error) {
      if (error instanceof ChunkReadError) return { problem: error.problem, detail: error.message };
      throw error;
    }
  };

  // Packs: read each whole pack once, check each indexed blob in it.
  const byPack = new Map<string, { chunkId: string; offset: number; length: number }[]>();
  // Retired packs (prune's grace period) hold good copies too until prune deletes them.
  const currentPacks = new Set<string>();
  const retiredPacks = new Set<string>();
  for (const [source, packIds] of [
    [store.packedChunks(), currentPacks],
    [store.retiredChunks(), retiredPacks],
  ] as const) {
    for (const [chunkId, locations] of source) {
      for (const location of locations) {
        if (location.kind !== 'pack') continue;
        packIds.add(location.packId);
        const list = byPack.get(location.packId) ?? [];
        list.push({ chunkId, offset: location.offset, length: location.length });
        byPack.set(location.packId, list);
      }
    }
  }
  for (const [packId, entries] of byPack) {
    options.signal?.throwIfAborted();
    let pack: Buffer | undefined;
    let packProblem = '';
    try {
      pack = await store.backend.get(packKey(packId));
    } catch (error) {
      // A retired pack whose file is gone is one prune was deleting when it stopped (it deletes the
      // pack first, its retired index last, and the next run finishes). Not damage: its chunks are
      // garbage unless a snapshot still needs one, and then that snapshot's check below reports it.
      if (error instanceof ObjectNotFoundError && retiredPacks.has(packId) && !currentPacks.has(packId)) continue;
      packProblem =
        error instanceof ObjectNotFoundError ? `its pack ${packId} is missing` : `its pack ${packId} cannot be read (${errnoCode(error)})`;
    }
    for (const entry of entries) {
      if (!pack) {
        note(entry.chunkId, { problem: 'missing', detail: `chunk ${entry.chunkId} is missing: ${packProblem}` });
      } else if (entry.offset + entry.length > pack.length) {
        note(entry.chunkId, { problem: 'corrupt', detail: `chunk ${entry.chunkId} is damaged: its pack ${packId} is truncated` });
      } else {
        note(entry.chunkId, check(entry.chunkId, pack.subarray(entry.offset, entry.offset + entry.length)));
      }
    }
    options.onProgress?.({ chunksChecked });
  }
  const loose = [
    ...(await store.listLoose()).map((chunkId) => ({ chunkId, key: looseKey(chunkId) })),
    ...(await store.listRetiredLoose()).map((chunkId) => ({ chunkId, key: retiredLooseKey(chunkId) })),
  ];
  for (const { chunkId, key } of loose) {
    options.signal?.throwIfAborted();
    let blob: Buffer;
    try {
      blob = await store.backend.get(key);
    } catch (error) {
      note(chunkId, { problem: 'missing', detail: `chunk ${chunkId} cannot be read (${errnoCode(error)})` });
      continue;
    }
    note(chunkId, check(chunkId, blob));
    if (chunksChecked % 64 === 0) options.onProgress?.({ chunksChecked });
  }
  // A copy that failed may have a good twin found later.
  for (const chunkId of good) {
    if (bad.delete(chunkId)) damagedCopies++;
  }

  const damaged = new Map<string, DamagedChunk>();
  for (const [chunkId, outcome] of bad) damaged.set(chunkId, { chunkId, ...outcome, files: [] });
  const missingRefs: MissingRef[] = [];
  const damagedSnapshots: { snapshotId: string; detail: string }[] = [];
  let snapshotsChecked = 0;
  for await (const { snapshotId, manifest, error } of snapshots()) {
    snapshotsChecked++;
    if (!manifest) {
      damagedSnapshots.push({ snapshotId, detail: error ?? 'unreadable' });
      continue;
    }
    for (const entry of manifest.entries) {
      for (const chunkId of new Set(entry.chunks ?? [])) {
        if (good.has(chunkId)) continue;
        let report = damaged.get(chunkId);
        if (!report) {
          report = { chunkId, problem: 'missing', detail: `chunk ${chunkId} is referenced but not stored`, files: [] };
          damaged.set(chunkId, report);
        }
        report.files.push({ snapshotId, path: entry.path });
        missingRefs.push({ snapshotId, path: entry.path, chunkId });
      }
    }
  }
  const damagedIndexes = [...store.unreadableIndexes].map(([packId, detail]) => ({ packId, detail }));
  const damagedList = [...damaged.values()];
  return {
    ok: damagedList.length === 0 && missingRefs.length === 0 && damagedSnapshots.length === 0 && damagedIndexes.length === 0,
    chunksChecked,
    snapshotsChecked,
    damaged: damagedList,
    missingRefs,
    damagedSnapshots,
    damagedIndexes,
    damagedCopies,
  };
}
