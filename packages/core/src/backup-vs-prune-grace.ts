import { formatDuration } from './duration.js';
import type { ValidationProblem } from './spec-validation.js';

/**
 * A backup's fs-backup timeout must stay below the repository's prune grace period. Prune deletes
 * what it retired once the grace has passed; a backup still running then may have deduplicated
 * against it. The node agent re-checks before it writes a snapshot (and re-reads what was
 * retired), so this is the first line, not the only one: it tells the user at submit time that the
 * two settings contradict each other, naming both. `pruneGraceMs` is the server's setting
 * (STOWAGE_PRUNE_GRACE), passed in.
 */
export function fsBackupTimeoutProblem(fsBackupTimeoutMs: number, pruneGraceMs: number): ValidationProblem | undefined {
  if (fsBackupTimeoutMs < pruneGraceMs) return undefined;
  return {
    path: 'spec.fsBackupTimeout',
    message:
      `fsBackupTimeout ${formatDuration(fsBackupTimeoutMs)} is not shorter than the repository's prune grace period ` +
      `STOWAGE_PRUNE_GRACE ${formatDuration(pruneGraceMs)}: a backup may not outlive the grace, or prune could delete data it ` +
      'still refers to; set a shorter fsBackupTimeout, or ask the operator to raise STOWAGE_PRUNE_GRACE',
  };
}
