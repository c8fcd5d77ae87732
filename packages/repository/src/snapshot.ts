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
  /** Files: status-change time and inode when backed up; with size and mtime they tell an unchanged file (absent in older snapshots). */
  readonly ctimeMs?: number;
  readonly ino?: number;
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
  /** The snapshot whose file metadata this backup trusted for unchanged files (absent: none, or an older snapshot). */
  readonly parent?: string;
  readonly entries: readonly TreeEntry[];
}

/**
 * A snapshot's summary from its manifest's JSON without parsing the file list (~100 bytes per
 * file; parsing them was most of finding a parent, once per snapshot in every new process).
 * The writer puts `entries` last, and `"entries":[` cannot occur before that key: a quote inside a
 * JSON string is escaped, tag values are strings, totals are numbers. Undefined when the text is
 * not laid out that way or the head is not a summary of `snapshotId`: then parse all of it.
 */
export function summaryOfManifestJson(json: Buffer, snapshotId: string): SnapshotSummary | undefined {
  const at = json.indexOf('"entries":[');
  if (at < 1 || json[at - 1] !== 0x2c /* , */) return undefined;
  let head: Partial<SnapshotManifest>;
  try {
    head = JSON.parse(`${json.toString('utf8', 0, at - 1)}}`) as Partial<SnapshotManifest>;
  } catch {
    return undefined;
  }
  const isObject = (value: unknown) => typeof value === 'object' && value !== null;
  if (
    head.formatVersion !== 1 ||
    head.id !== snapshotId ||
    typeof head.time !== 'string' ||
    !isObject(head.tags) ||
    !isObject(head.totals)
  ) {
    return undefined;
  }
  return summaryOf(head as SnapshotManifest);
}

export function summaryOf(manifest: SnapshotManifest): SnapshotSummary {
  const { id, time, durationMs, source, hostname, tags, totals } = manifest;
  return { id, time, durationMs, source, hostname, tags, totals };
}

/**
 * Tags that name a pod volume (the node agent's `ns`, `pod`, `volume`, `pvc`). A backup's parent is
 * the newest snapshot that agrees on all of them, as restic picks its parent by host and path. The
 * pod uid is left out on purpose: a StatefulSet pod recreated on the same claim is the same volume,
 * and a file is only reused when its size, mtime, ctime and inode all match anyway.
 */
export const IDENTIFYING_TAGS = ['ns', 'pod', 'volume', 'pvc'] as const;

/** True when `candidate` was taken of the same volume as a backup of `source` with `tags`. */
export function isSameVolume(
  candidate: SnapshotSummary,
  source: string,
  hostname: string,
  tags: Readonly<Record<string, string>>,
): boolean {
  if (IDENTIFYING_TAGS.some((key) => tags[key] !== undefined)) {
    return IDENTIFYING_TAGS.every((key) => candidate.tags[key] === tags[key]);
  }
  // No identifying tags: restic's rule, same host and same path.
  return candidate.source === source && candidate.hostname === hostname;
}

/** Manifests are authenticated, but restore still refuses paths that could leave the target. */
export function isSafeRelativePath(path: string): boolean {
  if (path === '.') return true;
  if (path.length === 0 || path.startsWith('/') || path.includes('\0')) return false;
  return path.split('/').every((part) => part.length > 0 && part !== '.' && part !== '..');
}
