import { stat } from 'node:fs/promises';
import { hostname } from 'node:os';
import { DirectoryBackend, ObjectExistsError, ObjectNotFoundError, type RepoBackend } from './backend.js';
import { type BackupOptions, type BackupResult, runBackup } from './backup.js';
import { unseal } from './blob.js';
import { ChunkStore } from './chunk-store.js';
import { Chunker, type ChunkerParams, DEFAULT_CHUNKER_PARAMS, validateChunkerParams } from './chunker.js';
import { errnoCode, isRepoError, RepoError, RepoErrorCode } from './errors.js';
import { deriveRepoKeys, type KdfParams, keyCheckMatches, newKdfParams, type RepoKeys, requireKey } from './keys.js';
import { LargeFileHasher } from './large-file-hasher.js';
import { baseName, CONFIG_KEY, HEX_ID, randomId, SNAPSHOT_PREFIX, snapshotKey } from './layout.js';
import { type PruneOptions, type PruneSummary, runPrune } from './prune.js';
import { type RestoreOptions, type RestoreResult, runRestore } from './restore.js';
import { defaultReadThreads, SmallFileReaderPool } from './small-file-reader.js';
import { isSameVolume, type SnapshotManifest, type SnapshotSummary, summaryOf, summaryOfManifestJson } from './snapshot.js';
import { runVerify, type VerifyOptions, type VerifyReport } from './verify.js';

/** `config.json`: plaintext, holds nothing secret (salt and key-check value only). */
export interface RepoConfig {
  readonly format: 'stowage-repository';
  readonly version: 1;
  readonly id: string;
  readonly createdAt: string;
  readonly kdf: KdfParams;
  readonly keyCheckB64: string;
  readonly chunker: ChunkerParams;
  /** Chunks up to this many bytes are packed; larger ones are stored one file each. */
  readonly packBlobMaxBytes: number;
  readonly packTargetBytes: number;
}

export interface InitOptions {
  readonly dir: string;
  /** The master key (STOWAGE_REPO_KEY). Required: there is no default. */
  readonly key: string;
  readonly chunker?: Partial<ChunkerParams>;
  /** 0 stores every chunk as its own file (used by the benchmark to compare). Default 512 KiB - 1. */
  readonly packBlobMaxBytes?: number;
  readonly packTargetBytes?: number;
  /** fsync data before it becomes visible. Default true. */
  readonly durable?: boolean;
  /** Where the objects live; default a DirectoryBackend on `dir` (`dir` then only names it in messages). */
  readonly backend?: RepoBackend;
}

export interface OpenOptions {
  readonly dir: string;
  readonly key: string;
  readonly durable?: boolean;
  /** Where the objects live; default a DirectoryBackend on `dir` (`dir` then only names it in messages). */
  readonly backend?: RepoBackend;
}

/** Every chunk is packed (up to the chunker's maximum); see README "Packs for every chunk size". */
const PACK_EVERY_CHUNK = Number.MAX_SAFE_INTEGER;
/** The default before packs for every size: repositories created with it pack every new chunk now (old loose chunks stay readable). */
const OLD_DEFAULT_PACK_BLOB_MAX_BYTES = 512 * 1024 - 1;
const DEFAULT_PACK_TARGET_BYTES = 16 * 1024 * 1024;

export class Repository {
  private constructor(
    readonly dir: string,
    readonly config: RepoConfig,
    private readonly keys: RepoKeys,
    private readonly store: ChunkStore,
    private readonly chunker: Chunker,
  ) {}

  /** Creates a repository in `dir` (created if missing; must not already hold one) and opens it. */
  static async init(options: InitOptions): Promise<Repository> {
    const key = requireKey(options.key);
    const chunker: ChunkerParams = { ...DEFAULT_CHUNKER_PARAMS, ...(options.chunker ?? {}) };
    const problem = validateChunkerParams(chunker);
    if (problem) throw new RepoError(RepoErrorCode.InvalidArgument, `invalid chunker sizes: ${problem}`);
    const backend = options.backend ?? new DirectoryBackend(options.dir, options.durable ?? true);
    if (backend instanceof DirectoryBackend) {
      try {
        await backend.createLayout();
      } catch (cause) {
        throw unreachable(options.dir, cause);
      }
    }
    const kdf = newKdfParams();
    const keys = await deriveRepoKeys(key, kdf);
    const config: RepoConfig = {
      format: 'stowage-repository',
      version: 1,
      id: randomId(),
      createdAt: new Date().toISOString(),
      kdf,
      keyCheckB64: keys.keyCheck.toString('base64'),
      chunker,
      packBlobMaxBytes: options.packBlobMaxBytes ?? PACK_EVERY_CHUNK,
      packTargetBytes: options.packTargetBytes ?? DEFAULT_PACK_TARGET_BYTES,
    };
    try {
      // Exclusive, so two inits never overwrite each other's config.
      await backend.put(CONFIG_KEY, Buffer.from(`${JSON.stringify(config, null, 2)}\n`), { exclusive: true });
    } catch (cause) {
      if (cause instanceof ObjectExistsError) {
        throw new RepoError(RepoErrorCode.AlreadyInitialised, `${options.dir} already holds a Stowage repository; open it instead`, {
          cause,
          details: { dir: options.dir },
        });
      }
      throw unreachable(options.dir, cause);
    }
    return Repository.fromConfig(options.dir, backend, config, keys);
  }

  /** Opens an existing repository; a wrong key fails with REPO_WRONG_KEY before anything is read. */
  static async open(options: OpenOptions): Promise<Repository> {
    const key = requireKey(options.key);
    if (!options.backend) {
      try {
        const st = await stat(options.dir);
        if (!st.isDirectory()) throw new RepoError(RepoErrorCode.Unreachable, `the repository path ${options.dir} is not a directory`);
      } catch (cause) {
        if (isRepoError(cause)) throw cause;
        throw unreachable(options.dir, cause);
      }
    }
    const backend = options.backend ?? new DirectoryBackend(options.dir, options.durable ?? true);
    let raw: string;
    try {
      raw = (await backend.get(CONFIG_KEY)).toString('utf8');
    } catch (cause) {
      if (cause instanceof ObjectNotFoundError) {
        throw new RepoError(RepoErrorCode.NotInitialised, `${options.dir} holds no Stowage repository (no config.json); run init first`, {
          cause,
          details: { dir: options.dir },
        });
      }
      throw unreachable(options.dir, cause);
    }
    const config = parseConfig(options.dir, raw);
    const keys = await deriveRepoKeys(key, config.kdf);
    if (!keyCheckMatches(keys, config.keyCheckB64)) {
      throw new RepoError(RepoErrorCode.WrongKey, 'the repository key does not match this repository', { details: { dir: options.dir } });
    }
    return Repository.fromConfig(options.dir, backend, config, keys);
  }

  private static async fromConfig(dir: string, backend: RepoBackend, config: RepoConfig, keys: RepoKeys): Promise<Repository> {
    const store = new ChunkStore(backend, keys, {
      packBlobMaxBytes: config.packBlobMaxBytes === OLD_DEFAULT_PACK_BLOB_MAX_BYTES ? PACK_EVERY_CHUNK : config.packBlobMaxBytes,
      packTargetBytes: config.packTargetBytes,
    });
    try {
      await store.refreshIndexes();
    } catch (cause) {
      throw unreachable(dir, cause);
    }
    return new Repository(dir, config, keys, store, new Chunker(config.chunker, keys.chunkerSeed));
  }

  /** Backs up `sourceDir` into a new snapshot. Rejects with REPO_BACKUP_CANCELED on abort (no snapshot written). */
  async backup(sourceDir: string, options: BackupOptions = {}): Promise<BackupResult> {
    return runBackup(
      {
        dir: this.dir,
        keys: this.keys,
        store: this.store,
        chunker: this.chunker,
        readThreads: defaultReadThreads(),
        readers: this.smallFileReaders(),
        hashers: this.largeFileHashers(),
        findParent: (source, tags) => this.findParent(source, tags),
      },
      sourceDir,
      options,
    );
  }

  /** Rebuilds a snapshot under `targetDir`; REPO_CHUNK_CORRUPT names the chunk and file if any chunk is bad. */
  async restore(snapshotId: string, targetDir: string, options: RestoreOptions = {}): Promise<RestoreResult> {
    const manifest = await this.getSnapshot(snapshotId);
    return runRestore(this.store, manifest, targetDir, options, defaultReadThreads());
  }

  verify(options: VerifyOptions = {}): Promise<VerifyReport> {
    const self = this;
    return runVerify(
      this.store,
      async function* () {
        for (const snapshotId of await self.snapshotIds()) {
          try {
            yield { snapshotId, manifest: await self.getSnapshot(snapshotId) };
          } catch (error) {
            yield { snapshotId, error: error instanceof Error ? error.message : String(error) };
          }
        }
      },
      options,
    );
  }

  /**
   * Garbage collection, safe while backups run (README "Prune"): retires unused packs and loose
   * chunks, rewrites mostly-unused packs, deletes what an earlier run retired at least `graceMs` ago.
   */
  prune(options: PruneOptions = {}): Promise<PruneSummary> {
    return runPrune({ store: this.store, snapshotIds: () => this.snapshotIds(), getSnapshot: (id) => this.getSnapshot(id) }, options);
  }

  /**
   * Deletes every snapshot whose tags include all of `tags` (e.g. `{backup: name}`: a deleted
   * backup's snapshots) and returns their ids. Idempotent: run again after a crash, it deletes
   * what is left. Their chunks stay until prune.
   */
  async forget(tags: Readonly<Record<string, string>>): Promise<string[]> {
    const wanted = Object.entries(tags);
    if (wanted.length === 0) throw new RepoError(RepoErrorCode.InvalidArgument, 'forget: give at least one tag (e.g. backup=<name>)');
    const forgotten: string[] = [];
    for (const id of await this.snapshotIds()) {
      let summary = this.summaries.get(id);
      if (!summary) {
        try {
          summary = await this.readSummary(id);
        } catch (error) {
          if (isRepoError(error, RepoErrorCode.SnapshotNotFound)) continue; // forgotten by a concurrent call
          throw error;
        }
        this.summaries.set(id, summary);
      }
      if (!wanted.every(([key, value]) => summary.tags[key] === value)) continue;
      try {
        await this.store.backend.delete(snapshotKey(id));
      } catch (cause) {
        throw unreachable(this.dir, cause);
      }
      this.summaries.delete(id);
      forgotten.push(id);
    }
    return forgotten;
  }

  /** The worker threads this repository's backups share (README "Pipeline"), made by the first backup. */
  private readers: SmallFileReaderPool | undefined;
  private hashers: LargeFileHasher | undefined;

  private smallFileReaders(): SmallFileReaderPool {
    this.readers ??= new SmallFileReaderPool(defaultReadThreads());
    return this.readers;
  }

  private largeFileHashers(): LargeFileHasher {
    this.hashers ??= new LargeFileHasher(defaultReadThreads(), {
      chunker: this.chunker.params,
      chunkerSeed: this.keys.chunkerSeed,
      chunkIdKey: this.keys.chunkIdKey,
      encryptionKey: this.keys.encryptionKey,
    });
    return this.hashers;
  }

  /**
   * Stops the threads kept between backups now. Optional: idle, they never hold the process open
   * and stop by themselves after THREADS_IDLE_MS; a backup still running fails, a later one starts
   * threads again.
   */
  async close(): Promise<void> {
    const { readers, hashers } = this;
    this.readers = undefined;
    this.hashers = undefined;
    await Promise.all([readers?.close(), hashers?.close()]);
  }

  /** Summaries of snapshots read so far: snapshots never change, so each is decrypted once per process. */
  private readonly summaries = new Map<string, SnapshotSummary>();

  /** The newest snapshot of the same volume (see isSameVolume); undefined if none or if it cannot be read. */
  private async findParent(source: string, tags: Readonly<Record<string, string>>): Promise<SnapshotManifest | undefined> {
    const host = hostname();
    let newest: SnapshotSummary | undefined;
    // The decrypted manifest of `newest` when this call read it: parsed below instead of being
    // read and decrypted a second time (~50 ms per 20,000 files, in every fresh process).
    let newestJson: Buffer | undefined;
    for (const id of await this.snapshotIds()) {
      let summary = this.summaries.get(id);
      let json: Buffer | undefined;
      if (!summary) {
        try {
          json = await this.readSnapshot(id, (decrypted) => decrypted);
          summary = summaryOfJson(json, id);
        } catch {
          continue; // a damaged snapshot is verify's to report; it is just not a parent
        }
        this.summaries.set(id, summary);
      }
      if (!isSameVolume(summary, source, host, tags)) continue;
      if (!newest || summary.time > newest.time || (summary.time === newest.time && summary.id > newest.id)) {
        newest = summary;
        newestJson = json;
      }
    }
    if (!newest) return undefined;
    if (newestJson) {
      try {
        return parseManifest(newestJson, newest.id);
      } catch {
        return undefined;
      }
    }
    return this.getSnapshot(newest.id).catch(() => undefined);
  }

  /** Every snapshot's summary (no file list), oldest first. */
  async listSnapshots(): Promise<SnapshotSummary[]> {
    const summaries: SnapshotSummary[] = [];
    for (const id of await this.snapshotIds()) summaries.push(await this.readSummary(id));
    return summaries.sort((a, b) => a.time.localeCompare(b.time) || a.id.localeCompare(b.id));
  }

  getSnapshot(snapshotId: string): Promise<SnapshotManifest> {
    return this.readSnapshot(snapshotId, (json) => parseManifest(json, snapshotId));
  }

  /** Decrypted and authenticated like the whole manifest, but without parsing its file list. */
  private readSummary(snapshotId: string): Promise<SnapshotSummary> {
    return this.readSnapshot(snapshotId, (json) => summaryOfJson(json, snapshotId));
  }

  /** Reads, decrypts and authenticates `snapshots/<id>`, then `parse`s its JSON; a failure of either is REPO_SNAPSHOT_CORRUPT. */
  private async readSnapshot<T>(snapshotId: string, parse: (json: Buffer) => T): Promise<T> {
    if (!HEX_ID.test(snapshotId)) {
      throw new RepoError(RepoErrorCode.SnapshotNotFound, `no snapshot ${JSON.stringify(snapshotId)}: snapshot ids are 32 hex characters`);
    }
    let blob: Buffer;
    try {
      blob = await this.store.backend.get(snapshotKey(snapshotId));
    } catch (cause) {
      if (cause instanceof ObjectNotFoundError) {
        throw new RepoError(RepoErrorCode.SnapshotNotFound, `no snapshot ${snapshotId} in the repository at ${this.dir}`, {
          cause,
          details: { snapshotId },
        });
      }
      throw unreachable(this.dir, cause);
    }
    try {
      return parse(unseal(this.keys.encryptionKey, `snapshot:${snapshotId}`, blob));
    } catch (cause) {
      throw new RepoError(RepoErrorCode.SnapshotCorrupt, `snapshot ${snapshotId} is damaged and cannot be read`, {
        cause,
        details: { snapshotId },
      });
    }
  }

  private async snapshotIds(): Promise<string[]> {
    try {
      return (await this.store.backend.list(SNAPSHOT_PREFIX)).map(baseName).filter((name) => HEX_ID.test(name));
    } catch (cause) {
      throw unreachable(this.dir, cause);
    }
  }
}

function summaryOfJson(json: Buffer, snapshotId: string): SnapshotSummary {
  return summaryOfManifestJson(json, snapshotId) ?? summaryOf(parseManifest(json, snapshotId));
}

function parseManifest(json: Buffer, snapshotId: string): SnapshotManifest {
  const manifest = JSON.parse(json.toString('utf8')) as SnapshotManifest;
  if (manifest.formatVersion !== 1 || manifest.id !== snapshotId) throw new Error(`unexpected format ${manifest.formatVersion}`);
  return manifest;
}

function parseConfig(dir: string, raw: string): RepoConfig {
  let config: RepoConfig;
  try {
    config = JSON.parse(raw) as RepoConfig;
  } catch (cause) {
    throw new RepoError(RepoErrorCode.FormatUnsupported, `the repository config ${dir}/${CONFIG_KEY} is not valid JSON`, { cause });
  }
  if (config?.format !== 'stowage-repository' || config.version !== 1 || config.kdf?.name !== 'scrypt' || !config.keyCheckB64) {
    throw new RepoError(
      RepoErrorCode.FormatUnsupported,
      `the repository config ${dir}/${CONFIG_KEY} has format ${String(config?.format)} version ${String(config?.version)}; this Stowage reads version 1`,
    );
  }
  return config;
}

function unreachable(dir: string, cause: unknown): RepoError {
  const code = errnoCode(cause);
  const why =
    code === 'ENOENT'
      ? 'it does not exist'
      : code === 'EACCES' || code === 'EPERM'
        ? 'permission denied'
        : code === 'ENOTDIR'
          ? 'a path component is not a directory'
          : (code ?? (cause instanceof Error ? cause.message : String(cause)));
  return new RepoError(RepoErrorCode.Unreachable, `the repository at ${dir} cannot be reached: ${why}`, { cause, details: { dir } });
}
