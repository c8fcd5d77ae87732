import { constants } from 'node:fs';
import { type FileHandle, lstat, open, readdir, rename, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type KubeClients,
  type PodVolumeRestore,
  type PodVolumeRestoreSpec,
  type PodVolumeRestoreStatus,
  type PvrClient,
  pvrLabels,
  restoreWaitContainer,
} from '@stowage/kube';
import {
  abortableSleep,
  atDir,
  closeDir,
  type DirRef,
  isRepoError,
  makeDirAt,
  openDir,
  openDirAt,
  RepoErrorCode,
  type Repository,
  removeAt,
  type TokenBucket,
} from '@stowage/repository';
import { describeCopyFailure } from './failure-message.js';
import { type PodForVolumeDir, resolveVolumeDir, type VolumeDirResult } from './volume-dir.js';
import { OperationFailure, type VolumeOperationHandler } from './volume-operation-runner.js';

/** What the agent reads of a pod on its node (raw JSON from the pod informer). */
export interface PodOnNode {
  metadata?: { uid?: string; namespace?: string; name?: string };
  spec?: PodForVolumeDir['spec'];
  status?: { initContainerStatuses?: { name: string; state?: { terminated?: { exitCode?: number } } }[] };
}

export interface RestoreOperationDeps {
  kube: KubeClients;
  client: PvrClient;
  nodeName: string;
  kubeletRoot: string;
  repoDir: string;
  getRepository(): Promise<Repository>;
  throttle: TokenBucket | undefined;
  /** The pods of this node by uid (a pod informer with `spec.nodeName=<node>`). */
  podOnNode(uid: string): PodOnNode | undefined;
  /** How long a claimed PVR waits for its pod's volume directory to appear. */
  volumeDirTimeoutMs: number;
  volumeDirPollMs?: number;
}

/** Reasons the volume directory may still come (kubelet mounting, provisioner binding); others fail at once. */
const TRANSIENT_DIR_REASONS: ReadonlySet<string> = new Set(['dir-missing', 'claim-unbound']);

/**
 * PodVolumeRestores whose pod runs on this node: restore the snapshot into the pod's volume
 * directory, then write the done marker `.stowage/<restore uid>` that the pod's
 * `stowage-restore-wait` init container waits for. Every agent watches all PVRs (a PVR is made
 * before its pod is scheduled); the one whose node runs the pod takes it and records status.node.
 */
export function restoreOperationHandler(deps: RestoreOperationDeps): VolumeOperationHandler<PodVolumeRestoreSpec, PodVolumeRestoreStatus> {
  const { nodeName, repoDir } = deps;
  const podIsHere = (pvr: PodVolumeRestore) => {
    const uid = pvr.spec?.pod?.uid;
    return uid !== undefined && deps.podOnNode(uid) !== undefined;
  };
  return {
    label: 'PVR',
    noun: 'restore',
    client: deps.client,
    belongsToNode: (pvr) => (pvr.status?.node ? pvr.status.node === nodeName : podIsHere(pvr)),
    isStartable: (pvr) => !pvr.status?.node && podIsHere(pvr),
    dependencyOf: (pvr) => pvr.spec?.pod?.uid,
    // A New PVR's pod may never be scheduled: any agent may answer its cancel (one conditional write wins).
    answersCancelOf: () => true,
    claimFields: { node: nodeName },
    messages: {
      resumed:
        'resumed after the node agent restarted: the restore starts again from the beginning (what was staged is discarded; the volume gets no done marker until it is complete)',
      canceledBeforeStart: 'canceled before the restore started (spec.cancel); nothing was restored',
      canceled: (bytesDone) =>
        `canceled on request (spec.cancel) after restoring ${bytesDone} bytes into a staging directory, which was removed; the volume got no done marker, so the pod stays in its ${restoreWaitContainer.name} init container`,
      canceledAtRestart: 'canceled: the node agent restarted while the cancel was pending; the volume got no done marker',
    },
    isCanceledError: () => false,
    describeFailure: (error) => describeRestoreFailure(error, repoDir),
    run: async (pvr, context) => {
      const name = pvr.metadata.name;
      const restoreUid = pvr.metadata.labels?.[pvrLabels.restoreUid];
      if (!restoreUid) {
        throw new OperationFailure(
          `PVR ${name} has no ${pvrLabels.restoreUid} label, so there is no done marker its pod's ${restoreWaitContainer.name} init container would find; nothing was restored`,
        );
      }
      const volumeDir = await waitForVolumeDir(deps, pvr, context.signal);
      // The volume's content is the pod's, and the pod runs while it is restored: everything below
      // the volume directory is reached through descriptors the agent opened itself, never through
      // a link (a .stowage or staging directory swapped for one fails the PVR, naming it).
      const volume = await openDir(volumeDir);
      let markerDir: DirRef | undefined;
      let staging: DirRef | undefined;
      try {
        if (context.resumed) {
          const already = await alreadyRestored(deps, pvr, volume, restoreUid);
          if (already) {
            return {
              status: { message: already },
              bytes: pvr.status?.progress?.totalBytes ?? 0,
              details: { volumeDir, alreadyRestored: true },
            };
          }
        }
        markerDir = await makeDirAt(volume, restoreWaitContainer.markerDir, 0o755).catch((error: unknown) => {
          if (!isRepoError(error, RepoErrorCode.RestoreTargetChanged)) throw error;
          throw new OperationFailure(
            `${join(volumeDir, restoreWaitContainer.markerDir)} exists and is not a directory; the agent restores nothing through it (remove it and restore again)`,
          );
        });
        // Staged under .stowage and moved into place only when complete: a crash or cancel never
        // leaves half-restored files at the volume's root, and a resume discards the staging dir.
        const stagingName = `restoring-${name}`;
        await removeAt(markerDir, stagingName);
        staging = await makeDirAt(markerDir, stagingName, 0o700);
        const repo = await deps.getRepository();
        let result: Awaited<ReturnType<Repository['restore']>>;
        try {
          result = await repo.restore(pvr.spec.snapshotID, staging.path, {
            signal: context.signal,
            onProgress: context.onProgress,
            targetHandle: staging,
            ...(deps.throttle ? { throttle: deps.throttle } : {}),
          });
          context.signal.throwIfAborted();
          // Still where the pod sees them: else the files would land where the pod does not look.
          await closeDir(await openDirAt(volume, restoreWaitContainer.markerDir, markerDir));
          await closeDir(await openDirAt(markerDir, stagingName, staging));
          await moveIntoPlace(staging, volume);
          await removeAt(markerDir, stagingName);
        } catch (error) {
          // Leave the volume as it was: no staging dir, and no .stowage unless something else is in it.
          await removeAt(markerDir, stagingName).catch(() => undefined);
          await rmdir(atDir(volume, restoreWaitContainer.markerDir)).catch(() => undefined);
          throw error;
        }
        const marker = await writeMarker(
          markerDir,
          restoreUid,
          `${JSON.stringify({ pvr: name, node: nodeName, restoredAt: new Date().toISOString() })}\n`,
        );
        let placed: Awaited<ReturnType<typeof confirmMarkerPlaced>>;
        try {
          placed = await confirmMarkerPlaced(volume, markerDir, marker);
        } finally {
          await marker.close();
        }
        return {
          status: {},
          bytes: result.bytes,
          details: { snapshotId: result.snapshotId, bytes: result.bytes, files: result.files, volumeDir, marker: placed },
        };
      } finally {
        await closeDir(staging);
        await closeDir(markerDir);
        await closeDir(volume);
      }
    },
  };
}

/** Writes the done marker into the opened .stowage directory, never through a link; returns it open (the caller closes it). */
export async function writeMarker(markerDir: DirRef, restoreUid: string, content: string): Promise<FileHandle> {
  const file = await open(
    atDir(markerDir, restoreUid),
    constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
    0o644,
  );
  try {
    await file.writeFile(content);
  } catch (error) {
    await file.close();
    throw error;
  }
  return file;
}

/**
 * After the done marker is written: the marker is where the pod's init container looks for it,
 * `.stowage` in the volume still being the directory it was written in. A `.stowage` moved away
 * or replaced with the marker still in it fails the PVR (the pod would wait for a marker it never
 * sees). But the init container may have found the marker already: stowage-restore-wait unlinks
 * it the moment it sees it, then removes `.stowage` when that is empty, and the pod starts. So a
 * `.stowage` that is gone (or another directory) while the marker written (`marker`, still open)
 * has no link left is the marker consumed, not a swap: the restore is complete. Says which (the
 * PVR's "completed" log line shows it).
 */
export async function confirmMarkerPlaced(volume: DirRef, markerDir: DirRef, marker: FileHandle): Promise<'in place' | 'consumed'> {
  try {
    await closeDir(await openDirAt(volume, restoreWaitContainer.markerDir, markerDir));
    return 'in place';
  } catch (error) {
    if (isRepoError(error, RepoErrorCode.RestoreTargetChanged) && (await marker.stat()).nlink === 0) return 'consumed';
    throw error;
  }
}

/** Polls the volume directory of the PVR's pod until it exists, up to volumeDirTimeoutMs. */
async function waitForVolumeDir(deps: RestoreOperationDeps, pvr: PodVolumeRestore, signal: AbortSignal): Promise<string> {
  const spec = { node: deps.nodeName, pod: pvr.spec.pod, volume: pvr.spec.volume, backupStorageLocation: pvr.spec.backupStorageLocation };
  const deadline = Date.now() + deps.volumeDirTimeoutMs;
  let resolved: VolumeDirResult;
  for (;;) {
    // The pod informer already holds the pod (the PVR was claimed because it is here): no GET per look.
    const knownPod = deps.podOnNode(pvr.spec.pod.uid);
    resolved = await resolveVolumeDir(deps.kube, { kubeletRoot: deps.kubeletRoot, nodeName: deps.nodeName, spec, knownPod });
    if (resolved.ok) return resolved.path;
    if (!TRANSIENT_DIR_REASONS.has(resolved.reason)) throw new OperationFailure(`${resolved.message}; nothing was restored`);
    if (Date.now() >= deadline) break;
    await abortableSleep(Math.min(deps.volumeDirPollMs ?? 250, Math.max(0, deadline - Date.now())), signal);
  }
  throw new OperationFailure(
    `waited ${Math.round(deps.volumeDirTimeoutMs / 1000)} s for the volume directory and it did not appear: ${resolved.message}; nothing was restored`,
  );
}

/**
 * After a restart, a PVR may have been restored already and only its Completed status lost: its
 * marker is in place, or the pod's restore-wait init container already found it and finished
 * (and removed it). Restoring again would overwrite data the app may already be using.
 */
async function alreadyRestored(
  deps: RestoreOperationDeps,
  pvr: PodVolumeRestore,
  volume: DirRef,
  restoreUid: string,
): Promise<string | undefined> {
  const markerDir = await openDirAt(volume, restoreWaitContainer.markerDir).catch(() => undefined);
  const marker = markerDir ? await lstat(atDir(markerDir, restoreUid)).catch(() => undefined) : undefined;
  await closeDir(markerDir);
  if (marker?.isFile()) {
    return 'the volume was restored before the node agent restarted (its done marker is in place)';
  }
  const waitStatus = deps.podOnNode(pvr.spec.pod.uid)?.status?.initContainerStatuses?.find((s) => s.name === restoreWaitContainer.name);
  if (waitStatus?.state?.terminated?.exitCode === 0) {
    return `the volume was restored before the node agent restarted (the pod's ${restoreWaitContainer.name} init container already found its marker and finished)`;
  }
  return undefined;
}

/**
 * Moves every entry of `staging` into the volume (replacing same-named ones, removed without
 * following a link), then gives the volume's root the snapshot's owner, mode and mtime on its descriptor.
 */
async function moveIntoPlace(staging: DirRef, volume: DirRef): Promise<void> {
  const root = await staging.handle.stat();
  const entries = await readdir(atDir(staging, '.'));
  if (entries.includes(restoreWaitContainer.markerDir)) {
    throw new OperationFailure(
      `the snapshot holds a top-level ${restoreWaitContainer.markerDir}, which Stowage reserves for its restore markers; nothing was restored`,
    );
  }
  for (const entry of entries) {
    await removeAt(volume, entry);
    await rename(atDir(staging, entry), atDir(volume, entry));
  }
  if (process.getuid?.() === 0) await volume.handle.chown(root.uid, root.gid).catch(() => undefined);
  await volume.handle.chmod(root.mode & 0o7777);
  await volume.handle.utimes(root.atime, root.mtime);
}

function describeRestoreFailure(error: unknown, repoDir: string): string {
  if (isRepoError(error, RepoErrorCode.SnapshotNotFound)) {
    return `${error.message}: the snapshot is not in the repository at ${repoDir} (was the backup deleted, or does this node agent use another STOWAGE_STORAGE?)`;
  }
  if (isRepoError(error, RepoErrorCode.ChunkCorrupt)) return `${error.message}; run \`stowage repo verify\``;
  if (isRepoError(error, RepoErrorCode.RestoreTargetChanged)) {
    return `${error.message}; the restore was stopped: nothing was moved into the volume and it got no done marker`;
  }
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EACCES' || code === 'EPERM' || code === 'ENOSPC' || code === 'EROFS') {
    return `cannot write the restored files into the volume: ${(error as Error).message}`;
  }
  return describeCopyFailure(error, { repoDir });
}
