/**
 * Run by `backupInChild` (unreadable-backup.ts): opens the repository and backs up one directory,
 * then prints the outcome as one JSON line. A process of its own so the caller can start it
 * without the rights that let root read any file.
 */
import { isRepoError, Repository } from '../../src/index.js';

const [dir, key, source] = process.argv.slice(2);
if (!dir || !key || !source) {
  process.stderr.write('usage: backup-child.ts REPO_DIR KEY SOURCE\n');
  process.exit(2);
}
try {
  const repo = await Repository.open({ dir, key, durable: false });
  const result = await repo.backup(source);
  process.stdout.write(`${JSON.stringify({ ok: true, snapshotId: result.snapshotId })}\n`);
} catch (error) {
  if (!isRepoError(error)) throw error;
  process.stdout.write(`${JSON.stringify({ ok: false, code: error.code, message: error.message, details: error.details })}\n`);
}
