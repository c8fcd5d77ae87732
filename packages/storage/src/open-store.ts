import type { ObjectStore } from './backup-storage.js';
import { StorageUnavailableError } from './errors.js';
import { FileSystemStorage } from './file-system-storage.js';
import { S3Storage } from './s3-storage.js';

/** Where the store is: the shape of @stowage/platform's StorageLocation (STOWAGE_STORAGE, STOWAGE_S3_*). */
export type ObjectStoreLocation =
  | { kind: 'filesystem'; path: string }
  | { kind: 's3'; bucket: string; prefix: string; endpoint?: string; region?: string; forcePathStyle: boolean };

/** The backend for a configured location. Credentials for S3 come from the standard AWS chain. */
export function openObjectStore(location: ObjectStoreLocation): ObjectStore {
  if (location.kind === 'filesystem') return new FileSystemStorage(location.path);
  return new S3Storage({
    bucket: location.bucket,
    prefix: location.prefix,
    forcePathStyle: location.forcePathStyle,
    ...(location.endpoint ? { endpoint: location.endpoint } : {}),
    ...(location.region ? { region: location.region } : {}),
  });
}

const CREDENTIAL_VARIABLES = 'AWS credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or a web identity)';

/** The setting a user must fix, for one line at start: the variable first. */
function subjectOf(err: StorageUnavailableError, location: ObjectStoreLocation): string {
  switch (err.reason) {
    case 'bucket':
    case 'directory':
      return 'STOWAGE_STORAGE';
    case 'credentials':
      return CREDENTIAL_VARIABLES;
    case 'endpoint':
      return location.kind === 's3' && location.endpoint ? 'STOWAGE_S3_ENDPOINT' : 'STOWAGE_S3_REGION';
  }
}

export type OpenCheckedResult = { ok: true; store: ObjectStore } | { ok: false; message: string };

/**
 * Opens the store and checks it can be used (bucket exists, credentials accepted, endpoint
 * reachable, directory writable) before a service starts serving. A failure is one line naming
 * the variable to fix, e.g. `STOWAGE_STORAGE (s3://backups/prod): bucket "backups" does not exist at http://minio:9000`.
 */
export async function openCheckedObjectStore(location: ObjectStoreLocation): Promise<OpenCheckedResult> {
  const store = openObjectStore(location);
  try {
    await store.checkAccess();
    return { ok: true, store };
  } catch (err) {
    (store as { close?: () => void }).close?.();
    if (err instanceof StorageUnavailableError) {
      const subject = subjectOf(err, location);
      const shown = subject === 'STOWAGE_STORAGE' ? `STOWAGE_STORAGE (${store.location})` : subject;
      return { ok: false, message: `${shown}: ${err.message.replace(/^STORAGE_UNAVAILABLE: /, '')}` };
    }
    return { ok: false, message: `STOWAGE_STORAGE (${store.location}): cannot be used: ${(err as Error).message}` };
  }
}
