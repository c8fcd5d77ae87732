import { join } from 'node:path';
import type { PruneRunSummary, RepositoryGc } from '@stowage/pipeline';
import type { StowageConfig } from '@stowage/platform';
import { DEFAULT_PRUNE_GRACE_MS, isRepoError, ObjectStoreBackend, parseDurationMs, RepoErrorCode, Repository } from '@stowage/repository';
import type { ObjectStore } from '@stowage/storage';

type Env = Readonly<Record<string, string | undefined>>;

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
export function repositoryGcFromEnv(config: StowageConfig, env: Env, storage: ObjectStore): RepositoryGc | undefined {
  const key = config.repository.key?.trim();
  if (!key) return undefined;
  const graceText = env.STOWAGE_PRUNE_GRACE?.trim();
  const graceMs = graceText ? parseDurationMs(graceText) : DEFAULT_PRUNE_GRACE_MS;
  if (graceMs === undefined)
    throw new Error(`STOWAGE_PRUNE_GRACE must be a duration such as 24h, 30m or 90s, got ${JSON.stringify(graceText)}`);
  const dir = env.STOWAGE_REPOSITORY_DIR?.trim();
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
