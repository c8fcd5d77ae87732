import type { KubeClients, PodVolumeBackupSpec, PodVolumeBackupStatus, PvbClient } from '@stowage/kube';
import { pvbLabels } from '@stowage/kube';
import { isRepoError, RepoErrorCode, type Repository, type TokenBucket } from '@stowage/repository';
import { describeCopyFailure } from './failure-message.js';
import { resolveVolumeDir } from './volume-dir.js';
import { OperationFailure, type VolumeOperationHandler } from './volume-operation-runner.js';

export interface BackupOperationDeps {
  kube: KubeClients;
  client: PvbClient;
  nodeName: string;
  kubeletRoot: string;
  repoDir: string;
  getRepository(): Promise<Repository>;
  throttle: TokenBucket | undefined;
  progressIntervalMs: number;
}

/** PodVolumeBackups of this node (`stowage.dev/node=<node>`): copy the volume into the repository. */
export function backupOperationHandler(deps: BackupOperationDeps): VolumeOperationHandler<PodVolumeBackupSpec, PodVolumeBackupStatus> {
  const { kube, nodeName, kubeletRoot, repoDir } = deps;
  const onThisNode = (pvb: { spec?: PodVolumeBackupSpec }) => pvb.spec?.node === nodeName;
  return {
    label: 'PVB',
    noun: 'copy',
    client: deps.client,
    labelSelector: `${pvbLabels.node}=${nodeName}`,
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
      const resolved = await resolveVolumeDir(kube, { kubeletRoot, nodeName, spec: pvb.spec });
      if (!resolved.ok) throw new OperationFailure(resolved.message);
      const volumeDir = resolved.path;
      context.signal.throwIfAborted();
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
                message: `${skipped.length} entries were left out (sockets, FIFOs, devices or files removed during the copy), e.g. ${skipped[0]!.path}`,
              }
            : {}),
        },
        bytes: result.stats.bytes,
        details: { snapshotId: result.snapshotId, bytes: result.stats.bytes, newChunks: result.stats.newChunks },
      };
    },
  };
}
