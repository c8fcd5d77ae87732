import type { KubeClients, PvbClient } from '@stowage/kube';
import { pvbLabels } from '@stowage/kube';
import { type BackupStorage, backupLayout } from '@stowage/storage';
import type { BackupState } from '../state/backup-state.js';
import { type DeletedSnapshot, deleteKeptSnapshots } from './delete-snapshots.js';
import type { RepositoryGc } from './repository-gc.js';

export interface DeleteBackupDeps {
  state: BackupState;
  storage: Pick<BackupStorage, 'deletePrefix' | 'getObject'>;
  /** When given, the backup's kept CSI snapshots are deleted too (their contents and data as their class's deletionPolicy says). */
  kube?: KubeClients | undefined;
  /** When given, the backup's PodVolumeBackup objects are deleted too. */
  pvbs?: Pick<PvbClient, 'listPvbs' | 'deletePvb'> | undefined;
  /** When given, the backup's snapshots in the volume repository are deleted too (their chunks go at the next prune). */
  repository?: Pick<RepositoryGc, 'forget'> | undefined;
}

/**
 * Deletes one backup: its kept CSI snapshots (delete-snapshots.ts), its PodVolumeBackups, its
 * repository snapshots, its objects in backup storage, then its state and catalogue entry. Data
 * first, record last, so a crash half-way leaves the record and running it again finishes the job;
 * every step is idempotent. Storage goes after everything else (Velero's order): backup sync
 * removes an archived record whose storage is gone, so once it is gone nothing but the record may
 * be left — else a sync pass in between drops the record (404) while its PVBs and snapshots stay,
 * and a retry then finds nothing to delete. Only keys and objects named after this
 * backup are touched, so no other backup loses anything: its repository snapshots are those
 * the node agents tagged `backup=<name>`, and prune frees only chunks no remaining snapshot uses.
 */
export async function deleteBackup(deps: DeleteBackupDeps, name: string): Promise<{ snapshots: DeletedSnapshot[] }> {
  // Before the storage objects: the snapshot records are read from there.
  const snapshots = deps.kube ? await deleteKeptSnapshots(deps.kube, deps.storage, name) : [];
  if (deps.pvbs) {
    const selector = `${pvbLabels.backupName}=${name}`;
    for (const pvb of await deps.pvbs.listPvbs({ labelSelector: selector })) {
      if (pvb.metadata?.name) await deps.pvbs.deletePvb(pvb.metadata.name);
    }
  }
  await deps.repository?.forget({ backup: name });
  await deps.storage.deletePrefix(backupLayout(name).dir);
  await deps.state.deleteBackup(name);
  return { snapshots };
}
