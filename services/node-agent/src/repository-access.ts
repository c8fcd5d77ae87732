import { isRepoError, RepoErrorCode, Repository } from '@stowage/repository';

/**
 * Opens the repository, creating it on first use. Safe when several agents start at once on a
 * shared storage: `Repository.init` publishes config.json with link(), so exactly one init wins
 * and the others get REPO_ALREADY_INITIALISED and open what the winner wrote.
 */
export async function openOrInitRepository(dir: string, key: string): Promise<Repository> {
  try {
    return await Repository.open({ dir, key });
  } catch (error) {
    const absent =
      isRepoError(error, RepoErrorCode.NotInitialised) ||
      (isRepoError(error, RepoErrorCode.Unreachable) && (error.cause as NodeJS.ErrnoException | undefined)?.code === 'ENOENT');
    if (!absent) throw error;
  }
  try {
    return await Repository.init({ dir, key });
  } catch (error) {
    if (isRepoError(error, RepoErrorCode.AlreadyInitialised)) return await Repository.open({ dir, key });
    throw error;
  }
}
