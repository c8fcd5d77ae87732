import { createHash } from 'node:crypto';
import { StorageError, StorageErrorCode } from './errors.js';

export function sha256Hex(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Throws STORAGE_CHECKSUM_MISMATCH unless `data` hashes to `expected` (PutOptions.sha256). */
export function assertChecksum(key: string, data: Buffer | string, expected: string): void {
  const actual = sha256Hex(data);
  if (actual !== expected.toLowerCase()) {
    throw new StorageError(
      StorageErrorCode.checksumMismatch,
      `put of ${JSON.stringify(key)} refused: its bytes hash to sha256 ${actual}, the caller expected ${expected}`,
    );
  }
}
