import { chmod, chown, lstat, mkdir, readdir, rename, rm, rmdir, stat, utimes, writeFile } from 'node:fs/promises';
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
import { abortableSleep, isRepoError, RepoErrorCode, type Repository, type TokenBucket } from '@stowage/repository';
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
      const markerDir = join(volumeDir, restoreWaitContainer.markerDir);
      // The volume's content is the pod's: never follow a .stowage it made into a link elsewhere.
      const existing = await lstat(markerDir).catch(() => undefined);
      if (existing && !existing.isDirectory()) {
        throw new OperationFailure(
          `${markerDir} exists and is not a directory; the agent restores nothing through it (remove it and restore again)`,
        );
      }
      const marker = join(markerDir, restoreUid);
      if (context.resumed) {
        const already = await alreadyRestored(deps, pvr, marker);
        if (already) {
          return {
            status: { message: already },
            bytes: pvr.status?.progress?.totalBytes ?? 0,
            details: { volumeDir, alreadyRestored: true },
          };
        }
      }
      // Staged under .stowage and moved into place only when complete: a crash or cancel never
      // leaves half-restored files at the volume's root, and a resume discards the staging dir.
      const staging = join(markerDir, `restoring-${name}`);
      await mkdir(markerDir, { recursive: true });
      await rm(staging, { recursive: true, force: true });
      const repo = await deps.getRepository();
      let result: Awaited<ReturnType<Repository['restore']>>;
      try {
        result = await repo.restore(pvr.spec.snapshotID, staging, {
          signal: context.signal,
          onProgress: context.onProgress,
          ...(deps.throttle ? { throttle: deps.throttle } : {}),
        });
        context.signal.throwIfAborted();
        await moveIntoPlace(staging, volumeDir);
      } catch (error) {
        // Leave the volume as it was: no staging dir, and no .stowage unless something else is in it.
        await rm(staging, { recursive: true, force: true }).catch(() => undefined);
        await rmdir(markerDir).catch(() => undefined);
        throw error;
      }
      await writeFile(marker, `${JSON.stringify({ pvr: name, node: nodeName, restoredAt: new Date().toISOString() })}\n`);
      return {
        status: {},
        bytes: result.bytes,
        details: { snapshotId: result.snapshotId, bytes: result.bytes, files: result.files, volumeDir },
      };
    },
  };
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
async function alreadyRestored(deps: RestoreOperationDeps, pvr: PodVolumeRestore, marker: string): Promise<string | undefined> {
  if (
    await stat(marker).then(
      () => true,
      () => false,
    )
  ) {
    return 'the volume was restored before the node agent restarted (its done marker is in place)';
  }
  const waitStatus = deps.podOnNode(pvr.spec.pod.uid)?.status?.initContainerStatuses?.find((s) => s.name === restoreWaitContainer.name);
  if (waitStatus?.state?.terminated?.exitCode === 0) {
    return `the volume was restored before the node agent restarted (the pod's ${restoreWaitContainer.name} init container already found its marker and finished)`;
  }
  return undefined;
}

/** Moves every entry of `staging` into `volumeDir` (replacing same-named ones), then gives the root the snapshot's mode and mtime. */
async function moveIntoPlace(staging: string, volumeDir: string): Promise<void> {
  const root = await stat(staging);
  const entries = await readdir(staging);
  if (entries.includes(restoreWaitContainer.markerDir)) {
    throw new OperationFailure(
      `the snapshot holds a top-level ${restoreWaitContainer.markerDir}, which Stowage reserves for its restore markers; nothing was restored`,
    );
  }
  for (const entry of entries) {
    const target = join(volumeDir, entry);
    await rm(target, { recursive: true, force: true });
    await rename(join(staging, entry), target);
  }
  await rm(staging, { recursive: true, force: true });
  if (process.getuid?.() === 0) await chown(volumeDir, root.uid, root.gid).catch(() => undefined);
  await chmod(volumeDir, root.mode & 0o7777);
  await utimes(volumeDir, root.atime, root.mtime);
}

function describeRestoreFailure(error: unknown, repoDir: string): string {
  if (isRepoError(error, RepoErrorCode.SnapshotNotFound)) {
    return `${error.message}: the snapshot is not in the repository at ${repoDir} (was the backup deleted, or does this node agent use another STOWAGE_STORAGE?)`;
  }
  if (isRepoError(error, RepoErrorCode.ChunkCorrupt)) return `${error.message}; run \`stowage repo verify\``;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EACCES' || code === 'EPERM' || code === 'ENOSPC' || code === 'EROFS') {
    return `cannot write the restored files into the volume: ${(error as Error).message}`;
  }
  return describeCopyFailure(error, { repoDir });
}
