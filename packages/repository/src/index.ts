export { DirectoryBackend, ObjectExistsError, ObjectNotFoundError, type ObjectUpload, type RepoBackend } from './backend.js';
export type { BackupOptions, BackupProgress, BackupResult, BackupStats } from './backup.js';
export { Chunker, type ChunkerParams, DEFAULT_CHUNKER_PARAMS } from './chunker.js';
export {
  type CliIo,
  ExitCode,
  formatPruneSummary,
  formatVerifyReport,
  parseDurationMs,
  repoForgetCommand,
  repoPruneCommand,
  repoRestoreCommand,
  repoSnapshotsCommand,
  repoVerifyCommand,
  runRepoCli,
} from './cli.js';
export { atDir, closeDir, type DirRef, makeDirAt, openDir, openDirAt, removeAt } from './dir-fd.js';
export { isRepoError, RepoError, RepoErrorCode } from './errors.js';
export { ObjectStoreBackend } from './object-store-backend.js';
export {
  DEFAULT_MAX_UNUSED_FRACTION,
  DEFAULT_PRUNE_GRACE_MS,
  type PruneOptions,
  type PruneProgress,
  type PruneSummary,
} from './prune.js';
export { type InitOptions, type OpenOptions, type RepoConfig, Repository } from './repository.js';
export type { RestoreOptions, RestoreResult } from './restore.js';
export type { EntryType, SnapshotManifest, SnapshotSummary, SnapshotTotals, TreeEntry } from './snapshot.js';
export { IDENTIFYING_TAGS } from './snapshot.js';
export { abortableSleep, TokenBucket, type TokenBucketOptions } from './token-bucket.js';
export type { SkippedEntry } from './tree-walk.js';
export type { DamagedChunk, DamagedFileRef, MissingRef, VerifyOptions, VerifyReport } from './verify.js';
