/** What a snapshot manifest records; sealed as `snapshots/<id>` with associated data `snapshot:<id>`. */
export type EntryType = 'file' | 'dir' | 'symlink';

export interface TreeEntry {
  /** Relative to the backed-up directory, `/`-separated; `.` is the directory itself. */
  readonly path: string;
  readonly type: EntryType;
  /** Permission bits incl. setuid/setgid/sticky (`mode & 0o7777`). */
  readonly mode: number;
  /** Bytes of a file as read; 0 for dirs; the target's length for symlinks. */
  size: number;
  readonly mtimeMs: number;
  readonly uid: number;
  readonly gid: number;
  /** Symlinks only. */
  readonly target?: string;
  /** Files only: chunk ids in order. */
  chunks?: string[];
}

export interface SnapshotTotals {
  readonly files: number;
  readonly dirs: number;
  readonly symlinks: number;
  readonly bytes: number;
}

export interface SnapshotSummary {
  readonly id: string;
  /** ISO-8601 time the backup started. */
  readonly time: string;
  readonly durationMs: number;
  /** The directory that was backed up, as given. */
  readonly source: string;
  readonly hostname: string;
  readonly tags: Readonly<Record<string, string>>;
  readonly totals: SnapshotTotals;
}

export interface SnapshotManifest extends SnapshotSummary {
  readonly formatVersion: 1;
  readonly entries: readonly TreeEntry[];
}

export function summaryOf(manifest: SnapshotManifest): SnapshotSummary {
  const { id, time, durationMs, source, hostname, tags, totals } = manifest;
  return { id, time, durationMs, source, hostname, tags, totals };
}

/** Manifests are authenticated, but restore still refuses paths that could leave the target. */
export function isSafeRelativePath(path: string): boolean {
  if (path === '.') return true;
  if (path.length === 0 || path.startsWith('/') || path.includes('\0')) return false;
  return path.split('/').every((part) => part.length > 0 && part !== '.' && part !== '..');
}
