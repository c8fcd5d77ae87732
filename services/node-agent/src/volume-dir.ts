import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { callKube, getPod, isKubeError, type KubeClients, KubeErrorCodes, type PodVolumeBackupSpec } from '@stowage/kube';

/**
 * Where a pod volume's files are on this node, one code path for a cluster and the simulator:
 *
 *   emptyDir        <root>/pods/<pod-uid>/volumes/kubernetes.io~empty-dir/<volume>
 *   PVC-backed      <root>/pods/<pod-uid>/volumes/kubernetes.io~csi/<pv>/mount
 *                   (or any plugin: volumes/<plugin>/<pv>[/mount], e.g. kubernetes.io~nfs/<pv>)
 *   anything else   volumes/<plugin>/<volume>[/mount] under the pod's directory
 *
 * `<root>` is the kubelet root (`/var/lib/kubelet` on a node; `<dataRoot>/<node>` in the simulator).
 * The pod is read by namespace/name and its uid checked, so a recreated pod is never backed up in
 * place of the one the PVB was made for.
 */
export type VolumeDirResult =
  | { ok: true; path: string; plugin: string; pvName?: string }
  | { ok: false; reason: 'pod-gone' | 'pod-replaced' | 'wrong-node' | 'no-such-volume' | 'claim-unbound' | 'dir-missing'; message: string };

const EMPTY_DIR_PLUGIN = 'kubernetes.io~empty-dir';
const CSI_PLUGIN = 'kubernetes.io~csi';

export async function resolveVolumeDir(
  kube: KubeClients,
  options: { kubeletRoot: string; nodeName: string; spec: PodVolumeBackupSpec },
): Promise<VolumeDirResult> {
  const { spec, kubeletRoot, nodeName } = options;
  const podRef = `${spec.pod.namespace}/${spec.pod.name}`;
  const pod = await getPod(kube, spec.pod.namespace, spec.pod.name);
  if (!pod)
    return { ok: false, reason: 'pod-gone', message: `pod ${podRef} no longer exists, so its volume ${spec.volume} cannot be read` };
  if (pod.metadata?.uid !== spec.pod.uid) {
    return {
      ok: false,
      reason: 'pod-replaced',
      message: `pod ${podRef} was replaced (uid ${pod.metadata?.uid ?? 'none'}, the PVB was made for uid ${spec.pod.uid}); back it up again`,
    };
  }
  if (pod.spec?.nodeName && pod.spec.nodeName !== nodeName) {
    return {
      ok: false,
      reason: 'wrong-node',
      message: `pod ${podRef} runs on node ${pod.spec.nodeName}, not on ${nodeName} where this PVB was sent`,
    };
  }
  const volume = pod.spec?.volumes?.find((v) => v.name === spec.volume);
  if (!volume) return { ok: false, reason: 'no-such-volume', message: `pod ${podRef} has no volume named ${spec.volume}` };
  const podVolumes = join(kubeletRoot, 'pods', spec.pod.uid, 'volumes');

  if (volume.emptyDir) {
    const path = join(podVolumes, EMPTY_DIR_PLUGIN, spec.volume);
    return (await isDirectory(path)) ? { ok: true, path, plugin: EMPTY_DIR_PLUGIN } : missing(path, spec.volume, podRef);
  }

  let dirName = spec.volume;
  let pvName: string | undefined;
  if (volume.persistentVolumeClaim) {
    const claimName = volume.persistentVolumeClaim.claimName;
    const claim = await readClaim(kube, spec.pod.namespace, claimName);
    pvName = claim?.spec?.volumeName || undefined;
    if (!pvName) {
      return {
        ok: false,
        reason: 'claim-unbound',
        message: claim
          ? `persistentVolumeClaim ${spec.pod.namespace}/${claimName} of volume ${spec.volume} is not bound to a PersistentVolume`
          : `persistentVolumeClaim ${spec.pod.namespace}/${claimName} of volume ${spec.volume} does not exist`,
      };
    }
    dirName = pvName;
    const csi = join(podVolumes, CSI_PLUGIN, pvName, 'mount');
    if (await isDirectory(csi)) return { ok: true, path: csi, plugin: CSI_PLUGIN, pvName };
  }

  // Other plugins (nfs, local, in-tree drivers) name the directory after the PV or the volume.
  const plugins = await readdir(podVolumes).catch(() => [] as string[]);
  for (const plugin of plugins.sort()) {
    const base = join(podVolumes, plugin, dirName);
    for (const candidate of [join(base, 'mount'), base]) {
      if (await isDirectory(candidate)) return { ok: true, path: candidate, plugin, ...(pvName ? { pvName } : {}) };
    }
  }
  const expected = pvName ? join(podVolumes, CSI_PLUGIN, pvName, 'mount') : join(podVolumes, '<plugin>', dirName);
  return missing(expected, spec.volume, podRef);
}

function missing(path: string, volume: string, podRef: string): VolumeDirResult {
  return {
    ok: false,
    reason: 'dir-missing',
    message: `the directory of volume ${volume} of pod ${podRef} does not exist on this node: ${path} (is the kubelet root right, STOWAGE_KUBELET_ROOT, and is the volume mounted?)`,
  };
}

async function readClaim(kube: KubeClients, namespace: string, name: string) {
  try {
    return await callKube(`get persistentVolumeClaim ${namespace}/${name}`, () =>
      kube.core.readNamespacedPersistentVolumeClaim({ namespace, name }),
    );
  } catch (error) {
    if (isKubeError(error, KubeErrorCodes.notFound)) return undefined;
    throw error;
  }
}

/** A path we may not stat counts as present, so the copy reports "permission denied" with the path. */
async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'EACCES' || code === 'EPERM';
  }
}
