import { type FSWatcher, watch } from 'node:fs';
import { readdir, rmdir, stat, unlink, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { restoreWaitContainer } from '@stowage/kube';

/**
 * `stowage-restore-wait`: the init container that core's pod transform puts first in a restored
 * pod. Each restored volume is mounted at `/restores/<volume>`; the node agent writes
 * `.stowage/<restore uid>` at the root of a volume once its data is in. This program waits until
 * every mounted volume has that marker, then removes the markers (and `.stowage` when it is empty)
 * so the volume holds exactly the backed-up files, and exits 0 so the app containers start on
 * complete data. It runs from the node agent's image, which already ships Node.
 *
 * It looks again the moment a volume's root or its `.stowage` directory changes (inotify through
 * fs.watch), so the app containers start within milliseconds of the marker; polling every
 * `pollIntervalMs` stays as the fallback for a filesystem or a limit that gives no events.
 */

// The names are the contract's, kept in @stowage/kube so the pipeline can use them too.
export const RESTORE_WAIT_COMMAND = restoreWaitContainer.command;
const RESTORE_WAIT_CONTAINER_NAME = restoreWaitContainer.name;
const RESTORE_WAIT_MOUNT_ROOT = restoreWaitContainer.mountRoot;
const DONE_MARKER_DIR = restoreWaitContainer.markerDir;
export const DEFAULT_RESTORE_WAIT_TIMEOUT_MS = 4 * 60 * 60 * 1000;
const DEFAULT_POLL_INTERVAL_MS = restoreWaitContainer.pollIntervalMs;

/** `<volume dir>/.stowage/<restore uid>`. */
export function doneMarkerPath(volumeDir: string, restoreUid: string): string {
  return join(volumeDir, DONE_MARKER_DIR, restoreUid);
}

export interface RestoreWaitOptions {
  /** Default `/restores`. */
  root?: string;
  restoreUid: string;
  timeoutMs?: number;
  pollIntervalMs?: number;
  /** Progress lines (one per volume as it finishes, warnings). */
  log?: (line: string) => void;
}

export type RestoreWaitResult =
  | { ok: true; volumes: string[]; warnings: string[] }
  | { ok: false; reason: 'no-volumes' | 'timeout' | 'bad-input'; message: string };

export async function waitForRestoredVolumes(options: RestoreWaitOptions): Promise<RestoreWaitResult> {
  const root = options.root ?? RESTORE_WAIT_MOUNT_ROOT;
  const timeoutMs = options.timeoutMs ?? DEFAULT_RESTORE_WAIT_TIMEOUT_MS;
  const pollIntervalMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
  const log = options.log ?? (() => undefined);
  const uid = options.restoreUid;
  if (!uid || uid.includes('/') || uid === '.' || uid === '..') {
    return { ok: false, reason: 'bad-input', message: `STOWAGE_RESTORE_UID must be the restore's uid, got ${JSON.stringify(uid)}` };
  }
  const volumes = await listVolumes(root);
  if (volumes.length === 0) {
    return {
      ok: false,
      reason: 'no-volumes',
      message: `no restored volume is mounted under ${root}; the ${RESTORE_WAIT_CONTAINER_NAME} init container needs one volumeMount per restored volume at ${root}/<volume name>`,
    };
  }
  const deadline = Date.now() + timeoutMs;
  const waiting = new Set(volumes);
  const changes = new DirectoryChanges();
  try {
    for (;;) {
      // Watch before looking: a marker written during the look still wakes the next wait.
      for (const volume of waiting) {
        const markerDir = join(root, volume, DONE_MARKER_DIR);
        // The root's watch sees `.stowage` come (or go and come back: its watch is then re-armed).
        // Only `.stowage` and the marker are worth a look, not the restored files' renames and
        // times; an event without a name may be either.
        changes.watch(join(root, volume), (entry) => {
          if (entry === DONE_MARKER_DIR) changes.unwatch(markerDir);
          return entry === null || entry === DONE_MARKER_DIR;
        });
        // The marker appearing (`.stowage` absent yet: the root's watch covers it).
        changes.watch(markerDir, (entry) => entry === null || entry === uid);
      }
      changes.reset();
      for (const volume of [...waiting]) {
        if (await exists(doneMarkerPath(join(root, volume), uid))) {
          waiting.delete(volume);
          log(`volume ${volume} is restored`);
        }
      }
      if (waiting.size === 0) break;
      if (Date.now() >= deadline) {
        return {
          ok: false,
          reason: 'timeout',
          message: `timed out after ${Math.round(timeoutMs / 1000)} s waiting for the node agent to restore ${[...waiting].sort().join(', ')} (no ${DONE_MARKER_DIR}/${uid} marker); see the PodVolumeRestores of restore uid ${uid}`,
        };
      }
      await changes.next(Math.min(pollIntervalMs, Math.max(0, deadline - Date.now())));
    }
  } finally {
    changes.close();
  }
  const warnings: string[] = [];
  for (const volume of volumes) warnings.push(...(await removeMarker(join(root, volume), uid)));
  for (const warning of warnings) log(`warning: ${warning}`);
  return { ok: true, volumes, warnings };
}

/**
 * Wakes a waiting loop when anything changes in the directories it watches. A directory that
 * cannot be watched (absent, no inotify, a watch limit) is simply not: the poll covers it.
 */
class DirectoryChanges {
  private readonly watchers = new Map<string, FSWatcher>();
  private changed = false;
  private wake: (() => void) | undefined;

  /** `isWorthALook` says whether a change of `entry` (a name in `dir`) wakes the loop. */
  watch(dir: string, isWorthALook: (entry: string | null) => boolean): void {
    if (this.watchers.has(dir)) return;
    try {
      const watcher = watch(dir, { persistent: false }, (_event, entry) => {
        if (isWorthALook(entry)) this.signal();
      });
      // A watched directory removed or a watch gone bad: drop it; the next look re-arms it.
      watcher.on('error', () => this.unwatch(dir));
      this.watchers.set(dir, watcher);
    } catch {
      // ENOENT (not created yet), ENOSPC (inotify watch limit), unsupported filesystem.
    }
  }

  /** Forgets changes seen so far (call before looking). */
  reset(): void {
    this.changed = false;
  }

  /** Resolves at the first change since reset(), or after `timeoutMs`. */
  next(timeoutMs: number): Promise<void> {
    if (this.changed) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.wake = done;
    });
  }

  close(): void {
    for (const dir of [...this.watchers.keys()]) this.unwatch(dir);
    this.wake?.();
  }

  private signal(): void {
    this.changed = true;
    this.wake?.();
  }

  unwatch(dir: string): void {
    this.watchers.get(dir)?.close();
    this.watchers.delete(dir);
  }
}

async function listVolumes(root: string): Promise<string[]> {
  const entries = await readdir(root, { withFileTypes: true }).catch(() => []);
  return entries
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * Removes the marker and `.stowage` if nothing else is in it, then puts back the volume root's
 * times (removing `.stowage` changed its mtime; the snapshot's is the one to keep). A marker that
 * cannot be removed is reported, not fatal: the data is complete and the app may start.
 */
async function removeMarker(volumeDir: string, uid: string): Promise<string[]> {
  const warnings: string[] = [];
  const rootTimes = await stat(volumeDir).catch(() => undefined);
  const markerDir = join(volumeDir, DONE_MARKER_DIR);
  try {
    await unlink(doneMarkerPath(volumeDir, uid));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') warnings.push(`cannot remove ${doneMarkerPath(volumeDir, uid)} (${code}); run the init container as root`);
  }
  try {
    await rmdir(markerDir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ENOTEMPTY: another restore's marker is still there; that restore's own init container removes it.
    if (code !== 'ENOENT' && code !== 'ENOTEMPTY' && code !== 'EEXIST') {
      warnings.push(`cannot remove ${markerDir} (${code}); run the init container as root`);
    }
  }
  if (rootTimes) await utimes(volumeDir, rootTimes.atime, rootTimes.mtime).catch(() => undefined);
  return warnings;
}

function parseTimeoutMs(text: string | undefined): number | string {
  if (text === undefined || text.trim() === '') return DEFAULT_RESTORE_WAIT_TIMEOUT_MS;
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0)
    return `STOWAGE_RESTORE_WAIT_TIMEOUT_MS must be a whole number of milliseconds above 0, got ${JSON.stringify(text)}`;
  return value;
}

/** The program: env in, exit code out. */
export async function runRestoreWait(
  env: Readonly<Record<string, string | undefined>>,
  io: { out: (line: string) => void; err: (line: string) => void },
): Promise<number> {
  const problems: string[] = [];
  const restoreUid = env[restoreWaitContainer.restoreUidEnv]?.trim() ?? '';
  if (!restoreUid) problems.push('STOWAGE_RESTORE_UID is required (the uid of the restore whose volumes this pod waits for)');
  const timeoutMs = parseTimeoutMs(env[restoreWaitContainer.timeoutEnv]);
  if (typeof timeoutMs === 'string') problems.push(timeoutMs);
  if (problems.length > 0 || typeof timeoutMs === 'string') {
    for (const problem of problems) io.err(`${RESTORE_WAIT_CONTAINER_NAME}: ${problem}`);
    return 2;
  }
  const root = env.STOWAGE_RESTORE_WAIT_ROOT?.trim() || RESTORE_WAIT_MOUNT_ROOT;
  io.out(`${RESTORE_WAIT_CONTAINER_NAME}: waiting for the volumes under ${root} to be restored (restore uid ${restoreUid})`);
  const result = await waitForRestoredVolumes({
    root,
    restoreUid,
    timeoutMs,
    log: (line) => io.out(`${RESTORE_WAIT_CONTAINER_NAME}: ${line}`),
  });
  if (!result.ok) {
    io.err(`${RESTORE_WAIT_CONTAINER_NAME}: ${result.message}`);
    return 1;
  }
  io.out(`${RESTORE_WAIT_CONTAINER_NAME}: all ${result.volumes.length} volume(s) restored: ${result.volumes.join(', ')}`);
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const code = await runRestoreWait(process.env, {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
  });
  process.exit(code);
}
