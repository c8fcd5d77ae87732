/*
 * The planner's side of core's related-items rules: it watches the blocks as they are planned
 * (namespaces that hold items, custom resources, pods and service accounts), and at the end
 * fetches what they pull in — PriorityClasses, ClusterRoleBindings and ClusterRoles, CRDs — minus
 * what the backup already holds, each checked against the filters by core. The rules live in core;
 * this only reads the cluster.
 */
import {
  addsCrdsOfCustomResources,
  type BackupSpec,
  CLUSTER_ROLE_BINDINGS,
  CLUSTER_ROLES,
  type ClusterItem,
  type ClusterItemRef,
  type ClusterRoleBindingLike,
  CUSTOM_RESOURCE_DEFINITIONS,
  crdNameOf,
  explainRelatedItemExclusion,
  groupResourceOf,
  type ItemBlock,
  itemKey,
  PRIORITY_CLASSES,
  relatedClusterItems,
  toSelectableItem,
} from '@stowage/core';
import { type DiscoveredResource, getByName, type KubeClients, listAll } from '@stowage/kube';
import { type ClusterPlanProblem, forbiddenReadProblem, isForbidden } from './plan-problems.js';

/** Group-resources whose items may be both listed and pulled in: their keys are remembered so nothing is added twice. */
const PULLED_IN = new Set([PRIORITY_CLASSES, CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, CUSTOM_RESOURCE_DEFINITIONS].map(groupResourceOf));

export interface RelatedItemNote {
  level: 'info' | 'warn';
  msg: string;
}

export class RelatedItemTracker {
  private readonly namespaces = new Set<string>();
  private readonly emitted = new Set<string>();
  private readonly wanted = new Map<string, ClusterItemRef>();
  private readonly customResources = new Map<string, { group: string; resource: string }>();
  private bindings: ClusterRoleBindingLike[] | undefined;
  /** Types the API server would not let the tracker read (403), by group-resource. */
  private readonly forbidden = new Map<string, ClusterPlanProblem>();

  constructor(
    private readonly kube: KubeClients,
    private readonly discovered: readonly DiscoveredResource[],
    private readonly spec: BackupSpec,
    private readonly pageSize: number,
  ) {}

  /** Namespaces that hold an item of the backup so far. */
  namespacesWithItems(): ReadonlySet<string> {
    return this.namespaces;
  }

  /** Records what planned blocks hold and what they pull in. */
  async observe(blocks: readonly ItemBlock<ClusterItem>[]): Promise<void> {
    for (const block of blocks) {
      for (const item of block.items) {
        // Cheap for the common case (namespaced core items): a set insert and two comparisons.
        const meta = item.object.metadata;
        if (item.namespaced && meta.namespace) this.namespaces.add(meta.namespace);
        if (item.group !== '') {
          const groupResource = `${item.resource}.${item.group}`;
          if (!item.namespaced && PULLED_IN.has(groupResource)) this.emitted.add(itemKey(item));
          if (!this.customResources.has(groupResource))
            this.customResources.set(groupResource, { group: item.group, resource: item.resource });
        } else if (item.resource === 'pods' || item.resource === 'serviceaccounts') {
          const refs = relatedClusterItems(item, item.resource === 'serviceaccounts' ? await this.clusterRoleBindings() : []);
          for (const ref of refs) {
            const key = `${groupResourceOf(ref)}/${ref.name}`;
            if (!this.wanted.has(key)) this.wanted.set(key, ref);
          }
        }
      }
    }
  }

  /** The pulled-in items the backup does not hold yet and its filters allow, with a note for each one left out. */
  async additionalItems(): Promise<{ items: ClusterItem[]; notes: RelatedItemNote[]; forbidden: ClusterPlanProblem[] }> {
    const notes: RelatedItemNote[] = [];
    const refs = [...this.wanted.entries()];
    if (addsCrdsOfCustomResources(this.spec)) {
      for (const [groupResource, resource] of this.customResources) {
        const name = crdNameOf(resource);
        if (name)
          refs.push([
            `${groupResourceOf(CUSTOM_RESOURCE_DEFINITIONS)}/${name}`,
            { ...CUSTOM_RESOURCE_DEFINITIONS, name, because: `definition of ${groupResource}` },
          ]);
      }
    }
    const items: ClusterItem[] = [];
    for (const [key, ref] of refs) {
      if (this.emitted.has(key)) continue;
      const isCrd = groupResourceOf(ref) === groupResourceOf(CUSTOM_RESOURCE_DEFINITIONS);
      const resource = this.discovered.find((r) => r.group === ref.group && r.resource === ref.resource);
      if (!resource) {
        if (!isCrd)
          notes.push({ level: 'warn', msg: `${key} (${ref.because}) not added: the API server does not serve ${groupResourceOf(ref)}` });
        continue;
      }
      let object: ClusterItem['object'] | undefined;
      try {
        object = (await getByName(this.kube, { resource, name: ref.name })) as ClusterItem['object'] | undefined;
      } catch (err) {
        if (!isForbidden(err)) throw err;
        const problem = forbiddenReadProblem(resource, 'get', err);
        this.forbidden.set(problem.onceKey, problem);
        continue;
      }
      if (!object) {
        // A group-resource without a CRD is built in: nothing to add.
        if (!isCrd) notes.push({ level: 'warn', msg: `${key} (${ref.because}) not added: it does not exist` });
        continue;
      }
      const item: ClusterItem = { group: resource.group, resource: resource.resource, namespaced: false, object };
      const excluded = explainRelatedItemExclusion(toSelectableItem(item), this.spec);
      if (excluded !== null) {
        notes.push({ level: 'info', msg: `${key} (${ref.because}) not added: ${excluded}` });
        continue;
      }
      this.emitted.add(key);
      items.push(item);
    }
    return { items, notes, forbidden: [...this.forbidden.values()] };
  }

  private async clusterRoleBindings(): Promise<ClusterRoleBindingLike[]> {
    if (this.bindings) return this.bindings;
    const bindings: ClusterRoleBindingLike[] = [];
    const resource = this.discovered.find((r) => r.group === CLUSTER_ROLE_BINDINGS.group && r.resource === CLUSTER_ROLE_BINDINGS.resource);
    try {
      if (resource) {
        for await (const page of listAll(this.kube, { resource, pageSize: this.pageSize }))
          bindings.push(...(page.items as ClusterRoleBindingLike[]));
      }
    } catch (err) {
      // Without them a service account pulls in no ClusterRoleBinding: said once, as a type not read.
      if (!isForbidden(err) || !resource) throw err;
      const problem = forbiddenReadProblem(resource, 'list', err);
      this.forbidden.set(problem.onceKey, problem);
      bindings.length = 0;
    }
    this.bindings = bindings;
    return bindings;
  }
}
