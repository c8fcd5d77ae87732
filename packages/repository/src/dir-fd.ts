import { constants, existsSync } from 'node:fs';
import { type FileHandle, mkdir, open, readdir, rmdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode, RepoError, RepoErrorCode } from './errors.js';

/**
 * Files a pod can touch are hostile (SECURITY.md): the pod keeps running while the agent writes
 * into its volume, and may swap any directory on a path for a symlink elsewhere. So writes go
 * relative to directories the agent opened itself, without following a link: what Linux's
 * `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` guarantees. Node has no openat; on Linux,
 * `/proc/self/fd/<fd>/<name>` resolves `name` in the directory the descriptor holds (the
 * descriptor, not a path the pod could change), so every name below is looked up one component
 * at a time in a checked directory, and opened with O_NOFOLLOW. Where there is no /proc (a CLI on
 * macOS), names are joined to the directory's path: no defence there against a concurrent swap,
 * which the node agent (Linux only) never relies on.
 */
const FD_ROOT = existsSync('/proc/self/fd') ? '/proc/self/fd/' : undefined;

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** A directory opened without following a link: its descriptor, and the path it was opened as (for messages). */
export interface DirRef {
  readonly handle: FileHandle;
  readonly path: string;
  readonly dev: number;
  readonly ino: number;
}

/** The path that resolves `name` inside `dir` itself (its descriptor), following no link on the way. */
export function atDir(dir: DirRef, name: string): string {
  return FD_ROOT ? `${FD_ROOT}${dir.handle.fd}/${name}` : join(dir.path, name);
}

/** A path of the directory was replaced (by a link, a file or another directory) while the agent was using it. */
export function swappedError(path: string, what: string): RepoError {
  return new RepoError(
    RepoErrorCode.RestoreTargetChanged,
    `${path} ${what} while the restore was writing there; nothing is written through it (a link or another directory took its place)`,
    { details: { path } },
  );
}

async function openDirPath(path: string, shownAs: string): Promise<DirRef> {
  let handle: FileHandle;
  try {
    handle = await open(path, DIR_FLAGS);
  } catch (error) {
    const code = errnoCode(error);
    if (code === 'ELOOP' || code === 'ENOTDIR') throw swappedError(shownAs, 'is not a directory (a symbolic link or a file)');
    throw error;
  }
  const st = await handle.stat();
  return { handle, path: shownAs, dev: st.dev, ino: st.ino };
}

/** Opens the directory at `path` (whose own components the caller vouches for), not following a link at its last one. */
export function openDir(path: string): Promise<DirRef> {
  return openDirPath(path, path);
}

/**
 * Opens `name` in `parent` without following a link; with `expect`, only if it is still that
 * directory (device and inode), else (another directory, or none) a RestoreTargetChanged error naming the path.
 */
export async function openDirAt(parent: DirRef, name: string, expect?: { dev: number; ino: number }): Promise<DirRef> {
  const shownAs = join(parent.path, name);
  let dir: DirRef;
  try {
    dir = await openDirPath(atDir(parent, name), shownAs);
  } catch (error) {
    // Made by the restore, so gone only if something moved or removed it.
    if (expect && errnoCode(error) === 'ENOENT') throw swappedError(shownAs, 'disappeared (moved away or removed)');
    throw error;
  }
  if (expect && (dir.dev !== expect.dev || dir.ino !== expect.ino)) {
    await dir.handle.close();
    throw swappedError(dir.path, 'was replaced by another directory');
  }
  return dir;
}

/** Creates `name` in `parent` (or takes the directory already there) and opens it, never following a link. */
export async function makeDirAt(parent: DirRef, name: string, mode: number): Promise<DirRef> {
  try {
    await mkdir(atDir(parent, name), { mode });
  } catch (error) {
    if (errnoCode(error) !== 'EEXIST') throw error;
  }
  return openDirAt(parent, name);
}

/**
 * Removes `name` from `parent` and, if it is a directory, everything under it, descending through
 * descriptors: a link is removed, never followed (Node's recursive rm lstat's then lists by path,
 * which a swap in between would redirect). Missing is fine.
 */
export async function removeAt(parent: DirRef, name: string): Promise<void> {
  try {
    await unlink(atDir(parent, name));
    return;
  } catch (error) {
    const code = errnoCode(error);
    if (code === 'ENOENT') return;
    if (code !== 'EISDIR' && code !== 'EPERM') throw error;
  }
  let dir: DirRef;
  try {
    dir = await openDirAt(parent, name);
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return;
    throw error;
  }
  try {
    for (const child of await readdir(atDir(dir, '.'))) await removeAt(dir, child);
  } finally {
    await dir.handle.close();
  }
  await rmdir(atDir(parent, name)).catch((error: unknown) => {
    if (errnoCode(error) !== 'ENOENT') throw error;
  });
}

/** Closes a directory opened here (errors ignored: it is only ever read). */
export async function closeDir(dir: DirRef | undefined): Promise<void> {
  await dir?.handle.close().catch(() => {});
}
