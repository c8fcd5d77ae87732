import { link, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { DataMoverSpec, KubeClients, PodVolumeBackupSpec, PodVolumeBackupStatus, VolumeOperationClient } from '@stowage/kube';
import { pvbLabels } from '@stowage/kube';
import { isRepoError, RepoErrorCode, type Repository, type TokenBucket } from '@stowage/repository';
import { describeCopyFailure } from './failure-message.js';
import { resolveBlockDevice, resolveVolumeDir } from './volume-dir.js';
import { OperationFailure, type OperationKindLabel, type VolumeOperationHandler } from './volume-operation-runner.js';

/** The file a block volume's bytes are stored as in the repository (one file: the device). */
export const BLOCK_VOLUME_FILE = 'disk';

export interface BackupOperationDeps<Spec extends PodVolumeBackupSpec = PodVolumeBackupSpec> {
  kube: KubeClients;
  client: VolumeOperationClient<Spec, PodVolumeBackupStatus>;
  /** `PVB` (default) or `DataUpload`: the same copy, of a pod volume or of a snapshot's temporary claim. */
  label?: Extract<OperationKindLabel, 'PVB' | 'DataUpload'>;
  nodeName: string;
  kubeletRoot: string;
  repoDir: string;
  getRepository(): Promise<Repository>;
  throttle: TokenBucket | undefined;
  progressIntervalMs: number;
  /** Default: this node's PVBs (`stowage.dev/node=<node>`). */
  labelSelector?: string | undefined;
}

/**
 * PodVolumeBackups — and DataUploads, whose pod is the temporary one exposing a CSI snapshot — of
 * this node (`stowage.dev/node=<node>`): copy the volume into the repository. A block-mode volume
 * (a DataUpload's `volumeMode: Block`) is one file: its device, hard-linked as `disk` into a
 * directory of its own next to the kubelet's (never following a link) and copied from there.
 */
export function backupOperationHandler<Spec extends DataMoverSpec = PodVolumeBackupSpec>(
  deps: BackupOperationDeps<Spec>,
): VolumeOperationHandler<Spec, PodVolumeBackupStatus> {
  const { kube, nodeName, kubeletRoot, repoDir } = deps;
  const onThisNode = (pvb: { spec?: PodVolumeBackupSpec }) => pvb.spec?.node === nodeName;
  return {
    label: deps.label ?? 'PVB',
    noun: 'copy',
    client: deps.client,
    labelSelector: deps.labelSelector ?? `${pvbLabels.node}=${nodeName}`,
    belongsToNode: onThisNode,
    isStartable: onThisNode,
    answersCancelOf: onThisNode,
    claimFields: {},
    messages: {
      resumed:
        'resumed after the node agent restarted: the copy starts again from the beginning (chunks already in the repository are not written again)',
      canceledBeforeStart: 'canceled before the copy started (spec.cancel); nothing was copied',
      canceled: (bytesDone) => `canceled on request (spec.cancel) after reading ${bytesDone} bytes; no snapshot was written`,
      canceledAtRestart: 'canceled: the node agent restarted while the cancel was pending; no snapshot was written',
    },
    isCanceledError: (error) => isRepoError(error, RepoErrorCode.BackupCanceled),
    describeFailure: (error) => describeCopyFailure(error, { repoDir }),
    run: async (pvb, context) => {
      const block = pvb.spec.volumeMode === 'Block';
      const resolved = block
        ? await resolveBlockDevice(kube, { kubeletRoot, nodeName, spec: pvb.spec })
        : await resolveVolumeDir(kube, { kubeletRoot, nodeName, spec: pvb.spec });
      if (!resolved.ok) throw new OperationFailure(resolved.message);
      context.signal.throwIfAborted();
      if (block) {
        const staging = join(kubeletRoot, '.stowage-data-mover', pvb.metadata.name);
        await rm(staging, { recursive: true, force: true });
        await mkdir(staging, { recursive: true, mode: 0o700 });
        try {
          await link(resolved.path, join(staging, BLOCK_VOLUME_FILE));
          return await copy(pvb, staging, context);
        } finally {
          await rm(staging, { recursive: true, force: true });
        }
      }
      return copy(pvb, resolved.path, context);
    },
  };

  async function copy(
    pvb: Parameters<VolumeOperationHandler<Spec, PodVolumeBackupStatus>['run']>[0],
    volumeDir: string,
    context: Parameters<VolumeOperationHandler<Spec, PodVolumeBackupStatus>['run']>[1],
  ) {
    const repo = await deps.getRepository();
    let result: Awaited<ReturnType<Repository['backup']>>;
    try {
      result = await repo.backup(volumeDir, {
        tags: { ...(pvb.spec.tags ?? {}), pvb: pvb.metadata.name, node: nodeName, volume: pvb.spec.volume, 'pod-uid': pvb.spec.pod.uid },
        signal: context.signal,
        onProgress: context.onProgress,
        progressIntervalMs: Math.min(250, deps.progressIntervalMs),
        ...(deps.throttle ? { throttle: deps.throttle } : {}),
      });
    } catch (error) {
      if (context.signal.aborted || isRepoError(error, RepoErrorCode.BackupCanceled)) throw error;
      throw new OperationFailure(describeCopyFailure(error, { repoDir, volumeDir }), { cause: error });
    }
    const skipped = result.stats.skipped;
    return {
      status: {
        snapshotID: result.snapshotId,
        path: volumeDir,
        ...(skipped.length > 0
          ? {
              message: `${skipped.length} entries were left out (sockets, FIFOs, devices, files removed or replaced by links during the copy), e.g. ${skipped[0]!.path}: ${skipped[0]!.reason}`,
            }
          : {}),
      },
      bytes: result.stats.bytes,
      details: { snapshotId: result.snapshotId, bytes: result.stats.bytes, newChunks: result.stats.newChunks },
    };
  }
}
