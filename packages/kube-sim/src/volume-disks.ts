/**
 * Where a PersistentVolume's bytes live in the simulator, and how they follow it. A real volume is a
 * disk that the kubelet attaches to whichever pod mounts it; the simulator keeps a volume's bytes in
 * the kubelet directory of the pod that mounts it (volume-data.ts), so this module moves them along:
 *
 *   <dataRoot>/_disks/<pv>          the volume while no pod mounts it (a directory, or one file for
 *                                   a block volume)
 *   <dataRoot>/_snapshots/<handle>  a snapshot's point-in-time copy (snapshot-controller.ts)
 *
 * - attach: a pod created through the API whose claim's volume has a disk gets it moved (renamed)
 *   into its volume directory;
 * - detach: when a pod is deleted, each CSI volume it held that no other live pod holds goes back
 *   to its disk (so a volume filled through one pod is what the next pod mounting it sees);
 * - a volume deleted (reclaim policy Delete) loses its disk.
 *
 * Copies (a snapshot's cut, a volume provisioned from a snapshot) preserve modes, times, owners
 * (when run as root) and symlinks, and cost what a copy costs: each file is cloned with
 * `COPYFILE_FICLONE`, a reflink on a filesystem that has them (XFS, btrfs) and a full copy
 * elsewhere (ext4, tmpfs). A read-only volume from a snapshot (access mode ReadOnlyMany only) shares
 * the snapshot's files through hard links, as CSI drivers serve read-only volumes from a snapshot
 * without copying it.
 */
import { constants } from 'node:fs';
import {
  chmod,
  copyFile,
  lchown,
  link,
  lstat,
  lutimes,
  mkdir,
  readdir,
  readlink,
  rename,
  rm,
  stat,
  symlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ClusterState } from './cluster-state.js';
import { podVolumeDirs } from './fixture-loader.js';
import { isPlainObject, type KubeObject } from './kube-object.js';
import type { PodVolumeDir } from './volume-data.js';

export type CopyMode = 'copy' | 'link';

export interface VolumeData {
  path: string;
  block: boolean;
}

function record(value: unknown): Record<string, unknown> {
  return isPlainObject(value) ? value : {};
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}

const runsAsRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** Copies a file or a tree from `src` to `dst` (which must not exist); returns the file bytes. */
export async function copyTree(src: string, dst: string, mode: CopyMode): Promise<number> {
  const st = await lstat(src);
  let bytes = 0;
  if (st.isDirectory()) {
    await mkdir(dst);
    const names = (await readdir(src)).sort();
    // a few entries at once: a tree of many small files is bound by the calls, not the bytes
    let next = 0;
    const lane = async () => {
      while (next < names.length) {
        const name = names[next++]!;
        bytes += await copyTree(join(src, name), join(dst, name), mode);
      }
    };
    await Promise.all(Array.from({ length: Math.min(8, names.length) }, lane));
    await chmod(dst, st.mode & 0o7777);
    if (runsAsRoot) await lchown(dst, st.uid, st.gid).catch(() => undefined);
    await utimes(dst, st.atime, st.mtime);
    return bytes;
  }
  if (st.isSymbolicLink()) {
    await symlink(await readlink(src), dst);
    if (runsAsRoot) await lchown(dst, st.uid, st.gid).catch(() => undefined);
    await lutimes(dst, st.atime, st.mtime).catch(() => undefined);
    return 0;
  }
  if (!st.isFile()) return 0; // sockets and FIFOs are not volume data
  if (mode === 'link') {
    await link(src, dst);
    return st.size;
  }
  await copyFile(src, dst, constants.COPYFILE_FICLONE);
  await chmod(dst, st.mode & 0o7777);
  if (runsAsRoot) await lchown(dst, st.uid, st.gid).catch(() => undefined);
  await utimes(dst, st.atime, st.mtime);
  return st.size;
}

/** Whether `dir`'s filesystem clones files (reflinks): the cut then costs metadata, not bytes. */
export async function probeReflinks(dir: string): Promise<boolean> {
  await mkdir(dir, { recursive: true });
  const a = join(dir, `.reflink-probe-${process.pid}-a`);
  const b = join(dir, `.reflink-probe-${process.pid}-b`);
  try {
    await writeFile(a, 'probe');
    await copyFile(a, b, constants.COPYFILE_FICLONE_FORCE);
    return true;
  } catch {
    return false;
  } finally {
    await rm(a, { force: true });
    await rm(b, { force: true });
  }
}

export class VolumeDisks {
  private seq = 0;
  /** Work on one volume's bytes runs one at a time (a pod's detach, its volume's deletion, a cut). */
  private readonly chains = new Map<string, Promise<unknown>>();

  constructor(
    private readonly state: ClusterState,
    readonly dataRoot: string,
  ) {}

  private serial<T>(pvName: string, work: () => Promise<T>): Promise<T> {
    const previous = this.chains.get(pvName) ?? Promise.resolve();
    const next = previous.then(work, work);
    const settled = next.catch(() => undefined);
    this.chains.set(pvName, settled);
    void settled.then(() => {
      if (this.chains.get(pvName) === settled) this.chains.delete(pvName);
    });
    return next;
  }

  diskPath(pvName: string): string {
    return join(this.dataRoot, '_disks', pvName);
  }

  snapshotPath(handle: string): string {
    return join(this.dataRoot, '_snapshots', handle);
  }

  private tempPath(under: '_disks' | '_snapshots', name: string): string {
    return join(this.dataRoot, under, `.tmp-${name}-${process.pid}-${this.seq++}`);
  }

  /** The volume directories (or device files) of live pods that mount a claim bound to `pvName`. */
  private mountsOf(pvName: string, except?: string): PodVolumeDir[] {
    const out: PodVolumeDir[] = [];
    for (const pod of this.state.store.list('pods', undefined)) {
      if (pod.metadata.deletionTimestamp || pod.metadata.uid === except) continue;
      const phase = record(pod.status).phase;
      if (phase === 'Succeeded' || phase === 'Failed') continue;
      const claims = (Array.isArray(record(pod.spec).volumes) ? (record(pod.spec).volumes as unknown[]) : []).some(
        (v) => typeof record(record(v).persistentVolumeClaim).claimName === 'string',
      );
      if (!claims) continue;
      for (const dir of podVolumeDirs(this.state, this.dataRoot, pod)) if (dir.pvName === pvName) out.push(dir);
    }
    return out;
  }

  /** Where the PV's bytes are now: a live pod's volume directory (or device file) that exists, else its disk. */
  async locate(pvName: string): Promise<VolumeData | undefined> {
    for (const dir of this.mountsOf(pvName)) if (await exists(dir.path)) return { path: dir.path, block: dir.block === true };
    const disk = this.diskPath(pvName);
    try {
      const st = await lstat(disk);
      return { path: disk, block: st.isFile() };
    } catch {
      return undefined;
    }
  }

  /**
   * Moves the disks of the pod's CSI volumes into its volume directories. Returns the volumes that
   * got their data so (the kubelet writes fixture files only into the others).
   */
  async attach(pod: KubeObject): Promise<Set<string>> {
    const attached = new Set<string>();
    for (const dir of podVolumeDirs(this.state, this.dataRoot, pod)) {
      const pvName = dir.pvName;
      if (!pvName) continue;
      await this.serial(pvName, async () => {
        const disk = this.diskPath(pvName);
        if (!(await exists(disk))) return;
        await mkdir(dirname(dir.path), { recursive: true });
        await rm(dir.path, { recursive: true, force: true });
        await rename(disk, dir.path);
        attached.add(dir.volume);
      });
    }
    return attached;
  }

  /** A deleted pod's CSI volumes that no other live pod holds go back to their disks. */
  async detach(pod: KubeObject): Promise<void> {
    for (const dir of podVolumeDirs(this.state, this.dataRoot, pod)) {
      const pvName = dir.pvName;
      if (!pvName) continue;
      await this.serial(pvName, async () => {
        if (!this.state.store.get('persistentvolumes', '', pvName) || !(await exists(dir.path))) return;
        if (this.mountsOf(pvName, pod.metadata.uid).length > 0) return;
        const disk = this.diskPath(pvName);
        await mkdir(dirname(disk), { recursive: true });
        await rm(disk, { recursive: true, force: true });
        await rename(dir.path, disk);
      });
    }
  }

  /** Copies the PV's bytes (where they are now) to a snapshot; nothing there yet is an empty volume. */
  cut(pvName: string, handle: string, blockMode: boolean): Promise<{ bytes: number; block: boolean }> {
    return this.serial(pvName, () => this.cutNow(pvName, handle, blockMode));
  }

  private async cutNow(pvName: string, handle: string, blockMode: boolean): Promise<{ bytes: number; block: boolean }> {
    const source = await this.locate(pvName);
    const target = this.snapshotPath(handle);
    const temp = this.tempPath('_snapshots', handle);
    await mkdir(dirname(temp), { recursive: true });
    let bytes = 0;
    const block = source?.block ?? blockMode;
    try {
      if (source) bytes = await copyTree(source.path, temp, 'copy');
      else if (block) await writeFile(temp, '');
      else await mkdir(temp);
      await rm(target, { recursive: true, force: true });
      await rename(temp, target);
    } catch (error) {
      await rm(temp, { recursive: true, force: true });
      throw error;
    }
    return { bytes, block };
  }

  /** Bytes a snapshot holds (its restore size), or undefined when the snapshot has no data. */
  async snapshotSize(handle: string): Promise<number | undefined> {
    const path = this.snapshotPath(handle);
    if (!(await exists(path))) return undefined;
    return await sizeOf(path);
  }

  /** A new volume's disk, from a snapshot: copied, or shared through hard links for a read-only volume. */
  async provisionFromSnapshot(pvName: string, handle: string, mode: CopyMode): Promise<void> {
    const temp = this.tempPath('_disks', pvName);
    await mkdir(dirname(temp), { recursive: true });
    try {
      await copyTree(this.snapshotPath(handle), temp, mode);
      await rm(this.diskPath(pvName), { recursive: true, force: true });
      await rename(temp, this.diskPath(pvName));
    } catch (error) {
      await rm(temp, { recursive: true, force: true });
      throw error;
    }
  }

  removeDisk(pvName: string): Promise<void> {
    return this.serial(pvName, () => rm(this.diskPath(pvName), { recursive: true, force: true }));
  }

  async removeSnapshot(handle: string): Promise<void> {
    await rm(this.snapshotPath(handle), { recursive: true, force: true });
  }
}

async function sizeOf(path: string): Promise<number> {
  const st = await stat(path);
  if (!st.isDirectory()) return st.size;
  let total = 0;
  for (const entry of await readdir(path, { withFileTypes: true })) {
    if (entry.isDirectory()) total += await sizeOf(join(path, entry.name));
    else if (entry.isFile()) total += (await stat(join(path, entry.name))).size;
  }
  return total;
}
