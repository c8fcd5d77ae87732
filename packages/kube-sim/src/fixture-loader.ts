/**
 * Fixtures: plain Kubernetes manifests (multi-document YAML, `kind: List` allowed) plus an optional
 * `SimFixture` document that includes other manifest files. Loading creates every object through the
 * same API semantics clients see, binds PVCs to PVs, fills owner references and writes volume data.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ApiError, SimError, SimErrorCode } from './api-status.js';
import type { ClusterState } from './cluster-state.js';
import { isPlainObject, type KubeObject } from './kube-object.js';
import { type ResourceType, storageKey } from './resource-registry.js';
import {
  csiBlockPath,
  csiVolumePath,
  emptyDirPath,
  filesFromAnnotation,
  inBatches,
  materializeBlockFile,
  materializeVolume,
  type PodVolumeDir,
  type VolumeFileSpec,
} from './volume-data.js';

/** A fixture as data: the objects, and manifest files to load first (paths relative to baseDir). */
export interface Fixture {
  objects: unknown[];
  include?: string[];
  baseDir?: string;
  /** Default volume materialisation for this fixture (see SimulatorOptions.materializeVolumes). */
  materializeVolumes?: MaterializeMode;
}

/** `all`: every emptyDir/PVC volume gets its directory and files; `with-files`: only volumes with file specs; `none`. */
export type MaterializeMode = 'all' | 'with-files' | 'none';

export const simFixtureApiVersion = 'sim.stowage.dev/v1';

export function parseManifests(text: string, source: string): unknown[] {
  const objects: unknown[] = [];
  let docs: ReturnType<typeof parseAllDocuments>;
  try {
    docs = parseAllDocuments(text);
  } catch (error) {
    throw new SimError(SimErrorCode.FIXTURE_INVALID, `${source}: not valid YAML: ${(error as Error).message}`, { cause: error });
  }
  if (!Array.isArray(docs)) docs = [docs];
  for (const doc of docs) {
    if (doc.errors.length > 0) throw new SimError(SimErrorCode.FIXTURE_INVALID, `${source}: not valid YAML: ${doc.errors[0]!.message}`);
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) continue;
    if (isPlainObject(value) && value.kind === 'List' && Array.isArray(value.items)) objects.push(...value.items);
    else objects.push(value);
  }
  return objects;
}

function readManifestFile(path: string): unknown[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new SimError(SimErrorCode.FIXTURE_UNREADABLE, `cannot read fixture file ${path}: ${(error as Error).message}`, { cause: error });
  }
  return parseManifests(text, path);
}

/** Reads a fixture file (or takes a Fixture object) and returns the flat list of manifests to create. */
export function resolveFixture(fixture: string | Fixture | undefined, extraManifests: string[] = []): unknown[] {
  const objects: unknown[] = [];
  const addWithIncludes = (docs: unknown[], baseDir: string) => {
    for (const doc of docs) {
      if (isPlainObject(doc) && doc.apiVersion === simFixtureApiVersion && doc.kind === 'SimFixture') {
        const include = Array.isArray(doc.include) ? doc.include : [];
        for (const path of include) {
          if (typeof path !== 'string') throw new SimError(SimErrorCode.FIXTURE_INVALID, 'SimFixture.include must list file paths');
          const full = resolve(baseDir, path);
          addWithIncludes(readManifestFile(full), dirname(full));
        }
      } else {
        objects.push(doc);
      }
    }
  };
  for (const path of extraManifests) addWithIncludes(readManifestFile(resolve(path)), dirname(resolve(path)));
  if (typeof fixture === 'string') {
    const full = resolve(fixture);
    addWithIncludes(readManifestFile(full), dirname(full));
  } else if (fixture) {
    for (const path of fixture.include ?? []) {
      const full = resolve(fixture.baseDir ?? process.cwd(), path);
      addWithIncludes(readManifestFile(full), dirname(full));
    }
    addWithIncludes(fixture.objects, fixture.baseDir ?? process.cwd());
  }
  return objects;
}

const kindOrder = ['CustomResourceDefinition', 'Namespace', 'Node', 'StorageClass', 'PersistentVolume', 'PersistentVolumeClaim'];

function orderOf(object: unknown): number {
  const kind = isPlainObject(object) ? String(object.kind) : '';
  const index = kindOrder.indexOf(kind);
  if (index >= 0) return index;
  return kind === 'Pod' ? kindOrder.length + 1 : kindOrder.length;
}

export interface LoadResult {
  warnings: string[];
  counts: Record<string, number>;
}

/**
 * Creates the manifests in the cluster. Problems with single objects (unknown kind, invalid object)
 * are collected and thrown together; a pod that references a missing PVC only produces a warning.
 */
export function loadManifests(state: ClusterState, manifests: unknown[]): LoadResult {
  const warnings: string[] = [];
  const problems: string[] = [];
  const counts: Record<string, number> = {};
  const needOwners: { type: ResourceType; object: KubeObject }[] = [];
  const sorted = manifests
    .map((object, index) => ({ object, index }))
    .sort((a, b) => orderOf(a.object) - orderOf(b.object) || a.index - b.index);
  const ensureNamespace = (name: string) => {
    const nsType = state.registry.get('', 'v1', 'namespaces')!;
    if (!state.tryGet(nsType, '', name)) state.create(nsType, '', { metadata: { name } }, { keepStatus: true });
  };
  for (const name of ['default', 'kube-system']) ensureNamespace(name);
  let claimIndex: Map<string, string> | undefined;
  const claimedVolumes = () => {
    // Built once, after all PVs (they sort before claims), so binding stays linear for big fixtures.
    if (!claimIndex) {
      claimIndex = new Map();
      for (const pv of state.store.list('persistentvolumes', undefined)) {
        const claimRef = isPlainObject(pv.spec) && isPlainObject(pv.spec.claimRef) ? pv.spec.claimRef : undefined;
        if (claimRef) claimIndex.set(`${String(claimRef.namespace)}/${String(claimRef.name)}`, pv.metadata.name!);
      }
    }
    return claimIndex;
  };
  for (const { object, index } of sorted) {
    const where = () => {
      const meta = isPlainObject(object) && isPlainObject(object.metadata) ? object.metadata : {};
      return `manifest #${index + 1} (${isPlainObject(object) ? String(object.kind) : typeof object} ${meta.namespace ? `${String(meta.namespace)}/` : ''}${String(meta.name ?? meta.generateName ?? '?')})`;
    };
    if (!isPlainObject(object) || typeof object.apiVersion !== 'string' || typeof object.kind !== 'string') {
      problems.push(`${where()}: needs apiVersion and kind`);
      continue;
    }
    const type = state.registry.findByKind(object.apiVersion, object.kind);
    if (!type) {
      problems.push(`${where()}: no resource serves ${object.apiVersion} ${object.kind} (is its CRD in the fixture?)`);
      continue;
    }
    const meta = isPlainObject(object.metadata) ? object.metadata : {};
    const namespace = type.namespaced ? (typeof meta.namespace === 'string' && meta.namespace !== '' ? meta.namespace : 'default') : '';
    try {
      if (type.namespaced) ensureNamespace(namespace);
      let prepared = object as KubeObject;
      if (type.kind === 'PersistentVolumeClaim' && type.group === '') prepared = bindClaim(state, prepared, namespace, claimedVolumes);
      if (type.kind === 'Pod' && type.group === '') {
        const nodeName = isPlainObject(prepared.spec) ? prepared.spec.nodeName : undefined;
        if (typeof nodeName === 'string' && !state.tryGet(state.registry.get('', 'v1', 'nodes')!, '', nodeName)) {
          warnings.push(`${where()}: node ${nodeName} is not in the fixture`);
        }
        for (const claim of claimNamesOf(prepared)) {
          if (!state.tryGet(state.registry.get('', 'v1', 'persistentvolumeclaims')!, namespace, claim)) {
            warnings.push(`${where()}: persistentVolumeClaim ${claim} does not exist; the volume gets no data`);
          }
        }
      }
      const created = state.create(type, namespace, { ...prepared, metadata: { ...meta, namespace } }, { keepStatus: true });
      if (created.metadata.ownerReferences?.some((ref) => !ref.uid)) needOwners.push({ type, object: created });
      counts[type.kind] = (counts[type.kind] ?? 0) + 1;
    } catch (error) {
      if (error instanceof ApiError) problems.push(`${where()}: ${error.status.message}`);
      else throw error;
    }
  }
  fillOwnerReferences(state, needOwners);
  if (problems.length > 0) {
    throw new SimError(SimErrorCode.FIXTURE_INVALID, `the fixture has ${problems.length} problem(s):\n- ${problems.join('\n- ')}`);
  }
  state.store.compactHistory();
  return { warnings, counts };
}

function claimNamesOf(pod: KubeObject): string[] {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const volumes = Array.isArray(spec.volumes) ? spec.volumes : [];
  const claims: string[] = [];
  for (const volume of volumes) {
    if (
      isPlainObject(volume) &&
      isPlainObject(volume.persistentVolumeClaim) &&
      typeof volume.persistentVolumeClaim.claimName === 'string'
    ) {
      claims.push(volume.persistentVolumeClaim.claimName);
    }
  }
  return claims;
}

/** Binds a claim like a provisioner would: to the PV that claims it, or to a freshly provisioned `pvc-<uid>` PV. */
function bindClaim(state: ClusterState, claim: KubeObject, namespace: string, claimedVolumes: () => Map<string, string>): KubeObject {
  const pvType = state.registry.get('', 'v1', 'persistentvolumes')!;
  const spec = isPlainObject(claim.spec) ? { ...claim.spec } : {};
  const uid = typeof claim.metadata?.uid === 'string' ? claim.metadata.uid : randomUUID();
  const name = String(claim.metadata?.name ?? '');
  const accessModes = Array.isArray(spec.accessModes) ? spec.accessModes : ['ReadWriteOnce'];
  const resources = isPlainObject(spec.resources) ? spec.resources : {};
  const requests = isPlainObject(resources.requests) ? resources.requests : {};
  const capacity = { storage: typeof requests.storage === 'string' ? requests.storage : '1Gi' };
  let pvName = typeof spec.volumeName === 'string' && spec.volumeName !== '' ? spec.volumeName : undefined;
  pvName ??= claimedVolumes().get(`${namespace}/${name}`);
  if (!pvName) {
    pvName = `pvc-${uid}`;
    // the class's CSI driver provisioned it (classes load before claims)
    const className = typeof spec.storageClassName === 'string' ? spec.storageClassName : 'standard';
    const storageClass = state.store.get('storageclasses.storage.k8s.io', '', className);
    const driver = typeof storageClass?.provisioner === 'string' ? storageClass.provisioner : 'sim.csi.stowage.dev';
    state.create(
      pvType,
      '',
      {
        metadata: { name: pvName, annotations: { 'pv.kubernetes.io/provisioned-by': driver } },
        spec: {
          capacity,
          accessModes,
          persistentVolumeReclaimPolicy: 'Delete',
          storageClassName: typeof spec.storageClassName === 'string' ? spec.storageClassName : 'standard',
          volumeMode: spec.volumeMode === 'Block' ? 'Block' : 'Filesystem',
          csi: { driver, volumeHandle: pvName },
          claimRef: { kind: 'PersistentVolumeClaim', apiVersion: 'v1', namespace, name, uid },
        },
        status: { phase: 'Bound' },
      },
      { keepStatus: true },
    );
  }
  spec.volumeName = pvName;
  return {
    ...claim,
    metadata: { ...claim.metadata, uid },
    spec,
    status: isPlainObject(claim.status) ? claim.status : { phase: 'Bound', accessModes, capacity },
  };
}

/** Owner references written without a uid get the uid of the named owner in the same namespace. */
function fillOwnerReferences(state: ClusterState, objects: { type: ResourceType; object: KubeObject }[]): void {
  for (const { type, object } of objects) {
    const current = state.tryGet(type, object.metadata.namespace ?? '', object.metadata.name!);
    if (!current) continue;
    const filled = (current.metadata.ownerReferences ?? []).map((ref) => {
      if (ref.uid) return ref;
      const ownerType = state.registry.findByKind(ref.apiVersion, ref.kind);
      const owner = ownerType ? state.tryGet(ownerType, current.metadata.namespace ?? '', ref.name) : undefined;
      return owner ? { ...ref, uid: owner.metadata.uid! } : ref;
    });
    state.store.put(storageKey(type), { ...current, metadata: { ...current.metadata, ownerReferences: filled } }, { record: false });
  }
}

/** The on-disk directories of a pod's emptyDir and PVC-backed volumes (other volume kinds have none). */
export function podVolumeDirs(state: ClusterState, dataRoot: string, pod: KubeObject): PodVolumeDir[] {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const node = typeof spec.nodeName === 'string' ? spec.nodeName : undefined;
  const uid = pod.metadata.uid;
  if (!node || !uid) return [];
  const dirs: PodVolumeDir[] = [];
  const pvcType = state.registry.get('', 'v1', 'persistentvolumeclaims')!;
  for (const volume of Array.isArray(spec.volumes) ? spec.volumes : []) {
    if (!isPlainObject(volume) || typeof volume.name !== 'string') continue;
    if (isPlainObject(volume.emptyDir)) {
      dirs.push({ volume: volume.name, plugin: 'kubernetes.io~empty-dir', path: emptyDirPath(dataRoot, node, uid, volume.name) });
    } else if (isPlainObject(volume.persistentVolumeClaim) && typeof volume.persistentVolumeClaim.claimName === 'string') {
      const claimName = volume.persistentVolumeClaim.claimName;
      const claim = state.tryGet(pvcType, pod.metadata.namespace ?? '', claimName);
      const pvName = claim && isPlainObject(claim.spec) && typeof claim.spec.volumeName === 'string' ? claim.spec.volumeName : undefined;
      if (!pvName) continue;
      if (isPlainObject(claim?.spec) && claim.spec.volumeMode === 'Block') {
        dirs.push({
          volume: volume.name,
          plugin: 'kubernetes.io~csi',
          path: csiBlockPath(dataRoot, node, uid, pvName),
          claimName,
          pvName,
          block: true,
        });
        continue;
      }
      dirs.push({ volume: volume.name, plugin: 'kubernetes.io~csi', path: csiVolumePath(dataRoot, node, uid, pvName), claimName, pvName });
    }
  }
  return dirs;
}

/** Creates the volume directories of pods and writes their files; returns warnings and bytes written. */
export async function materializePodVolumes(
  state: ClusterState,
  dataRoot: string,
  pods: KubeObject[],
  mode: MaterializeMode = 'all',
  /** Which volumes to write (by pod volume name); default all. */
  include: (volume: string) => boolean = () => true,
): Promise<{ warnings: string[]; bytes: number }> {
  if (mode === 'none') return { warnings: [], bytes: 0 };
  const warnings: string[] = [];
  let bytes = 0;
  const pvcType = state.registry.get('', 'v1', 'persistentvolumeclaims')!;
  const jobs: { dir: string; specs: VolumeFileSpec[]; block: boolean }[] = [];
  for (const pod of pods) {
    const podFiles = filesFromAnnotation(pod, true);
    for (const problem of podFiles.problems) warnings.push(`pod ${pod.metadata.namespace}/${pod.metadata.name}: ${problem}`);
    const perVolume = (podFiles.files ?? {}) as Record<string, VolumeFileSpec[]>;
    for (const dir of podVolumeDirs(state, dataRoot, pod)) {
      if (!include(dir.volume)) continue;
      let specs = perVolume[dir.volume];
      if (!specs && dir.claimName) {
        const claim = state.tryGet(pvcType, pod.metadata.namespace ?? '', dir.claimName);
        if (claim) {
          const claimFiles = filesFromAnnotation(claim, false);
          for (const problem of claimFiles.problems) warnings.push(`pvc ${pod.metadata.namespace}/${dir.claimName}: ${problem}`);
          specs = claimFiles.files as VolumeFileSpec[] | undefined;
        }
      }
      if (specs || mode === 'all') jobs.push({ dir: dir.path, specs: specs ?? [], block: dir.block === true });
    }
  }
  await inBatches(jobs, 16, async (job) => {
    bytes += job.block ? await materializeBlockFile(job.dir, job.specs) : await materializeVolume(job.dir, job.specs);
  });
  return { warnings, bytes };
}
