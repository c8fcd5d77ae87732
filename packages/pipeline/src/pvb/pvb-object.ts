import { type NewPodVolumeBackup, pvbLabels } from '@stowage/kube';
import type { PlannedPod, PlannedVolume } from '../plan/block-plan.js';

/** The PVB object a block creates for one pod volume (Velero's shape, Stowage's group and labels). */
export function buildPvb(input: {
  backupName: string;
  backupUid: string;
  /** The block that waits for it: its post-hooks job is what the PVB informer promotes. */
  blockId: string;
  pod: PlannedPod;
  volume: PlannedVolume & { pvbName: string };
  node: string;
  backupStorageLocation: string;
}): NewPodVolumeBackup {
  const { pod, volume } = input;
  const tags: Record<string, string> = {
    backup: input.backupName,
    'backup-uid': input.backupUid,
    pod: pod.name,
    'pod-uid': pod.uid,
    ns: pod.namespace,
    volume: volume.name,
    block: input.blockId,
  };
  if (volume.claimName) tags.pvc = volume.claimName;
  return {
    metadata: {
      name: volume.pvbName,
      labels: { [pvbLabels.backupName]: input.backupName, [pvbLabels.backupUid]: input.backupUid, [pvbLabels.node]: input.node },
    },
    spec: {
      node: input.node,
      pod: { namespace: pod.namespace, name: pod.name, uid: pod.uid },
      volume: volume.name,
      backupStorageLocation: input.backupStorageLocation,
      tags,
    },
  };
}
