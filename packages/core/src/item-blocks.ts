/*
 * ItemBlock grouping (docs/architecture.md#itemblocks): a pod pulls in the PVCs it mounts; a bound PVC pulls in its PV
 * and every running pod that mounts it. Blocks are the connected components of "pod mounts PVC"
 * and "PVC is bound to PV" among the items that are in the backup, so pods sharing a PVC always
 * share a block — also when one of them is not running (it seeds the block itself; Velero's
 * answer there depended on list order, ours does not). Items that filters exclude are never
 * pulled in. Everything else is a single-item block, or optionally batched with other pod-free
 * blocks (hooks only ever run for pods, so a batch never spans pods).
 *
 * Near-linear: PVCs are indexed by namespace/name, PVs by name, a pod's claims are resolved to
 * PVCs once (running pods are linked back from the PVC), and components are found with union-find
 * (path halving, union by size) — no pod × PVC scan (Velero issue #9169). Ids and order are
 * derived from item keys only, never from input order.
 */
import type { BackupSpec } from './backup-spec.js';
import { CORE_ERROR_CODES } from './errors.js';
import { hashParts } from './hash.js';
import { claimNameOfVolume, isPodRunning, type KubeObject, type PersistentVolumeClaim, type Pod } from './kube-types.js';
import {
  EXCLUDE_FROM_BACKUP_LABEL,
  groupResourceOf,
  isItemIncluded,
  isRelatedItemIncluded,
  NEVER_BACKUP_LABEL,
  type SelectableItem,
  type SelectionSpec,
  selectsEverything,
} from './resource-selection.js';

/** One object listed from the cluster, with the resource it was listed as. */
export interface ClusterItem {
  group: string;
  resource: string;
  namespaced: boolean;
  object: KubeObject;
}

export interface ItemBlock<T extends ClusterItem = ClusterItem> {
  /** `blk-<16 hex>`, derived from the block's first item key: stable across re-plans and input order. */
  id: string;
  /** Pods first, then PVCs, then PVs, then everything else; each by key. */
  items: T[];
  keys: string[];
  /** The block's pods (the ones that get hooks and PVBs). */
  pods: T[];
}

export interface GroupingWarning {
  code:
    | typeof CORE_ERROR_CODES.CORE_GROUPING_PVC_NOT_FOUND
    | typeof CORE_ERROR_CODES.CORE_GROUPING_PV_NOT_FOUND
    | typeof CORE_ERROR_CODES.CORE_GROUPING_DUPLICATE_ITEM
    | typeof CORE_ERROR_CODES.CORE_GROUPING_NEVER_BACKUP;
  itemKey: string;
  message: string;
}

export interface GroupingResult<T extends ClusterItem = ClusterItem> {
  blocks: ItemBlock<T>[];
  warnings: GroupingWarning[];
  /** Items in some block. */
  includedCount: number;
  /** Listed items that are in no block (filtered out and not pulled in, or being deleted). */
  excludedCount: number;
}

export interface GroupingOptions {
  /**
   * How many pod-free components (a lone ConfigMap, a PVC no pod mounts, …) may share one block.
   * Default 1: every such item is its own block. Blocks with pods are never batched.
   */
  unrelatedBatchSize?: number;
}

const RANK_POD = 0;
const RANK_PVC = 1;
const RANK_PV = 2;
const RANK_OTHER = 3;

function rankOf(item: ClusterItem): number {
  if (item.group !== '') return RANK_OTHER;
  switch (item.resource) {
    case 'pods':
      return RANK_POD;
    case 'persistentvolumeclaims':
      return RANK_PVC;
    case 'persistentvolumes':
      return RANK_PV;
    default:
      return RANK_OTHER;
  }
}

/** `pods/<ns>/<name>` for namespaced items, `persistentvolumes/<name>` for cluster-scoped ones. */
export function itemKey(item: ClusterItem): string {
  const groupResource = groupResourceOf(item);
  return item.namespaced
    ? `${groupResource}/${item.object.metadata.namespace ?? ''}/${item.object.metadata.name}`
    : `${groupResource}/${item.object.metadata.name}`;
}

export function toSelectableItem(item: ClusterItem): SelectableItem {
  return {
    group: item.group,
    resource: item.resource,
    namespaced: item.namespaced,
    namespace: item.object.metadata.namespace ?? null,
    name: item.object.metadata.name,
    ...(item.object.metadata.labels ? { labels: item.object.metadata.labels } : {}),
  };
}

/** The names seen under one group-resource and namespace, and the key prefix they share. */
interface KeyScope {
  /** `pods/<ns>/` or `persistentvolumes/`: a key is this plus the name, one concatenation. */
  prefix: string;
  names: Set<string>;
  /** A '/' in the group-resource or namespace: keys from different scopes could then coincide. */
  ambiguous: boolean;
}

interface ResourceScopes {
  groupResource: string;
  cluster: KeyScope | undefined;
  byNamespace: Map<string, KeyScope>;
}

/** Everything the later phases need from the listed items, in dense per-node arrays. */
interface ItemIndex<T extends ClusterItem> {
  nodes: T[];
  keys: string[];
  ranks: Uint8Array;
  namespaces: string[];
  /** 0 = not decided, 1 = in the backup, 2 = kept out (never re-checked), 3 = being deleted */
  state: Uint8Array;
  queue: number[];
  warnings: GroupingWarning[];
  pvByName: Map<string, number>;
  /** A pod's claims are claimNames[claimStart[i]..claimEnd[i]) and the PVC each resolves to (-1: none). */
  claimStart: Int32Array;
  claimEnd: Int32Array;
  claimNames: string[];
  claimPvc: Int32Array;
  /** Running pods mounting a PVC: a linked list per PVC node (mounterHead → mounterNext …). */
  mounterHead: Int32Array;
  mounterNext: Int32Array;
  mounterPod: Int32Array;
}

/**
 * Phase 1: one pass over the input (each object's memory is touched once). Duplicates are found
 * per group-resource and namespace by name, not by hashing a freshly built key string per item
 * (that was the largest single cost). That is exact only while names, namespaces and
 * group-resources contain no '/' (true of every valid Kubernetes object); otherwise null is
 * returned and the caller retries with `byKey`, which compares whole keys.
 */
function* indexItems<T extends ClusterItem>(
  items: readonly T[],
  spec: SelectionSpec | BackupSpec,
  byKey: Set<string> | null,
): Generator<void, ItemIndex<T> | null, void> {
  const total = items.length;
  const nodes: T[] = [];
  const keys: string[] = [];
  const namespaces: string[] = [];
  const ranks = new Uint8Array(total);
  const state = new Uint8Array(total);
  const queue: number[] = [];
  const warnings: GroupingWarning[] = [];
  const scopesByGroup = new Map<string, Map<string, ResourceScopes>>(); // group → resource → scopes
  const scopesByGroupResource = new Map<string, ResourceScopes>(); // `deployments.apps` from either spelling
  // PVCs: ns → name → slot; a slot is one (namespace, claim name), so a later PVC listed under the
  // same name replaces the earlier one for pods while both keep the slot's running mounters.
  const slotsByNamespace = new Map<string, Map<string, number>>();
  const slotPvc: number[] = [];
  const pvcSlotOf = new Int32Array(total).fill(-1);
  const pvByName = new Map<string, number>();
  const claimStart = new Int32Array(total);
  const claimEnd = new Int32Array(total);
  const claimNames: string[] = [];
  const claimOwners: number[] = [];
  const running = new Uint8Array(total);
  const probe: SelectableItem = { group: '', resource: '', namespaced: true, namespace: null, name: '' };
  const everything = selectsEverything(spec);

  let seen = 0;
  for (const item of items) {
    // The selection below is the costly part (a spec at its bounds tests thousands of selector
    // terms per item): a step ends every ITEMS_PER_STEP items.
    if (++seen % ITEMS_PER_STEP === 0) yield;
    const meta = item.object.metadata;
    const name = meta.name;
    const namespace = item.namespaced ? (meta.namespace ?? '') : '';
    let resources = scopesByGroup.get(item.group);
    if (!resources) {
      resources = new Map();
      scopesByGroup.set(item.group, resources);
    }
    let scopes = resources.get(item.resource);
    if (!scopes) {
      const groupResource = groupResourceOf(item);
      scopes = scopesByGroupResource.get(groupResource) ?? { groupResource, cluster: undefined, byNamespace: new Map() };
      scopesByGroupResource.set(groupResource, scopes);
      resources.set(item.resource, scopes);
    }
    let scope = item.namespaced ? scopes.byNamespace.get(namespace) : scopes.cluster;
    if (!scope) {
      const prefix = item.namespaced ? `${scopes.groupResource}/${namespace}/` : `${scopes.groupResource}/`;
      scope = { prefix, names: new Set(), ambiguous: scopes.groupResource.includes('/') || namespace.includes('/') };
      if (item.namespaced) scopes.byNamespace.set(namespace, scope);
      else scopes.cluster = scope;
    }
    if (byKey === null && (scope.ambiguous || name.includes('/'))) return null;
    // one concatenation; equal to itemKey(item)
    const key = scope.prefix + name;
    const rank = rankOf(item);
    // PVCs and PVs are looked up by name in their relation index anyway, which doubles as their
    // duplicate check (exact while PVCs are namespaced and PVs are not; otherwise the whole-key
    // path). Other items: add and compare sizes, one hash lookup instead of has + add.
    let pvcSlots: Map<string, number> | undefined;
    let pvcSlot: number | undefined;
    let duplicate: boolean;
    if (rank === RANK_PVC) {
      if (byKey === null && !item.namespaced) return null;
      pvcSlots = slotsByNamespace.get(namespace);
      if (!pvcSlots) {
        pvcSlots = new Map();
        slotsByNamespace.set(namespace, pvcSlots);
      }
      pvcSlot = pvcSlots.get(name);
    }
    if (byKey !== null) {
      const before = byKey.size;
      byKey.add(key);
      duplicate = byKey.size === before;
    } else if (rank === RANK_PVC) {
      duplicate = pvcSlot !== undefined;
    } else if (rank === RANK_PV) {
      if (item.namespaced) return null;
      duplicate = pvByName.has(name);
    } else {
      const before = scope.names.size;
      scope.names.add(name);
      duplicate = scope.names.size === before;
    }
    if (duplicate) {
      warnings.push({
        code: CORE_ERROR_CODES.CORE_GROUPING_DUPLICATE_ITEM,
        itemKey: key,
        message: `${key} was listed twice; the first copy is used`,
      });
      continue;
    }
    const i = nodes.length;
    nodes.push(item);
    keys.push(key);
    namespaces.push(namespace);
    ranks[i] = rank;

    if (meta.deletionTimestamp) {
      state[i] = 3;
    } else if (meta.labels?.[NEVER_BACKUP_LABEL] === 'true') {
      // Stowage's own key or credentials: never in a backup, not even pulled in; said, not silent.
      state[i] = 2;
      warnings.push({
        code: CORE_ERROR_CODES.CORE_GROUPING_NEVER_BACKUP,
        itemKey: key,
        message: `${key} is left out: it carries ${NEVER_BACKUP_LABEL}=true (Stowage's own key or credentials are never stored beside the backups they protect)`,
      });
    } else if (everything) {
      // no filters: only the exclude label decides, without filling the probe
      if (meta.labels?.[EXCLUDE_FROM_BACKUP_LABEL] === 'true') {
        state[i] = 2;
      } else {
        state[i] = 1;
        queue.push(i);
      }
    } else {
      // the probe is reused: the selection functions only read it
      probe.group = item.group;
      probe.resource = item.resource;
      probe.namespaced = item.namespaced;
      probe.namespace = item.namespaced ? namespace : null;
      probe.name = name;
      probe.labels = meta.labels;
      if (isItemIncluded(probe, spec)) {
        state[i] = 1;
        queue.push(i);
      } else {
        state[i] = isRelatedItemIncluded(probe, spec) ? 0 : 2;
      }
    }

    if (rank === RANK_PVC) {
      if (pvcSlot === undefined) {
        pvcSlot = slotPvc.length;
        pvcSlots?.set(name, pvcSlot);
      }
      slotPvc[pvcSlot] = i;
      pvcSlotOf[i] = pvcSlot;
    } else if (rank === RANK_PV) {
      pvByName.set(name, i);
    } else if (rank === RANK_POD) {
      // claims go to one flat array: no array per pod
      const pod = item.object as Pod;
      claimStart[i] = claimNames.length;
      for (const volume of pod.spec.volumes ?? []) {
        const claim = claimNameOfVolume(pod, volume);
        if (claim === undefined) continue;
        claimNames.push(claim);
        claimOwners.push(i);
      }
      claimEnd[i] = claimNames.length;
      if (claimEnd[i] !== claimStart[i] && isPodRunning(pod)) running[i] = 1;
    }
  }

  // Claims resolved to PVC nodes once, after every PVC is indexed; a running pod is also linked
  // from the PVC's slot, so a PVC finds its mounters without another lookup by name.
  const slotHead = new Int32Array(slotPvc.length).fill(-1);
  const claimPvc = new Int32Array(claimNames.length).fill(-1);
  const mounterNext = new Int32Array(claimNames.length);
  const mounterPod = new Int32Array(claimNames.length);
  let mounters = 0;
  for (let e = 0; e < claimNames.length; e++) {
    const pod = claimOwners[e] as number;
    const slot = slotsByNamespace.get(namespaces[pod] as string)?.get(claimNames[e] as string);
    if (slot === undefined) continue;
    claimPvc[e] = slotPvc[slot] as number;
    if (running[pod] !== 1) continue;
    mounterPod[mounters] = pod;
    mounterNext[mounters] = slotHead[slot] as number;
    slotHead[slot] = mounters++;
  }
  const mounterHead = new Int32Array(nodes.length).fill(-1);
  for (let i = 0; i < nodes.length; i++) {
    const slot = pvcSlotOf[i] as number;
    if (slot !== -1) mounterHead[i] = slotHead[slot] as number;
  }
  return {
    nodes,
    keys,
    ranks,
    namespaces,
    state,
    queue,
    warnings,
    pvByName,
    claimStart,
    claimEnd,
    claimNames,
    claimPvc,
    mounterHead,
    mounterNext,
    mounterPod,
  };
}

export function groupItemBlocks<T extends ClusterItem>(
  items: readonly T[],
  spec: SelectionSpec | BackupSpec,
  options: GroupingOptions = {},
): GroupingResult<T> {
  return runSteps(groupItemBlocksInSteps(items, spec, options));
}

/** Items selected between two steps of groupItemBlocksInSteps. */
const ITEMS_PER_STEP = 128;

/** Runs a stepwise computation to its end in one go. */
export function runSteps<R>(steps: Generator<void, R, void>): R {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}

/**
 * groupItemBlocks in steps: the generator yields between steps (every few hundred items
 * selected, every few thousand related) and returns the result, so a caller that must not hold
 * its thread for long (the api planning a backup) can let other work run in between. Pure: when
 * to pause is the caller's decision (a clock is not core's).
 */
export function* groupItemBlocksInSteps<T extends ClusterItem>(
  items: readonly T[],
  spec: SelectionSpec | BackupSpec,
  options: GroupingOptions = {},
): Generator<void, GroupingResult<T>, void> {
  const batchSize = Math.max(1, Math.floor(options.unrelatedBatchSize ?? 1));
  const index = (yield* indexItems(items, spec, null)) ?? ((yield* indexItems(items, spec, new Set())) as ItemIndex<T>);
  const { nodes, keys, ranks, namespaces, state, queue, warnings, pvByName } = index;
  const { claimStart, claimEnd, claimNames, claimPvc, mounterHead, mounterNext, mounterPod } = index;
  const count = nodes.length;

  // 2. Union-find over the relations, pulling related items in (BFS from the listed items).
  const parent = new Int32Array(count);
  const size = new Int32Array(count).fill(1);
  for (let i = 0; i < count; i++) parent[i] = i;
  const find = (x: number): number => {
    let node = x;
    while (parent[node] !== node) {
      const grand = parent[parent[node] as number] as number;
      parent[node] = grand;
      node = grand;
    }
    return node;
  };
  const union = (a: number, b: number): void => {
    let rootA = find(a);
    let rootB = find(b);
    if (rootA === rootB) return;
    if ((size[rootA] as number) < (size[rootB] as number)) {
      const swap = rootA;
      rootA = rootB;
      rootB = swap;
    }
    parent[rootB] = rootA;
    size[rootA] = (size[rootA] as number) + (size[rootB] as number);
  };
  /** Pulls a related item in if the filters allow it; true when it is (now) in the backup. */
  const pull = (i: number): boolean => {
    const current = state[i];
    if (current === 1) return true;
    if (current !== 0) return false;
    state[i] = 1;
    queue.push(i);
    return true;
  };

  for (let head = 0; head < queue.length; head++) {
    if (head % (ITEMS_PER_STEP * 16) === ITEMS_PER_STEP * 16 - 1) yield;
    const i = queue[head] as number;
    const rank = ranks[i];
    if (rank === RANK_POD) {
      for (let e = claimStart[i] as number; e < (claimEnd[i] as number); e++) {
        const pvc = claimPvc[e] as number;
        if (pvc === -1) {
          warnings.push({
            code: CORE_ERROR_CODES.CORE_GROUPING_PVC_NOT_FOUND,
            itemKey: keys[i] as string,
            message: `pod ${namespaces[i]}/${(nodes[i] as T).object.metadata.name} mounts PVC ${claimNames[e]}, which does not exist; the pod is backed up without it`,
          });
        } else if (pull(pvc)) {
          union(i, pvc);
        }
      }
    } else if (rank === RANK_PVC) {
      const pvc = (nodes[i] as T).object as PersistentVolumeClaim;
      const volumeName = pvc.spec.volumeName;
      if (pvc.status?.phase !== 'Bound' || !volumeName) continue;
      const pv = pvByName.get(volumeName);
      if (pv === undefined) {
        warnings.push({
          code: CORE_ERROR_CODES.CORE_GROUPING_PV_NOT_FOUND,
          itemKey: keys[i] as string,
          message: `PVC ${namespaces[i]}/${pvc.metadata.name} is bound to PV ${volumeName}, which does not exist`,
        });
      } else if (pull(pv)) {
        union(i, pv);
      }
      for (let m = mounterHead[i] as number; m !== -1; m = mounterNext[m] as number) {
        const pod = mounterPod[m] as number;
        if (pull(pod)) union(i, pod);
      }
    }
  }

  // 3. Components laid out in one flat array by counting sort on their root (no per-component
  //    arrays or maps: allocation was the largest cost at 300k items).
  const byRank = (a: number, b: number): number => {
    const rankDiff = (ranks[a] as number) - (ranks[b] as number);
    if (rankDiff !== 0) return rankDiff;
    const keyA = keys[a] as string;
    const keyB = keys[b] as string;
    return keyA < keyB ? -1 : keyA > keyB ? 1 : 0;
  };
  const rootOf = new Int32Array(count);
  const componentSize = new Int32Array(count);
  let includedCount = 0;
  for (let i = 0; i < count; i++) {
    if (state[i] !== 1) continue;
    includedCount++;
    const root = find(i);
    rootOf[i] = root;
    componentSize[root] = (componentSize[root] as number) + 1;
  }
  const componentStart = new Int32Array(count);
  const roots: number[] = [];
  let offset = 0;
  for (let i = 0; i < count; i++) {
    const componentLength = componentSize[i] as number;
    if (componentLength === 0) continue;
    componentStart[i] = offset;
    roots.push(i);
    offset += componentLength;
  }
  const flat = new Int32Array(includedCount);
  const fill = componentStart.slice();
  for (let i = 0; i < count; i++) {
    if (state[i] !== 1) continue;
    const root = rootOf[i] as number;
    flat[fill[root] as number] = i;
    fill[root] = (fill[root] as number) + 1;
  }
  // members of each component by (rank, key): insertion sort, components are small
  for (const root of roots) {
    const start = componentStart[root] as number;
    const end = start + (componentSize[root] as number);
    for (let a = start + 1; a < end; a++) {
      const value = flat[a] as number;
      let b = a - 1;
      while (b >= start && byRank(flat[b] as number, value) > 0) {
        flat[b + 1] = flat[b] as number;
        b--;
      }
      flat[b + 1] = value;
    }
  }
  // Block ids come from each component's first (smallest) member key. Components are ordered
  // pods-first, then by that id: a numeric sort key (rank, 48 bits of the id) instead of string
  // comparisons, which were the largest single cost at 300k items. Ties (1 in 10^5 at 100k
  // blocks) fall back to the member key, so the order never depends on the input order.
  const sortKey = new Float64Array(count);
  const firstHash: string[] = [];
  const idPrefixes = new Float64Array(roots.length);
  for (let r = 0; r < roots.length; r++) {
    const root = roots[r] as number;
    const first = flat[componentStart[root] as number] as number;
    const hash = hashParts('block', keys[first] as string);
    firstHash[root] = hash;
    // the first 12 hex digits read in place: no slice and parseInt per block
    let prefix = 0;
    for (let c = 0; c < 12; c++) {
      const code = hash.charCodeAt(c);
      prefix = prefix * 16 + (code <= 57 ? code - 48 : code - 87);
    }
    idPrefixes[r] = prefix;
    sortKey[root] = (ranks[first] === RANK_POD ? 0 : 1) * 2 ** 48 + prefix;
  }
  roots.sort((a, b) => {
    const difference = (sortKey[a] as number) - (sortKey[b] as number);
    if (difference !== 0) return difference;
    return byRank(flat[componentStart[a] as number] as number, flat[componentStart[b] as number] as number);
  });
  // Every block id is the hash of one component's first key (a batch's first key is its first
  // component's), so ids can only repeat if two components' hashes do. Unless two share 48 bits
  // (checked with a native sort), no set of issued ids is needed.
  idPrefixes.sort();
  let prefixesRepeat = false;
  for (let r = 1; r < idPrefixes.length && !prefixesRepeat; r++) prefixesRepeat = idPrefixes[r] === idPrefixes[r - 1];
  const usedIds = prefixesRepeat ? new Set<string>() : null;
  const idFor = (firstKey: string, hash: string): string => {
    let id = `blk-${hash}`;
    if (usedIds === null) return id;
    // a 64-bit collision is astronomically unlikely; resolve it deterministically anyway
    for (let attempt = 1; usedIds.has(id); attempt++) id = `blk-${hashParts('block', firstKey, String(attempt))}`;
    usedIds.add(id);
    return id;
  };

  // 4. Blocks: components with pods alone; pod-free ones batched when asked.
  const blocks: ItemBlock<T>[] = [];
  /** One block of members[start..end), already in (rank, key) order. */
  const emit = (members: ArrayLike<number>, start: number, end: number, hash: string): void => {
    const id = idFor(keys[members[start] as number] as string, hash);
    const blockItems: T[] = new Array(end - start);
    const blockKeys: string[] = new Array(end - start);
    const pods: T[] = [];
    for (let m = start; m < end; m++) {
      const i = members[m] as number;
      blockItems[m - start] = nodes[i] as T;
      blockKeys[m - start] = keys[i] as string;
      if (ranks[i] === RANK_POD) pods.push(nodes[i] as T);
    }
    blocks.push({ id, items: blockItems, keys: blockKeys, pods });
  };
  const emitBatch = (members: number[]): void => {
    if (members.length > 1) members.sort(byRank);
    emit(members, 0, members.length, hashParts('block', keys[members[0] as number] as string));
  };
  let batch: number[] = [];
  let batchComponents = 0;
  for (const root of roots) {
    const start = componentStart[root] as number;
    const end = start + (componentSize[root] as number);
    // a component is emitted straight from the flat layout (no array per component)
    if (batchSize === 1 || ranks[flat[start] as number] === RANK_POD) {
      emit(flat, start, end, firstHash[root] as string);
      continue;
    }
    for (let m = start; m < end; m++) batch.push(flat[m] as number);
    batchComponents++;
    if (batchComponents === batchSize) {
      emitBatch(batch);
      batch = [];
      batchComponents = 0;
    }
  }
  if (batch.length > 0) emitBatch(batch);

  warnings.sort((a, b) => (a.itemKey < b.itemKey ? -1 : a.itemKey > b.itemKey ? 1 : a.message < b.message ? -1 : 1));
  return { blocks, warnings, includedCount, excludedCount: count - includedCount };
}
