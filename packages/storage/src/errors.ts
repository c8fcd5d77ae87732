/** Error codes of @stowage/storage (one catalogue). */
export const StorageErrorCode = {
  /** A key or prefix is not a safe relative path (absolute, `..`, empty segment, …). */
  badKey: 'STORAGE_BAD_KEY',
  /** A backup name or item field cannot be used as one path segment. */
  badName: 'STORAGE_BAD_NAME',
  /** A staged segment or item is not what stageItems wrote (cut or lost by a machine crash). */
  corruptItem: 'STORAGE_CORRUPT_ITEM',
  /** An object's bytes do not match the checksum or size recorded when it was written (cut or changed since). */
  corruptObject: 'STORAGE_CORRUPT_OBJECT',
  /** A put's bytes do not match the checksum the caller passed (PutOptions.sha256); nothing was written. */
  checksumMismatch: 'STORAGE_CHECKSUM_MISMATCH',
  /** A create-only put (PutOptions.ifAbsent) found an object at the key; nothing was written. */
  exists: 'STORAGE_EXISTS',
  /** The store cannot be used: bucket missing, credentials refused, endpoint unreachable (checkAccess). */
  unavailable: 'STORAGE_UNAVAILABLE',
  /** The backend failed (disk full, permissions, …); `cause` holds the original error. */
  io: 'STORAGE_IO',
} as const;
export type StorageErrorCode = (typeof StorageErrorCode)[keyof typeof StorageErrorCode];

export class StorageError extends Error {
  override readonly name = 'StorageError';
  constructor(
    readonly code: StorageErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${message}`, options);
  }
}

/** What checkAccess found wrong, so a service can name the setting to fix. */
export type UnavailableReason = 'bucket' | 'credentials' | 'endpoint' | 'directory';

/** STORAGE_UNAVAILABLE from checkAccess: `reason` says which setting is at fault. */
export class StorageUnavailableError extends StorageError {
  constructor(
    readonly reason: UnavailableReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(StorageErrorCode.unavailable, message, options);
  }
}
