import { StorageError, StorageErrorCode } from './errors.js';

/** S3's limit, so a key valid here is valid in an object store too. */
export const MAX_KEY_BYTES = 1024;

/** Temp files of atomic writes start with this; no key segment may, so they never show up as objects. */
export const TEMP_FILE_MARKER = '.stowage-tmp-';

function explainKey(key: string, allowTrailingSlash: boolean): string | undefined {
  if (key.includes('\0')) return 'contains a NUL byte';
  if (key.includes('\\')) return "contains '\\'; use '/' between segments";
  if (key.startsWith('/')) return 'is absolute; keys are relative to the storage root';
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) return `is longer than ${MAX_KEY_BYTES} bytes`;
  const segments = (allowTrailingSlash && key.endsWith('/') ? key.slice(0, -1) : key).split('/');
  for (const segment of segments) {
    if (segment === '') return 'has an empty segment (leading, trailing or double /)';
    if (segment === '.' || segment === '..') return `has a '${segment}' segment`;
    if (segment.startsWith(TEMP_FILE_MARKER)) return `has a segment starting with the reserved '${TEMP_FILE_MARKER}'`;
  }
  return undefined;
}

/** Throws STORAGE_BAD_KEY unless `key` names an object: relative, '/'-separated, no `.`/`..`/empty segments. */
export function assertValidKey(key: string): void {
  if (key === '') throw new StorageError(StorageErrorCode.badKey, 'key must not be empty');
  const problem = explainKey(key, false);
  if (problem) throw new StorageError(StorageErrorCode.badKey, `key ${JSON.stringify(key)} ${problem}`);
}

/** Like assertValidKey, but '' (everything) and a trailing '/' are allowed. */
export function assertValidPrefix(prefix: string): void {
  if (prefix === '') return;
  const problem = explainKey(prefix, true);
  if (problem) throw new StorageError(StorageErrorCode.badKey, `prefix ${JSON.stringify(prefix)} ${problem}`);
}

/** Throws STORAGE_BAD_KEY unless offset and length are whole numbers (length ≥ 1) for a ranged read. */
export function assertRange(key: string, offset: number, length: number): void {
  if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 1) {
    throw new StorageError(
      StorageErrorCode.badKey,
      `range ${offset}+${length} of ${JSON.stringify(key)} is not a whole offset ≥ 0 and length ≥ 1`,
    );
  }
}

/** Throws STORAGE_BAD_NAME unless `value` can be one path segment (no '/', not '.'/'..', not empty). */
export function assertPathSegment(kind: string, value: string): void {
  if (value === '' || value === '.' || value === '..' || value.includes('/') || value.includes('\\') || value.includes('\0')) {
    throw new StorageError(StorageErrorCode.badName, `${kind} ${JSON.stringify(value)} cannot be used as a path segment`);
  }
  if (value.startsWith(TEMP_FILE_MARKER)) {
    throw new StorageError(StorageErrorCode.badName, `${kind} ${JSON.stringify(value)} starts with the reserved '${TEMP_FILE_MARKER}'`);
  }
}
