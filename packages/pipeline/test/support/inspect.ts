import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { type BackupStorage, readGzipJson } from '@stowage/storage';

/** Entry paths of a backup's tarball, read with the system tar (real bytes on disk). */
export function tarballEntries(storageDir: string, backupName: string): string[] {
  const path = join(storageDir, 'backups', backupName, `${backupName}.tar.gz`);
  return execFileSync('tar', ['-tzf', path], { encoding: 'utf8' }).split('\n').filter(Boolean).sort();
}

export async function sidecar<T>(storage: BackupStorage, backupName: string, suffix: string): Promise<T> {
  return (await readGzipJson(storage, `backups/${backupName}/${backupName}${suffix}`)) as T;
}
