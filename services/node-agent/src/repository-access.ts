import { isRepoError, type RepoBackend, RepoErrorCode, Repository } from '@stowage/repository';

/**
 * Opens the repository, creating it on first use. Safe when several agents start at once on a
 * shared storage: `Repository.init` publishes config.json create-only (link() in a directory,
 * a conditional put in S3), so exactly one init wins and the others get REPO_ALREADY_INITIALISED
 * and open what the winner wrote. `backend`: the repository in an object store (`dir` then only
 * names it in messages).
 */
export async function openOrInitRepository(dir: string, key: string, backend?: RepoBackend): Promise<Repository> {
  const where = { dir, key, ...(backend ? { backend } : {}) };
  try {
    return await Repository.open(where);
  } catch (error) {
    const absent =
      isRepoError(error, RepoErrorCode.NotInitialised) ||
      (isRepoError(error, RepoErrorCode.Unreachable) && (error.cause as NodeJS.ErrnoException | undefined)?.code === 'ENOENT');
    if (!absent) throw error;
  }
  try {
    return await Repository.init(where);
  } catch (error) {
    if (isRepoError(error, RepoErrorCode.AlreadyInitialised)) return await Repository.open(where);
    throw error;
  }
}
