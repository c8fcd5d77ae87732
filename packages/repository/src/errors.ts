/**
 * The one catalogue of error codes of @stowage/repository. Callers (the node agent, the CLI)
 * switch on `code`; `message` is written for the person who has to act on it.
 */
export const RepoErrorCode = {
  /** No key was given: the repository key must come from STOWAGE_REPO_KEY or a Secret. */
  KeyMissing: 'REPO_KEY_MISSING',
  /** The key does not match the key-check value stored at init. */
  WrongKey: 'REPO_WRONG_KEY',
  /** The repository directory exists but holds no repository config. */
  NotInitialised: 'REPO_NOT_INITIALISED',
  /** `init` on a directory that already holds a repository. */
  AlreadyInitialised: 'REPO_ALREADY_INITIALISED',
  /** The repository directory cannot be reached (missing, not a directory, no permission, I/O error). */
  Unreachable: 'REPO_UNREACHABLE',
  /** The repository config is written in a format this version does not understand. */
  FormatUnsupported: 'REPO_FORMAT_UNSUPPORTED',
  /** The directory to back up does not exist. */
  SourceMissing: 'REPO_SOURCE_MISSING',
  /** The path to back up exists but is not a directory. */
  SourceNotDirectory: 'REPO_SOURCE_NOT_DIRECTORY',
  /** A file or directory of the source cannot be read (permission denied). */
  SourceUnreadable: 'REPO_SOURCE_UNREADABLE',
  /** The backup was cancelled through its AbortSignal; no snapshot was written. */
  BackupCanceled: 'REPO_BACKUP_CANCELED',
  /** Writing chunks, packs or the snapshot into the repository failed. */
  WriteFailed: 'REPO_WRITE_FAILED',
  /** No snapshot with this id. */
  SnapshotNotFound: 'REPO_SNAPSHOT_NOT_FOUND',
  /** A snapshot manifest does not decrypt or parse. */
  SnapshotCorrupt: 'REPO_SNAPSHOT_CORRUPT',
  /** A chunk is missing, does not decrypt, or does not hash to its id. */
  ChunkCorrupt: 'REPO_CHUNK_CORRUPT',
  /** The restore target cannot be used (not a directory, not writable). */
  RestoreTargetInvalid: 'REPO_RESTORE_TARGET_INVALID',
  /** A directory of the restore target was swapped (for a link or another directory) while the restore wrote there. */
  RestoreTargetChanged: 'REPO_RESTORE_TARGET_CHANGED',
  /** Bad argument to an API call (a programming error on the caller's side). */
  InvalidArgument: 'REPO_INVALID_ARGUMENT',
  /** Another prune holds the repository's prune lock (and is alive). */
  PruneLocked: 'REPO_PRUNE_LOCKED',
  /** Prune stopped before deleting anything it could not prove unused (an unreadable snapshot, a live chunk with no copy left). */
  PruneUnsafe: 'REPO_PRUNE_UNSAFE',
} as const;

export type RepoErrorCode = (typeof RepoErrorCode)[keyof typeof RepoErrorCode];

export class RepoError extends Error {
  override readonly name = 'RepoError';
  readonly code: RepoErrorCode;
  /** Structured facts for logs and callers (paths, chunk ids), never secrets. */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: RepoErrorCode, message: string, options: { cause?: unknown; details?: Record<string, unknown> } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = Object.freeze({ ...(options.details ?? {}) });
  }
}

export function isRepoError(error: unknown, code?: RepoErrorCode): error is RepoError {
  return error instanceof RepoError && (code === undefined || error.code === code);
}

/** The errno code of a Node system error, if it is one. */
export function errnoCode(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof (error as { code: unknown }).code === 'string') {
    return (error as { code: string }).code;
  }
  return undefined;
}
