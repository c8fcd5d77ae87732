/** Synthetic clusters for benchmarks: namespaces × pods × volumes × bytes, as a Fixture of plain manifests. */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Fixture } from './fixture-loader.js';
import type { VolumeFileSpec } from './volume-data.js';

export const pvbCrdPath = fileURLToPath(new URL('../../../k8s/base/crd-podvolumebackups.yaml', import.meta.url));
export const pvrCrdPath = fileURLToPath(new URL('../../../k8s/base/crd-podvolumerestores.yaml', import.meta.url));

export interface HookSpec {
  /** argv of the hook command; default a freeze/unfreeze shell command. */
  command?: string[];
  /** How long the scripted hook takes in the simulator; default 100 ms (pre) / 20 ms (post). */
  durationMs?: number;
  /** Exit code the scripted hook returns; default 0. */
  exitCode?: number;
}

export interface GenerateClusterOptions {
  namespaces: number;
  podsPerNamespace: number;
  volumesPerPod: number;
  /** Bytes of file data per volume; 0 writes no files (directories only). */
  bytesPerVolume: number;
  /** Files the bytes are spread over; default 1 (when bytesPerVolume > 0). */
  filesPerVolume?: number;
  nodes: number;
  /** Add Velero-style pre/post hook annotations (and scripted exec behaviour) to every pod. */
  preHook?: boolean | HookSpec;
  postHook?: boolean | HookSpec;
  /** Namespace name prefix; default `bench` (bench-0, bench-1, ...). */
  namespacePrefix?: string;
  /** Include the PodVolumeBackup CRD and the `stowage` namespace; default true. */
  includeStowage?: boolean;
  storageClassName?: string;
}

function hookCommand(spec: boolean | HookSpec | undefined, fallback: string[]): HookSpec | undefined {
  if (!spec) return undefined;
  return spec === true ? { command: fallback } : { command: fallback, ...spec };
}

/** Builds the fixture; objects are plain manifests, so `startSimulator({ fixture })` loads them like a file. */
export function generateCluster(options: GenerateClusterOptions): Fixture {
  for (const key of ['namespaces', 'podsPerNamespace', 'volumesPerPod', 'bytesPerVolume', 'nodes'] as const) {
    const value = options[key];
    if (!Number.isInteger(value) || value < 0) throw new RangeError(`generateCluster: ${key} must be an integer >= 0, got ${value}`);
  }
  if (options.nodes < 1 && options.namespaces * options.podsPerNamespace > 0)
    throw new RangeError('generateCluster: nodes must be >= 1 when there are pods');
  const filesPerVolume = Math.max(1, options.filesPerVolume ?? 1);
  const prefix = options.namespacePrefix ?? 'bench';
  const storageClassName = options.storageClassName ?? 'standard';
  const pre = hookCommand(options.preHook, ['/bin/sh', '-c', 'sync && fsfreeze -f /data']);
  const post = hookCommand(options.postHook, ['/bin/sh', '-c', 'fsfreeze -u /data']);
  const objects: unknown[] = [];
  const nodeNames = Array.from({ length: options.nodes }, (_, i) => `node-${i}`);
  for (const name of nodeNames) {
    objects.push({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name, labels: { 'kubernetes.io/hostname': name } },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    });
  }
  if (options.includeStowage !== false) objects.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'stowage' } });
  // the claims' class, the default one, so restored (reprovisioned) claims get new volumes
  objects.push({
    apiVersion: 'storage.k8s.io/v1',
    kind: 'StorageClass',
    metadata: { name: storageClassName, annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } },
    provisioner: 'sim.csi.stowage.dev',
    reclaimPolicy: 'Delete',
    volumeBindingMode: 'Immediate',
  });
  let podIndex = 0;
  const bytesPerFile = Math.floor(options.bytesPerVolume / filesPerVolume);
  const remainder = options.bytesPerVolume - bytesPerFile * filesPerVolume;
  for (let n = 0; n < options.namespaces; n++) {
    const namespace = `${prefix}-${n}`;
    objects.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace, labels: { 'stowage.dev/bench': 'true' } } });
    for (let p = 0; p < options.podsPerNamespace; p++) {
      const podName = `app-${p}`;
      const node = nodeNames[podIndex++ % nodeNames.length]!;
      const volumes: unknown[] = [];
      const mounts: unknown[] = [];
      for (let v = 0; v < options.volumesPerPod; v++) {
        const claimName = `${podName}-data-${v}`;
        const pvName = `pv-${namespace}-${claimName}`;
        const annotations: Record<string, string> = {};
        if (options.bytesPerVolume > 0) {
          const seed = `${namespace}/${claimName}`;
          const specs: VolumeFileSpec[] = [{ path: 'data/file-{i}.bin', count: filesPerVolume, size: bytesPerFile, seed: `${seed}/{i}` }];
          if (remainder > 0) specs.push({ path: 'data/remainder.bin', size: remainder, seed: `${seed}/remainder` });
          annotations['sim.stowage.dev/files'] = JSON.stringify(specs);
        }
        const size = `${Math.max(1, Math.ceil(options.bytesPerVolume / 2 ** 30))}Gi`;
        objects.push({
          apiVersion: 'v1',
          kind: 'PersistentVolume',
          metadata: { name: pvName },
          spec: {
            capacity: { storage: size },
            accessModes: ['ReadWriteOnce'],
            persistentVolumeReclaimPolicy: 'Delete',
            storageClassName,
            csi: { driver: 'sim.csi.stowage.dev', volumeHandle: pvName },
            claimRef: { kind: 'PersistentVolumeClaim', apiVersion: 'v1', namespace, name: claimName },
          },
          status: { phase: 'Bound' },
        });
        objects.push({
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: { name: claimName, namespace, labels: { app: podName }, annotations },
          spec: { accessModes: ['ReadWriteOnce'], storageClassName, volumeName: pvName, resources: { requests: { storage: size } } },
          status: { phase: 'Bound', accessModes: ['ReadWriteOnce'], capacity: { storage: size } },
        });
        volumes.push({ name: `data-${v}`, persistentVolumeClaim: { claimName } });
        mounts.push({ name: `data-${v}`, mountPath: `/data/${v}` });
      }
      const annotations: Record<string, string> = {};
      const rules: unknown[] = [];
      if (pre) {
        annotations['pre.hook.backup.velero.io/container'] = 'app';
        annotations['pre.hook.backup.velero.io/command'] = JSON.stringify(pre.command);
        rules.push({ command: pre.command, exitCode: pre.exitCode ?? 0, durationMs: pre.durationMs ?? 100 });
      }
      if (post) {
        annotations['post.hook.backup.velero.io/container'] = 'app';
        annotations['post.hook.backup.velero.io/command'] = JSON.stringify(post.command);
        rules.push({ command: post.command, exitCode: post.exitCode ?? 0, durationMs: post.durationMs ?? 20 });
      }
      if (rules.length > 0) annotations['sim.stowage.dev/exec'] = JSON.stringify({ app: { rules } });
      objects.push({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: podName, namespace, labels: { app: podName, 'stowage.dev/bench': 'true' }, annotations },
        spec: { nodeName: node, containers: [{ name: 'app', image: 'busybox:1.36', volumeMounts: mounts }], volumes },
      });
    }
  }
  const fixture: Fixture = { objects };
  // Without data, creating tens of thousands of empty directories is the slowest part of a start: skip them.
  if (options.bytesPerVolume === 0) fixture.materializeVolumes = 'with-files';
  if (options.includeStowage !== false) fixture.include = [pvbCrdPath, pvrCrdPath].filter((path) => existsSync(path));
  return fixture;
}
