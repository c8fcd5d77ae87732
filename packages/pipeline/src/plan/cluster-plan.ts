/*
 * The plan step of a backup, apart from where its output goes: discovery, the paginated lists,
 * ItemBlocks, hooks and fs-backup decisions per pod, what the items pull in, and the namespaces.
 * The plan processor hands it a sink that stores blocks and adds their flows; the dry run hands it
 * one that only collects. So both read the cluster with the same calls and decide the same way.
 * It only reads: the cluster (lists and gets) and nothing else; the sink decides what to write.
 */
import {
  applyIncludeExcludePolicy,
  type BackupSpec,
  blocksOfAddedItems,
  type ClusterItem,
  clusterScopedListed,
  decideNamespace,
  dispatchOrder,
  type GroupingWarning,
  groupItemBlocksInSteps,
  groupResourceOf,
  type ItemBlock,
  isResourceIncluded,
  namespacesListedOneByOne,
  type PersistentVolume,
  type PersistentVolumeClaim,
  type Pod,
  pvbName,
  type SnapshotClassInfo,
  type VolumePolicy,
  validateResourcePolicies,
  volumeSnapshotName,
} from '@stowage/core';
import {
  type DiscoveredResource,
  discoverResources,
  getAllByName,
  type KubeClients,
  listAll,
  listSnapshotClasses,
  pvbGroup,
  pvbPlural,
} from '@stowage/kube';
import { mapInTurns, runInTurns } from '../in-turns.js';
import { type BlockPlan, itemKeyOf, type PlannedItem, type PlannedPod, type PlanSkip } from './block-plan.js';
import { type ClusterPlanProblem, forbiddenReadProblem, isForbidden } from './plan-problems.js';
import { resolvePodHooks, selectFsBackupVolumes, type VolumeContext } from './pod-decisions.js';
import { RelatedItemTracker } from './related-items.js';
import { readPolicyDocument } from './resource-policy-configmap.js';

/** Resources never backed up: Stowage's own in-flight PVBs. */
const NEVER_LISTED = new Set([`${pvbPlural}.${pvbGroup}`]);
/** Lists read ahead of their blocks (each holds one resource's items in memory until its turn). */
const LISTS_AHEAD = 4;
/**
 * What one GET costs the API server and the planner, in objects of a list page: a round trip
 * against ~1 KiB of JSON per listed object. A plan GETs the PVs of its PVCs rather than list the
 * rest of the cluster's when they are fewer than 1 in this many of those left.
 */
const GET_COSTS_LISTED_OBJECTS = 20;
/** PV GETs in flight at once: each round trip waits its turn at a busy API server (100 PVs: 4 of them). */
const PV_GETS_AT_ONCE = 32;
/**
 * Block plans built between two looks at the clock (in-turns.ts lets the event loop go once a turn
 * has lasted TURN_MS). Building 100k pods' plans in one turn held the process (the API service,
 * hosting every backup's plan and its requests) for seconds (issues #23, #45).
 */
const BLOCK_PLANS_PER_CHECK = 16;
/** The relation graph needs these three listed together before grouping. */
const RELATED = new Set(['pods', 'persistentvolumeclaims', 'persistentvolumes']);

export interface PlannedBlock {
  plan: BlockPlan;
  /** The items' manifests, in the order of plan.items. */
  manifests: unknown[];
}

export type { ClusterPlanProblem } from './plan-problems.js';

export interface ClusterPlanSink {
  /** Blocks in dispatch order, as soon as a step has planned them (a step may call this several times). */
  blocks(planned: PlannedBlock[]): Promise<void>;
  problem(problem: ClusterPlanProblem): Promise<void>;
  /** Informational lines (e.g. a pulled-in item the filters leave out). */
  note(msg: string): Promise<void>;
}

export interface ClusterPlanInput {
  kube: KubeClients;
  backupName: string;
  /** The spec with the resource policy's includeExcludePolicy merged in (resolveResourcePolicies). */
  spec: BackupSpec;
  policies: readonly VolumePolicy[];
  nodesWithAgent: ReadonlySet<string>;
  listPageSize: number;
  /**
   * A backup of at most this many named namespaces lists them one by one, and reads only the PVs
   * their PVCs are bound to (core's namespacesListedOneByOne); 0: every type across the cluster.
   */
  namespaceListsMax: number;
  /** The operator's cap on hook timeouts: a pod's timeout annotation over it is clamped (core's default when absent). */
  maxHookTimeoutMs?: number;
}

/** What the plan read besides the blocks: the PVCs and PVs (`ns/name` and name), for estimates. */
export interface ClusterPlanRead {
  pvcs: ReadonlyMap<string, PersistentVolumeClaim>;
  pvs: ReadonlyMap<string, PersistentVolume>;
}

/**
 * Plans the whole backup into `sink`. Pods, PVCs and PVs go first (their grouping needs all
 * three), then every other resource, one by one, then what the items pull in, then namespaces.
 */
export async function planCluster(input: ClusterPlanInput, sink: ClusterPlanSink): Promise<ClusterPlanRead> {
  const { kube, spec, backupName, listPageSize } = input;
  const discovery = await discoverResources(kube);
  for (const failure of discovery.failures) {
    await sink.problem({
      level: 'warn',
      onceKey: `discovery:${failure.groupVersion}`,
      msg: `discovery of ${failure.groupVersion} failed: ${failure.message}`,
    });
  }
  const resources = discovery.resources.filter((r) => {
    const gr = groupResourceOf(r);
    if (NEVER_LISTED.has(gr)) return false;
    if (r.group === '' && RELATED.has(r.resource)) return true; // listed for the relations; core decides membership
    if (!isResourceIncluded(r, spec)) return false;
    return r.namespaced || clusterScopedListed(r, spec) || (r.group === '' && r.resource === 'namespaces');
  });

  const volumeCtx: VolumeContext = {
    spec,
    policies: input.policies,
    nodesWithAgent: input.nodesWithAgent,
    pvcs: new Map(),
    pvs: new Map(),
    takenClaims: new Map(),
    snapshots: await snapshotContext(kube, spec, input.policies, discovery.resources),
  };
  const pulledIn = new RelatedItemTracker(kube, discovery.resources, spec, listPageSize);
  const emit = async (blocks: ItemBlock<ClusterItem>[]) => {
    await pulledIn.observe(blocks);
    // Decisions in grouping order (one PVB per PVC: the first pod wins), then the dispatch order:
    // blocks with PVBs interleaved by node so every node agent gets work as early as it can.
    const built = await mapInTurns(blocks, BLOCK_PLANS_PER_CHECK, (block) =>
      buildBlockPlan(block, backupName, volumeCtx, input.maxHookTimeoutMs),
    );
    const planned = dispatchOrder(built, ({ plan }) => pvbNodesOf(plan));
    if (planned.length > 0) await sink.blocks(planned);
  };
  const listedNamespaces = namespacesListedOneByOne(spec, input.namespaceListsMax);
  // A type the identity may not read is a warning and no items, not a failed plan (a 403 does not
  // pass with a retry). Items of a type listed only in part (a namespace refused) are kept.
  const readOrWarn = async (resource: DiscoveredResource, verb: string, read: () => Promise<ClusterItem[]>): Promise<ClusterItem[]> => {
    try {
      return await read();
    } catch (err) {
      if (!isForbidden(err)) throw err;
      await sink.problem(forbiddenReadProblem(resource, verb, err));
      return [];
    }
  };
  const listItems = async (resource: DiscoveredResource): Promise<ClusterItem[]> => {
    const items: ClusterItem[] = [];
    for (const namespace of resource.namespaced && listedNamespaces ? listedNamespaces : [undefined]) {
      const listed = await readOrWarn(resource, 'list', async () => {
        const found: ClusterItem[] = [];
        for await (const page of listAll(kube, { resource, namespace, pageSize: listPageSize })) {
          for (const object of page.items) found.push(toClusterItem(resource, object));
        }
        return found;
      });
      items.push(...listed);
    }
    return items;
  };

  // 1. Pods, PVCs and PVs: one grouping (pods sharing a PVC share a block). Listed at once; when
  // the backup lists a few namespaces and no cluster-scoped items, only the PVs its PVCs name.
  const relatedResources = resources.filter((r) => r.group === '' && RELATED.has(r.resource));
  const pvResource = relatedResources.find((r) => r.resource === 'persistentvolumes');
  const boundPvsOnly = listedNamespaces !== undefined && pvResource !== undefined && !clusterScopedListed(pvResource, spec);
  const listed = await Promise.all(relatedResources.filter((r) => !(boundPvsOnly && r === pvResource)).map(listItems));
  const related: ClusterItem[] = listed.flat();
  if (boundPvsOnly && pvResource) {
    const bound = await readOrWarn(pvResource, 'get', async () =>
      (await readBoundVolumes(kube, pvResource, related, listPageSize)).map((pv) => toClusterItem(pvResource, pv)),
    );
    related.push(...bound);
  }
  for (const item of related) {
    const meta = item.object.metadata;
    if (item.resource === 'persistentvolumeclaims')
      volumeCtx.pvcs.set(`${meta.namespace}/${meta.name}`, item.object as PersistentVolumeClaim);
    if (item.resource === 'persistentvolumes') volumeCtx.pvs.set(meta.name, item.object as PersistentVolume);
  }
  const grouped = await runInTurns(groupItemBlocksInSteps(related, spec));
  const warnAbout = async (warnings: readonly GroupingWarning[]) => {
    for (const warning of warnings) {
      await sink.problem({ level: 'warn', onceKey: `grouping:${warning.code}:${warning.itemKey}`, msg: warning.message });
    }
  };
  await warnAbout(grouped.warnings);

  // 2. Everything else, resource by resource (pod-free blocks, batched); namespaces last. The
  // next few lists are read while the blocks before them are stored: the same lists, one each,
  // and blocks in the same order, without a round trip to the API server between resources.
  const isNamespaces = (r: DiscoveredResource) => r.group === '' && r.resource === 'namespaces';
  const others = resources.filter((r) => !(r.group === '' && RELATED.has(r.resource)) && !isNamespaces(r));
  const reading: Array<Promise<ClusterItem[]>> = [];
  let started = 0;
  const readAhead = () => {
    for (; started < others.length && reading.length < LISTS_AHEAD; started++)
      reading.push(prefetch(listItems(others[started] as DiscoveredResource)));
  };
  readAhead();
  await emit(grouped.blocks);
  for (let read = reading.shift(); read; read = reading.shift()) {
    const listedItems = await read;
    readAhead();
    const listed = await runInTurns(groupItemBlocksInSteps(listedItems, spec, { unrelatedBatchSize: 50 }));
    await warnAbout(listed.warnings);
    await emit(listed.blocks);
  }

  // 3. What the items pull in (PriorityClasses, ClusterRoleBindings and their ClusterRoles, the
  // CRDs of custom resources), as Velero's item-block actions and backupCRD add them.
  const namespaceResource = resources.find(isNamespaces);
  // A backup of named namespaces keeps at most those: a GET each, not every page of the cluster's.
  const readNamespaces = async (resource: DiscoveredResource): Promise<ClusterItem[]> =>
    listedNamespaces
      ? readOrWarn(resource, 'get', async () =>
          (await getAllByName(kube, { resource, names: listedNamespaces })).map((object) => toClusterItem(resource, object)),
        )
      : listItems(resource);
  const namespaces = namespaceResource ? prefetch(readNamespaces(namespaceResource)) : undefined;
  const added = await pulledIn.additionalItems();
  for (const problem of added.forbidden) await sink.problem(problem);
  for (const note of added.notes) {
    if (note.level === 'warn') await sink.problem({ level: 'warn', onceKey: `related:${note.msg}`, msg: note.msg });
    else await sink.note(note.msg);
  }
  await emit(blocksOfAddedItems(added.items));

  // 4. Namespaces, now that it is known which hold items: a label-selected backup keeps the
  // namespaces of its items (Velero's nsTracker).
  if (namespaces) {
    const kept: ClusterItem[] = [];
    for (const item of await namespaces) {
      const meta = item.object.metadata;
      const phase = (item.object as { status?: { phase?: string } }).status?.phase;
      const decision = decideNamespace(
        { name: meta.name, ...(meta.labels ? { labels: meta.labels } : {}), ...(phase ? { phase } : {}) },
        spec,
        pulledIn.namespacesWithItems(),
      );
      if (decision.kept) kept.push(item);
    }
    await emit(blocksOfAddedItems(kept));
  }
  return { pvcs: volumeCtx.pvcs, pvs: volumeCtx.pvs };
}

/**
 * The PVs the listed PVCs are bound to (`spec.volumeName`: what grouping relates, as Velero's PVC
 * action pulls them in). The first page of the cluster's PVs; then a GET for each one not on it
 * when that is cheaper than listing the PVs left (a big cluster), else the other pages (a small
 * cluster, or a server that does not say how many are left).
 */
async function readBoundVolumes(
  kube: KubeClients,
  resource: DiscoveredResource,
  related: ClusterItem[],
  pageSize: number,
): Promise<unknown[]> {
  const wanted = new Set<string>();
  for (const item of related) {
    if (item.resource !== 'persistentvolumeclaims') continue;
    const volumeName = (item.object as PersistentVolumeClaim).spec?.volumeName;
    if (volumeName) wanted.add(volumeName);
  }
  const found: unknown[] = [];
  if (wanted.size === 0) return found;
  for await (const page of listAll(kube, { resource, pageSize })) {
    for (const pv of page.items) if (wanted.delete(pv.metadata?.name ?? '')) found.push(pv);
    if (wanted.size === 0) break;
    if (page.remainingItemCount !== undefined && wanted.size * GET_COSTS_LISTED_OBJECTS < page.remainingItemCount) {
      found.push(...(await getAllByName(kube, { resource, names: [...wanted], concurrency: PV_GETS_AT_ONCE })));
      break;
    }
  }
  return found;
}

/** A read started ahead of its use: its failure is thrown where it is awaited, and not reported as unhandled before. */
function prefetch<T>(read: Promise<T>): Promise<T> {
  read.catch(() => {});
  return read;
}

function toClusterItem(resource: DiscoveredResource, object: unknown): ClusterItem {
  return { group: resource.group, resource: resource.resource, namespaced: resource.namespaced, object: object as ClusterItem['object'] };
}

/**
 * What the volume decisions need to snapshot: the spec's snapshotVolumes and snapshotMoveData and
 * the cluster's VolumeSnapshotClasses — read only when some volume may be snapshotted (the spec
 * asks, or a volume policy says `snapshot`), and undefined classes when the API is not served (a
 * volume chosen for a snapshot is then an error naming that).
 */
async function snapshotContext(
  kube: KubeClients,
  spec: BackupSpec,
  policies: readonly VolumePolicy[],
  resources: readonly DiscoveredResource[],
): Promise<VolumeContext['snapshots']> {
  const wanted = spec.snapshotVolumes === true || policies.some((p) => p.action.type === 'snapshot');
  if (!wanted) return undefined;
  const served = resources.some((r) => r.group === 'snapshot.storage.k8s.io' && r.resource === 'volumesnapshotclasses');
  const classes: SnapshotClassInfo[] | undefined = served
    ? (await listSnapshotClasses(kube))?.map((c) => ({
        name: c.metadata.name,
        driver: c.driver,
        deletionPolicy: c.deletionPolicy,
        labels: c.metadata.labels,
        annotations: c.metadata.annotations,
      }))
    : undefined;
  return { volumes: spec.snapshotVolumes === true, moveData: spec.snapshotMoveData === true, classes };
}

function buildBlockPlan(block: ItemBlock<ClusterItem>, backupName: string, ctx: VolumeContext, maxHookTimeoutMs?: number): PlannedBlock {
  const items: PlannedItem[] = [];
  const manifests: unknown[] = [];
  const skips: PlanSkip[] = [];
  const errors: PlanSkip[] = [];
  const warnings: string[] = [];
  const pods: PlannedPod[] = [];
  for (const item of block.items) {
    const meta = item.object.metadata;
    const gr = groupResourceOf(item);
    const key = itemKeyOf(gr, item.namespaced ? meta.namespace : undefined, meta.name);
    items.push({
      key,
      apiVersion: item.object.apiVersion ?? '',
      kind: item.object.kind ?? '',
      groupResource: gr,
      namespace: item.namespaced ? meta.namespace : undefined,
      name: meta.name,
    });
    manifests.push(item.object);
  }
  for (const item of block.pods) {
    const pod = item.object as Pod;
    const meta = pod.metadata;
    const hooks = resolvePodHooks(pod, ctx.spec, maxHookTimeoutMs);
    skips.push(...hooks.skips);
    warnings.push(...hooks.warnings);
    const volumes = selectFsBackupVolumes(
      pod,
      ctx,
      (uid, volume) => pvbName(backupName, uid, volume),
      (uid, volume) => volumeSnapshotName(backupName, uid, volume),
    );
    for (const v of volumes) {
      const what = `pods/${meta.namespace}/${meta.name} volume ${v.name}`;
      if (v.action === 'skip') skips.push({ what, reason: v.reason ?? 'skipped' });
      if (v.action === 'error') errors.push({ what, reason: v.reason ?? 'could not be decided' });
    }
    pods.push({
      namespace: meta.namespace ?? '',
      name: meta.name,
      uid: meta.uid ?? '',
      node: pod.spec.nodeName,
      itemKey: itemKeyOf('pods', meta.namespace, meta.name),
      hooks: hooks.hooks,
      volumes,
    });
  }
  return {
    plan: { id: block.id, pods, items, skips, ...(errors.length > 0 ? { errors } : {}), ...(warnings.length > 0 ? { warnings } : {}) },
    manifests,
  };
}

/** The node of every PVB the block will create (fs-backup volumes of pods with a node). */
function pvbNodesOf(plan: BlockPlan): string[] {
  return plan.pods.flatMap((pod) =>
    pod.node ? pod.volumes.filter((v) => v.action === 'fs-backup' && v.pvbName).map(() => pod.node ?? '') : [],
  );
}

export type ResourcePolicyResolution = { ok: true; policies: VolumePolicy[]; spec: BackupSpec } | { ok: false; why: string };

/**
 * The backup's volume policies, and its spec with the includeExcludePolicy of a policy ConfigMap
 * (in Stowage's namespace) merged in (core's applyIncludeExcludePolicy); `why` when the backup
 * would fail validation here. Reads the ConfigMap only.
 */
export async function resolveResourcePolicies(kube: KubeClients, namespace: string, spec: BackupSpec): Promise<ResourcePolicyResolution> {
  const ref = spec.resourcePolicy;
  if (!ref) return { ok: true, policies: [], spec };
  if (ref.kind === 'Inline') return { ok: true, policies: ref.volumePolicies, spec };
  let configMap: { data?: Record<string, string> };
  try {
    configMap = await kube.requestJson({
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps/${encodeURIComponent(ref.name)}`,
    });
  } catch (err) {
    return { ok: false, why: `resource policy ConfigMap ${namespace}/${ref.name} cannot be read: ${(err as Error).message}` };
  }
  const read = readPolicyDocument(ref.name, configMap.data);
  if (!read.ok) return { ok: false, why: read.why };
  const res = validateResourcePolicies(read.document);
  if (!res.ok)
    return {
      ok: false,
      why: `resource policy ConfigMap ${ref.name} is invalid: ${res.problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`,
    };
  const { volumePolicies, includeExcludePolicy } = res.value;
  if (!includeExcludePolicy) return { ok: true, policies: volumePolicies, spec };
  const merged = applyIncludeExcludePolicy(spec, includeExcludePolicy);
  if (!merged.ok) return { ok: false, why: `resource policy ConfigMap ${ref.name}: ${merged.message}` };
  return { ok: true, policies: volumePolicies, spec: merged.value };
}
