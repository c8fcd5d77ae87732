import { constants } from 'node:fs';
import { lstat, mkdir, open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { DataDownloadClient, DataDownloadSpec, DataDownloadStatus, KubeClients } from '@stowage/kube';
import { dataDownloadLabels } from '@stowage/kube';
import { abortableSleep, type Repository, type TokenBucket } from '@stowage/repository';
import { BLOCK_VOLUME_FILE } from './backup-operation.js';
import { describeCopyFailure } from './failure-message.js';
import { resolveBlockDevice } from './volume-dir.js';
import { OperationFailure, type VolumeOperationHandler } from './volume-operation-runner.js';

export interface DownloadOperationDeps {
  kube: KubeClients;
  client: DataDownloadClient;
  nodeName: string;
  kubeletRoot: string;
  repoDir: string;
  getRepository(): Promise<Repository>;
  throttle: TokenBucket | undefined;
  /** How long a claimed DataDownload waits for its device to appear (default 30 s). */
  deviceTimeoutMs?: number;
}

/** Reasons the device may still come (kubelet attaching, provisioner binding); others fail at once. */
const TRANSIENT: ReadonlySet<string> = new Set(['dir-missing', 'claim-unbound']);

/**
 * DataDownloads of this node (`stowage.dev/node=<node>`): a moved block volume written back. The
 * repository snapshot (one file, `disk`: the device's bytes) is restored into a staging directory
 * of its own next to the kubelet's, then written from its first byte into the device of the
 * temporary pod's new claim (opened without following a link); a regular file standing for the
 * device (the simulator's) ends at the snapshot's length. A run after a restart writes it all again.
 */
export function downloadOperationHandler(deps: DownloadOperationDeps): VolumeOperationHandler<DataDownloadSpec, DataDownloadStatus> {
  const { kube, nodeName, kubeletRoot, repoDir } = deps;
  const onThisNode = (dd: { spec?: DataDownloadSpec }) => dd.spec?.node === nodeName;
  return {
    label: 'DataDownload',
    noun: 'restore',
    client: deps.client,
    labelSelector: `${dataDownloadLabels.node}=${nodeName}`,
    belongsToNode: onThisNode,
    isStartable: onThisNode,
    answersCancelOf: onThisNode,
    claimFields: {},
    messages: {
      resumed: 'resumed after the node agent restarted: the device is written again from its first byte',
      canceledBeforeStart: 'canceled before the write started (spec.cancel); nothing was written',
      canceled: (bytesDone) => `canceled on request (spec.cancel) after restoring ${bytesDone} bytes; the device is not complete`,
      canceledAtRestart: 'canceled: the node agent restarted while the cancel was pending',
    },
    isCanceledError: () => false,
    describeFailure: (error) => describeCopyFailure(error, { repoDir }),
    run: async (dd, context) => {
      if (dd.spec.volumeMode !== 'Block') {
        throw new OperationFailure(`DataDownload ${dd.metadata.name}: spec.volumeMode must be Block, got ${String(dd.spec.volumeMode)}`);
      }
      // The kubelet may still be attaching the device: waited for boundedly, as a PVR waits for its directory.
      const spec = { node: dd.spec.node, pod: dd.spec.pod, volume: dd.spec.volume, backupStorageLocation: dd.spec.backupStorageLocation };
      const deadline = Date.now() + (deps.deviceTimeoutMs ?? 30_000);
      let resolved = await resolveBlockDevice(kube, { kubeletRoot, nodeName, spec });
      while (!resolved.ok && TRANSIENT.has(resolved.reason) && Date.now() < deadline) {
        await abortableSleep(250, context.signal);
        resolved = await resolveBlockDevice(kube, { kubeletRoot, nodeName, spec });
      }
      if (!resolved.ok) throw new OperationFailure(`${resolved.message}; nothing was written`);
      context.signal.throwIfAborted();
      const staging = join(kubeletRoot, '.stowage-data-mover', dd.metadata.name);
      await rm(staging, { recursive: true, force: true });
      await mkdir(staging, { recursive: true, mode: 0o700 });
      try {
        const repo = await deps.getRepository();
        const result = await repo.restore(dd.spec.snapshotID, staging, {
          signal: context.signal,
          onProgress: context.onProgress,
          ...(deps.throttle ? { throttle: deps.throttle } : {}),
        });
        const source = join(staging, BLOCK_VOLUME_FILE);
        const info = await lstat(source).catch(() => undefined);
        if (!info?.isFile()) {
          throw new OperationFailure(
            `repository snapshot ${dd.spec.snapshotID} holds no ${BLOCK_VOLUME_FILE} file (is it a block volume's?); nothing was written`,
          );
        }
        context.signal.throwIfAborted();
        const device = await open(resolved.path, constants.O_WRONLY | constants.O_NOFOLLOW);
        try {
          const reader = await open(source, constants.O_RDONLY | constants.O_NOFOLLOW);
          try {
            const buffer = Buffer.allocUnsafe(1024 * 1024);
            for (let position = 0; ; ) {
              context.signal.throwIfAborted();
              const { bytesRead } = await reader.read(buffer, 0, buffer.length, position);
              if (bytesRead === 0) break;
              for (let written = 0; written < bytesRead; ) {
                const { bytesWritten } = await device.write(buffer, written, bytesRead - written, position + written);
                written += bytesWritten;
              }
              position += bytesRead;
            }
          } finally {
            await reader.close();
          }
          if ((await device.stat()).isFile()) await device.truncate(info.size);
          await device.sync();
        } finally {
          await device.close();
        }
        return {
          status: { path: resolved.path },
          bytes: info.size,
          details: { snapshotId: result.snapshotId, bytes: info.size, device: resolved.path },
        };
      } finally {
        await rm(staging, { recursive: true, force: true });
      }
    },
  };
}
