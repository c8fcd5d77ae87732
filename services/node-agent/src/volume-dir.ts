import { lstat, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { callKube, getPod, isKubeError, type KubeClients, KubeErrorCodes, type PodVolumeBackupSpec } from '@stowage/kube';

/**
 * Where a pod volume's files are on this node, one code path for a cluster and the simulator. The
 * kubelet keeps every volume under `<root>/pods/<pod-uid>/volumes/<plugin>/<name>`, and where the
 * data is below that depends on the plugin (kubelet volume plugins, as Velero reads them):
 *
 *   emptyDir                 kubernetes.io~empty-dir/<volume>            the data itself
 *   CSI (PV or inline)       kubernetes.io~csi/<pv or volume>/mount      only `mount`: `<pv>/` holds
 *                                                                         the kubelet's vol_data.json
 *   PV migrated to CSI       kubernetes.io~csi/<pv>/mount                (annotation pv.kubernetes.io/migrated-to)
 *   other PVs (nfs, local…)  kubernetes.io~<plugin>/<pv>                 the mount point itself
 *   other inline sources     kubernetes.io~<plugin>/<volume>
 *   generic ephemeral        as the PVC `<pod>-<volume>` it created
 *
 * A missing data directory is a failure naming the path, never an empty backup: for CSI nothing
 * but `mount` is read. For a non-CSI plugin whose directory name we do not know (flex vendors),
 * any plugin directory but CSI's holding `<name>` is used, as Velero's node agent does.
 * `<root>` is the kubelet root (`/var/lib/kubelet` on a node; `<dataRoot>/<node>` in the simulator).
 * The pod is read by namespace/name and its uid checked, so a recreated pod is never backed up in
 * place of the one the PVB was made for.
 */
export type VolumeDirResult =
  | { ok: true; path: string; plugin: string; pvName?: string }
  | {
      ok: false;
      reason: 'pod-gone' | 'pod-replaced' | 'wrong-node' | 'no-such-volume' | 'claim-unbound' | 'no-volume-dir' | 'dir-missing';
      message: string;
    };

const EMPTY_DIR_PLUGIN = 'kubernetes.io~empty-dir';
const CSI_PLUGIN = 'kubernetes.io~csi';

/** Kubelet plugin directory names of in-tree volume sources (`kubernetes.io~<name>`), by the source's field. */
const IN_TREE_PLUGINS: Readonly<Record<string, string>> = {
  awsElasticBlockStore: 'aws-ebs',
  azureDisk: 'azure-disk',
  azureFile: 'azure-file',
  cephfs: 'cephfs',
  cinder: 'cinder',
  fc: 'fc',
  gcePersistentDisk: 'gce-pd',
  gitRepo: 'git-repo',
  glusterfs: 'glusterfs',
  iscsi: 'iscsi',
  local: 'local-volume',
  nfs: 'nfs',
  photonPersistentDisk: 'photon-pd',
  portworxVolume: 'portworx-volume',
  quobyte: 'quobyte',
  rbd: 'rbd',
  scaleIO: 'scaleio',
  storageos: 'storageos',
  vsphereVolume: 'vsphere-volume',
};
/** Sources the kubelet keeps no data directory for (hostPath is the node's own path; the rest are never backed up). */
const NO_DIRECTORY = ['hostPath', 'secret', 'configMap', 'projected', 'downwardAPI'];

/** Where one volume's data is, relative to the pod's `volumes` directory. */
export type VolumeDirLayout =
  | { kind: 'exact'; plugin: string; dir: string; data: string }
  /** A non-CSI source whose plugin directory name is not known: `<any plugin but CSI>/<dir>`. */
  | { kind: 'any-plugin'; preferred?: string; dir: string }
  | { kind: 'none'; why: string };

/** The parts of a volume source (pod volume or PV spec) that decide its layout. */
export type VolumeSourceFields = Readonly<Record<string, unknown>>;

/**
 * The kubelet layout of a volume: from the pod volume, or for a PVC-backed one from its PV
 * (`pv` = the PV's name, spec and annotations). Pure: the directory rules per plugin.
 */
export function kubeletVolumeLayout(
  volume: { name: string } & VolumeSourceFields,
  pv?: { name: string; spec: VolumeSourceFields; annotations?: Readonly<Record<string, string>> },
): VolumeDirLayout {
  if (pv) {
    const migrated = pv.annotations?.['pv.kubernetes.io/migrated-to'];
    if (pv.spec.csi || migrated) return { kind: 'exact', plugin: CSI_PLUGIN, dir: pv.name, data: join(pv.name, 'mount') };
    return layoutOfSource(pv.spec, pv.name);
  }
  if (volume.emptyDir) return { kind: 'exact', plugin: EMPTY_DIR_PLUGIN, dir: volume.name, data: volume.name };
  if (volume.csi) return { kind: 'exact', plugin: CSI_PLUGIN, dir: volume.name, data: join(volume.name, 'mount') };
  return layoutOfSource(volume, volume.name);
}

function layoutOfSource(source: VolumeSourceFields, dir: string): VolumeDirLayout {
  const none = NO_DIRECTORY.find((field) => source[field]);
  if (none) return { kind: 'none', why: `${none} volumes have no data directory under the kubelet` };
  const field = Object.keys(IN_TREE_PLUGINS).find((key) => source[key]);
  if (field) {
    const plugin = `kubernetes.io~${IN_TREE_PLUGINS[field]}`;
    return { kind: 'exact', plugin, dir, data: dir };
  }
  return { kind: 'any-plugin', dir };
}

/**
 * Finds the data directory of a layout under `podVolumes` (`<root>/pods/<uid>/volumes`); a missing
 * one is `dir-missing` naming the path that was expected.
 */
export async function findVolumeDir(
  podVolumes: string,
  layout: VolumeDirLayout,
  what: { volume: string; podRef: string; pvName?: string },
): Promise<VolumeDirResult> {
  const pv = what.pvName ? { pvName: what.pvName } : {};
  switch (layout.kind) {
    case 'none':
      return {
        ok: false,
        reason: 'no-volume-dir',
        message: `volume ${what.volume} of pod ${what.podRef} cannot be backed up: ${layout.why}`,
      };
    case 'exact': {
      const path = join(podVolumes, layout.plugin, layout.data);
      if (await isDirectory(path)) return { ok: true, path, plugin: layout.plugin, ...pv };
      return missing(path, what.volume, what.podRef, await presentButEmptyParent(podVolumes, layout));
    }
    case 'any-plugin': {
      const plugins = (await readdir(podVolumes).catch(() => [] as string[])).filter((p) => p !== CSI_PLUGIN).sort();
      for (const plugin of plugins) {
        const path = join(podVolumes, plugin, layout.dir);
        if (await isDirectory(path)) return { ok: true, path, plugin, ...pv };
      }
      return missing(join(podVolumes, '<plugin>', layout.dir), what.volume, what.podRef, undefined);
    }
    default: {
      const unknown: never = layout;
      throw new Error(`unknown volume layout ${JSON.stringify(unknown)}`);
    }
  }
}

/** For CSI: the volume's own directory exists (the kubelet set it up) but its `mount` does not. */
async function presentButEmptyParent(podVolumes: string, layout: Extract<VolumeDirLayout, { kind: 'exact' }>): Promise<string | undefined> {
  if (layout.data === layout.dir) return undefined;
  const parent = join(podVolumes, layout.plugin, layout.dir);
  return (await isDirectory(parent))
    ? `${parent} exists but holds no data directory (a CSI volume's data is only in its mount directory: is the volume mounted?)`
    : undefined;
}

/** What resolveVolumeDir reads of the pod: a V1Pod from the API, or the raw pod of an informer. */
export interface PodForVolumeDir {
  metadata?: { uid?: string | undefined } | undefined;
  spec?:
    | {
        nodeName?: string | undefined;
        volumes?: Array<{ name: string; persistentVolumeClaim?: { claimName: string } | undefined; ephemeral?: unknown }> | undefined;
      }
    | undefined;
}

export async function resolveVolumeDir(
  kube: KubeClients,
  options: {
    kubeletRoot: string;
    nodeName: string;
    spec: PodVolumeBackupSpec;
    /**
     * The pod as this agent's own informer has it, when it has it (matched by uid, on this node):
     * no API read then. Without it the pod is read by namespace/name and its uid checked.
     */
    knownPod?: PodForVolumeDir | undefined;
  },
): Promise<VolumeDirResult> {
  const { spec, kubeletRoot } = options;
  const podRef = `${spec.pod.namespace}/${spec.pod.name}`;
  const checked = await checkPodVolume(kube, options);
  if (!checked.ok) return checked;
  const { volume } = checked;
  const podVolumes = join(kubeletRoot, 'pods', spec.pod.uid, 'volumes');

  // A generic ephemeral volume is a PVC the pod's controller named `<pod>-<volume>`.
  const claimName = volume.persistentVolumeClaim?.claimName ?? (volume.ephemeral ? `${spec.pod.name}-${spec.volume}` : undefined);
  if (claimName === undefined) {
    return findVolumeDir(podVolumes, kubeletVolumeLayout(volume as unknown as { name: string } & VolumeSourceFields), {
      volume: spec.volume,
      podRef,
    });
  }
  const claim = await readClaim(kube, spec.pod.namespace, claimName);
  const pvName = claim?.spec?.volumeName || undefined;
  if (!pvName) {
    return {
      ok: false,
      reason: 'claim-unbound',
      message: claim
        ? `persistentVolumeClaim ${spec.pod.namespace}/${claimName} of volume ${spec.volume} is not bound to a PersistentVolume`
        : `persistentVolumeClaim ${spec.pod.namespace}/${claimName} of volume ${spec.volume} does not exist`,
    };
  }
  const pv = await readVolume(kube, pvName);
  // A PV we may not read (or that is gone) is looked for as CSI: what every provisioner makes today.
  const layout = kubeletVolumeLayout(volume as unknown as { name: string } & VolumeSourceFields, {
    name: pvName,
    spec: (pv?.spec as VolumeSourceFields | undefined) ?? { csi: {} },
    ...(pv?.metadata?.annotations ? { annotations: pv.metadata.annotations } : {}),
  });
  return findVolumeDir(podVolumes, layout, { volume: spec.volume, podRef, pvName });
}

type PodVolumeOf<P> = NonNullable<NonNullable<P extends { spec?: infer S } ? S : never> extends { volumes?: infer V } ? V : never>;

/** The pod (read, or known) is the one the operation was made for, on this node, with the volume. */
async function checkPodVolume(
  kube: KubeClients,
  options: { nodeName: string; spec: PodVolumeBackupSpec; knownPod?: PodForVolumeDir | undefined },
): Promise<{ ok: true; volume: PodVolumeOf<PodForVolumeDir>[number] } | Extract<VolumeDirResult, { ok: false }>> {
  const { spec, nodeName } = options;
  const podRef = `${spec.pod.namespace}/${spec.pod.name}`;
  const pod: PodForVolumeDir | undefined = options.knownPod ?? (await getPod(kube, spec.pod.namespace, spec.pod.name));
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
  return { ok: true, volume };
}

/**
 * Where a block-mode (`volumeDevices`) CSI volume of a pod is on this node: the kubelet's
 * `<root>/pods/<uid>/volumeDevices/kubernetes.io~csi/<pv>` (a regular file in the simulator, the
 * device node on a node). Same checks of the pod as resolveVolumeDir; a symbolic link there is
 * refused (never followed).
 */
export async function resolveBlockDevice(
  kube: KubeClients,
  options: { kubeletRoot: string; nodeName: string; spec: PodVolumeBackupSpec },
): Promise<VolumeDirResult> {
  const { spec, kubeletRoot } = options;
  const podRef = `${spec.pod.namespace}/${spec.pod.name}`;
  const checked = await checkPodVolume(kube, options);
  if (!checked.ok) return checked;
  const claimName = checked.volume.persistentVolumeClaim?.claimName;
  const claim = claimName ? await readClaim(kube, spec.pod.namespace, claimName) : undefined;
  const pvName = claim?.spec?.volumeName || undefined;
  if (!pvName) {
    return {
      ok: false,
      reason: 'claim-unbound',
      message: `block volume ${spec.volume} of pod ${podRef} has no bound persistentVolumeClaim (${claimName ?? 'none'})`,
    };
  }
  const path = join(kubeletRoot, 'pods', spec.pod.uid, 'volumeDevices', CSI_PLUGIN, pvName);
  try {
    const info = await lstat(path);
    if (!info.isFile() && !info.isBlockDevice()) {
      return {
        ok: false,
        reason: 'dir-missing',
        message: `the device of block volume ${spec.volume} of pod ${podRef} at ${path} is not a file or device`,
      };
    }
  } catch {
    return missing(path, spec.volume, podRef, 'is the block volume attached to the pod?');
  }
  return { ok: true, path, plugin: CSI_PLUGIN, pvName };
}

function missing(path: string, volume: string, podRef: string, detail: string | undefined): VolumeDirResult {
  return {
    ok: false,
    reason: 'dir-missing',
    message: `the data directory of volume ${volume} of pod ${podRef} does not exist on this node: ${path} (${detail ?? 'is the kubelet root right, STOWAGE_KUBELET_ROOT, and is the volume mounted?'})`,
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

async function readVolume(kube: KubeClients, name: string) {
  try {
    return await callKube(`get persistentVolume ${name}`, () => kube.core.readPersistentVolume({ name }));
  } catch (error) {
    if (isKubeError(error, KubeErrorCodes.notFound) || isKubeError(error, KubeErrorCodes.forbidden)) return undefined;
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
