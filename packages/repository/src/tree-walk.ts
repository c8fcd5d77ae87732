import { type Dirent, lstatSync, readlinkSync, type Stats } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode, RepoError, RepoErrorCode } from './errors.js';
import type { TreeEntry } from './snapshot.js';

export interface SkippedEntry {
  readonly path: string;
  readonly reason: string;
}

export interface WalkResult {
  /** Parents before children, names sorted within a directory. */
  readonly entries: TreeEntry[];
  readonly totalBytes: number;
  readonly skipped: SkippedEntry[];
}

const STAT_BATCH = 64;

/**
 * Walks the tree once before copying so progress has a total. Symlinks are recorded, never
 * followed; sockets, FIFOs and devices are skipped with a reason (opening a FIFO would block).
 */
export async function walkTree(root: string, signal?: AbortSignal): Promise<WalkResult> {
  let rootStats: Stats;
  try {
    rootStats = await lstat(root);
  } catch (error) {
    throw sourceError(error, root, '.');
  }
  if (!rootStats.isDirectory()) {
    throw new RepoError(RepoErrorCode.SourceNotDirectory, `the source ${root} is not a directory`, { details: { path: root } });
  }
  const entries: TreeEntry[] = [entryOf('.', rootStats, undefined)];
  const skipped: SkippedEntry[] = [];
  let totalBytes = 0;
  const pending: string[] = ['.'];
  while (pending.length > 0) {
    signal?.throwIfAborted();
    const dirPath = pending.shift()!;
    const absDir = dirPath === '.' ? root : join(root, dirPath);
    let children: Dirent[];
    try {
      children = await readdir(absDir, { withFileTypes: true });
    } catch (error) {
      if (errnoCode(error) === 'ENOENT' && dirPath !== '.') {
        skipped.push({ path: dirPath, reason: 'removed while the backup was running' });
        continue;
      }
      throw sourceError(error, absDir, dirPath);
    }
    children.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const subdirs: string[] = [];
    for (let i = 0; i < children.length; i += STAT_BATCH) {
      const batch = children.slice(i, i + STAT_BATCH);
      // Synchronous lstat: the metadata is usually in the inode table blocks read ahead with the
      // directory, and a thread-pool round trip per entry costs several times the call itself.
      const stats = batch.map((child) => {
        const rel = dirPath === '.' ? child.name : `${dirPath}/${child.name}`;
        const abs = join(absDir, child.name);
        try {
          const st = lstatSync(abs);
          return { rel, stats: st as Stats | undefined, target: st.isSymbolicLink() ? readlinkSync(abs) : undefined };
        } catch (error) {
          if (errnoCode(error) === 'ENOENT') return { rel, stats: undefined, target: undefined };
          throw sourceError(error, abs, rel);
        }
      });
      for (const { rel, stats: st, target } of stats) {
        if (!st) {
          skipped.push({ path: rel, reason: 'removed while the backup was running' });
        } else if (st.isFile()) {
          entries.push(entryOf(rel, st, undefined));
          totalBytes += st.size;
        } else if (st.isDirectory()) {
          entries.push(entryOf(rel, st, undefined));
          subdirs.push(rel);
        } else if (st.isSymbolicLink() && target !== undefined) {
          entries.push(entryOf(rel, st, target));
        } else {
          skipped.push({ path: rel, reason: 'not a regular file, directory or symlink (socket, FIFO or device)' });
        }
      }
    }
    // Depth-first keeps memory of `pending` small; sorted order stays stable.
    pending.unshift(...subdirs);
  }
  return { entries, totalBytes, skipped };
}

function entryOf(path: string, st: Stats, symlinkTarget: string | undefined): TreeEntry {
  const common = { path, mode: st.mode & 0o7777, mtimeMs: st.mtimeMs, uid: st.uid, gid: st.gid };
  if (symlinkTarget !== undefined) return { ...common, type: 'symlink', size: st.size, target: symlinkTarget };
  if (st.isDirectory()) return { ...common, type: 'dir', size: 0 };
  return { ...common, type: 'file', size: st.size, ctimeMs: st.ctimeMs, ino: st.ino, chunks: [] };
}

export function sourceError(error: unknown, absPath: string, relPath: string): RepoError {
  const code = errnoCode(error);
  if (code === 'ENOENT' && relPath === '.') {
    return new RepoError(RepoErrorCode.SourceMissing, `the directory to back up does not exist: ${absPath}`, {
      cause: error,
      details: { path: absPath },
    });
  }
  if (code === 'EACCES' || code === 'EPERM') {
    return new RepoError(RepoErrorCode.SourceUnreadable, `permission denied reading ${absPath}: the node agent cannot read this path`, {
      cause: error,
      details: { path: absPath },
    });
  }
  return new RepoError(RepoErrorCode.SourceUnreadable, `cannot read ${absPath}: ${code ?? String(error)}`, {
    cause: error,
    details: { path: absPath },
  });
}
