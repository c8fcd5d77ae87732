import { join } from 'node:path';
import type { PruneRunSummary, RepositoryGc } from '@stowage/pipeline';
import type { StowageConfig } from '@stowage/platform';
import { isRepoError, ObjectStoreBackend, RepoErrorCode, Repository } from '@stowage/repository';
import type { ObjectStore } from '@stowage/storage';

const NOTHING_PRUNED: PruneRunSummary = {
  snapshots: 0,
  liveChunks: 0,
  packsRewritten: 0,
  packsRetired: 0,
  packsDeleted: 0,
  bytesRetired: 0,
  bytesDeleted: 0,
  bytesWritten: 0,
  bytesFreed: 0,
  chunksRescued: 0,
  batchesPending: 0,
  durationMs: 0,
};

/**
 * The volume repository for backup deletion and prune, where the node agents write it:
 * STOWAGE_REPOSITORY_DIR, else `<STOWAGE_STORAGE>/repository` (a directory) or `repository/` in
 * the bucket. Undefined without STOWAGE_REPO_KEY (deletion then leaves repository snapshots, as
 * before). STOWAGE_PRUNE_GRACE (default 24h) must exceed the longest backup: see the repository
 * README, "Prune". Opened on first use; a repository no agent has created yet holds nothing to
 * forget or prune.
 */
export function repositoryGcFromConfig(config: StowageConfig, storage: ObjectStore): RepositoryGc | undefined {
  const key = config.repository.key?.trim();
  if (!key) return undefined;
  const graceMs = config.repository.pruneGraceMs;
  const dir = config.repository.dir?.trim();
  const where =
    dir || config.storage.kind === 'filesystem'
      ? { dir: dir || join((config.storage as { path: string }).path, 'repository'), key }
      : { dir: 'repository (in the backup storage bucket)', key, backend: new ObjectStoreBackend(storage) };
  let opened: Promise<Repository | undefined> | undefined;
  const open = () => {
    opened ??= Repository.open(where).catch((error: unknown) => {
      opened = undefined;
      const absent =
        isRepoError(error, RepoErrorCode.NotInitialised) ||
        (isRepoError(error, RepoErrorCode.Unreachable) && (error.cause as NodeJS.ErrnoException | undefined)?.code === 'ENOENT');
      if (absent) return undefined;
      throw error;
    });
    return opened;
  };
  return {
    graceMs,
    async forget(tags) {
      return (await (await open())?.forget(tags)) ?? [];
    },
    async prune() {
      const repo = await open();
      return repo ? repo.prune({ graceMs }) : NOTHING_PRUNED;
    },
  };
}
