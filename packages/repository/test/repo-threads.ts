import { Repository } from '../src/index.js';

const savedThreads = process.env.STOWAGE_REPO_THREADS;

/** Opens the repository at `dir` with `threads` worker threads (STOWAGE_REPO_THREADS is read at open). */
export function openRepoWithThreads(dir: string, key: string, threads: number): Promise<Repository> {
  process.env.STOWAGE_REPO_THREADS = String(threads);
  return Repository.open({ dir, key, durable: false });
}

/** Puts STOWAGE_REPO_THREADS back as the test process had it (for afterEach). */
export function restoreThreadsSetting(): void {
  if (savedThreads === undefined) delete process.env.STOWAGE_REPO_THREADS;
  else process.env.STOWAGE_REPO_THREADS = savedThreads;
}
