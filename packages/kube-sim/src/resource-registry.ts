/** The resource types the simulator serves: built-in kinds plus every CRD registered at run time. */
import type { JsonObject } from './kube-object.js';
import type { PrinterColumn } from './table.js';

export interface ResourceType {
  group: string; // '' for the core group
  version: string;
  plural: string;
  singular: string;
  kind: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  /** Has a `status` subresource: main-resource writes keep the stored status. */
  hasStatus: boolean;
  /** openAPIV3Schema of a custom resource version; undefined for built-ins. */
  schema?: JsonObject;
  /** Name of the CRD that defined this type; undefined for built-ins. */
  crdName?: string;
  /** The CRD version's `additionalPrinterColumns` (server-side printing, table.ts). */
  printerColumns?: PrinterColumn[];
  /**
   * Create-only APIs that store nothing (access reviews, TokenReview): discovery lists only
   * `create` for them and the server answers each create from its handler.
   */
  createOnly?: boolean;
}

export const standardVerbs = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

function builtin(
  group: string,
  version: string,
  plural: string,
  kind: string,
  namespaced: boolean,
  options: { shortNames?: string[]; hasStatus?: boolean; categories?: string[]; createOnly?: boolean } = {},
): ResourceType {
  return {
    ...(options.createOnly ? { createOnly: true } : {}),
    group,
    version,
    plural,
    singular: kind.toLowerCase(),
    kind,
    namespaced,
    shortNames: options.shortNames ?? [],
    categories: options.categories ?? [],
    hasStatus: options.hasStatus ?? false,
  };
}

const all = ['all'];

export function builtinResourceTypes(): ResourceType[] {
  return [
    builtin('', 'v1', 'namespaces', 'Namespace', false, { shortNames: ['ns'], hasStatus: true }),
    builtin('', 'v1', 'nodes', 'Node', false, { shortNames: ['no'], hasStatus: true }),
    builtin('', 'v1', 'pods', 'Pod', true, { shortNames: ['po'], hasStatus: true, categories: all }),
    builtin('', 'v1', 'persistentvolumeclaims', 'PersistentVolumeClaim', true, { shortNames: ['pvc'], hasStatus: true }),
    builtin('', 'v1', 'persistentvolumes', 'PersistentVolume', false, { shortNames: ['pv'], hasStatus: true }),
    builtin('', 'v1', 'services', 'Service', true, { shortNames: ['svc'], hasStatus: true, categories: all }),
    builtin('', 'v1', 'configmaps', 'ConfigMap', true, { shortNames: ['cm'] }),
    builtin('', 'v1', 'secrets', 'Secret', true),
    builtin('', 'v1', 'serviceaccounts', 'ServiceAccount', true, { shortNames: ['sa'] }),
    builtin('', 'v1', 'events', 'Event', true, { shortNames: ['ev'] }),
    builtin('', 'v1', 'endpoints', 'Endpoints', true, { shortNames: ['ep'] }),
    builtin('apps', 'v1', 'deployments', 'Deployment', true, { shortNames: ['deploy'], hasStatus: true, categories: all }),
    builtin('apps', 'v1', 'statefulsets', 'StatefulSet', true, { shortNames: ['sts'], hasStatus: true, categories: all }),
    builtin('apps', 'v1', 'daemonsets', 'DaemonSet', true, { shortNames: ['ds'], hasStatus: true, categories: all }),
    builtin('apps', 'v1', 'replicasets', 'ReplicaSet', true, { shortNames: ['rs'], hasStatus: true, categories: all }),
    builtin('batch', 'v1', 'jobs', 'Job', true, { hasStatus: true, categories: all }),
    builtin('batch', 'v1', 'cronjobs', 'CronJob', true, { shortNames: ['cj'], hasStatus: true, categories: all }),
    builtin('networking.k8s.io', 'v1', 'ingresses', 'Ingress', true, { shortNames: ['ing'], hasStatus: true }),
    builtin('storage.k8s.io', 'v1', 'storageclasses', 'StorageClass', false, { shortNames: ['sc'] }),
    // What a backup pulls in beside a pod or a service account (Velero's item-block actions).
    builtin('scheduling.k8s.io', 'v1', 'priorityclasses', 'PriorityClass', false, { shortNames: ['pc'] }),
    builtin('rbac.authorization.k8s.io', 'v1', 'clusterroles', 'ClusterRole', false),
    builtin('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings', 'ClusterRoleBinding', false),
    builtin('rbac.authorization.k8s.io', 'v1', 'roles', 'Role', true),
    builtin('rbac.authorization.k8s.io', 'v1', 'rolebindings', 'RoleBinding', true),
    builtin('autoscaling', 'v2', 'horizontalpodautoscalers', 'HorizontalPodAutoscaler', true, {
      shortNames: ['hpa'],
      hasStatus: true,
      categories: all,
    }),
    builtin('networking.k8s.io', 'v1', 'networkpolicies', 'NetworkPolicy', true, { shortNames: ['netpol'] }),
    builtin('policy', 'v1', 'poddisruptionbudgets', 'PodDisruptionBudget', true, { shortNames: ['pdb'], hasStatus: true }),
    builtin('coordination.k8s.io', 'v1', 'leases', 'Lease', true),
    // Create-only review APIs (src/auth/reviews.ts).
    builtin('authentication.k8s.io', 'v1', 'tokenreviews', 'TokenReview', false, { createOnly: true }),
    builtin('authentication.k8s.io', 'v1', 'selfsubjectreviews', 'SelfSubjectReview', false, { createOnly: true }),
    builtin('authorization.k8s.io', 'v1', 'subjectaccessreviews', 'SubjectAccessReview', false, { createOnly: true }),
    builtin('authorization.k8s.io', 'v1', 'selfsubjectaccessreviews', 'SelfSubjectAccessReview', false, { createOnly: true }),
    builtin('authorization.k8s.io', 'v1', 'selfsubjectrulesreviews', 'SelfSubjectRulesReview', false, { createOnly: true }),
    builtin('authorization.k8s.io', 'v1', 'localsubjectaccessreviews', 'LocalSubjectAccessReview', true, { createOnly: true }),
    builtin('apiextensions.k8s.io', 'v1', 'customresourcedefinitions', 'CustomResourceDefinition', false, {
      shortNames: ['crd', 'crds'],
      hasStatus: true,
    }),
  ];
}

/** Storage is shared by all versions of one group/plural, as in a real API server. */
export function storageKey(type: Pick<ResourceType, 'group' | 'plural'>): string {
  return type.group ? `${type.plural}.${type.group}` : type.plural;
}

export function apiVersionOf(type: Pick<ResourceType, 'group' | 'version'>): string {
  return type.group ? `${type.group}/${type.version}` : type.version;
}

export class ResourceRegistry {
  private readonly byGroupVersion = new Map<string, Map<string, ResourceType>>();
  private readonly builtinKeys = new Set<string>();

  constructor() {
    for (const type of builtinResourceTypes()) {
      this.add(type);
      this.builtinKeys.add(storageKey(type));
    }
  }

  add(type: ResourceType): void {
    const gv = apiVersionOf(type);
    let resources = this.byGroupVersion.get(gv);
    if (!resources) {
      resources = new Map();
      this.byGroupVersion.set(gv, resources);
    }
    resources.set(type.plural, type);
  }

  isBuiltin(key: string): boolean {
    return this.builtinKeys.has(key);
  }

  /** Removes every type a CRD defined (when the CRD is deleted or replaced). */
  removeCrd(crdName: string): ResourceType[] {
    const removed: ResourceType[] = [];
    for (const [gv, resources] of this.byGroupVersion) {
      for (const [plural, type] of resources) {
        if (type.crdName === crdName) {
          resources.delete(plural);
          removed.push(type);
        }
      }
      if (resources.size === 0) this.byGroupVersion.delete(gv);
    }
    return removed;
  }

  get(group: string, version: string, plural: string): ResourceType | undefined {
    return this.byGroupVersion.get(group ? `${group}/${version}` : version)?.get(plural);
  }

  /** Finds the served type of a manifest by apiVersion and kind (for loading fixtures). */
  findByKind(apiVersion: string, kind: string): ResourceType | undefined {
    const resources = this.byGroupVersion.get(apiVersion);
    if (!resources) return undefined;
    for (const type of resources.values()) if (type.kind === kind) return type;
    return undefined;
  }

  groupVersion(group: string, version: string): ResourceType[] | undefined {
    const resources = this.byGroupVersion.get(group ? `${group}/${version}` : version);
    return resources ? [...resources.values()] : undefined;
  }

  /** Every served [group, version] ('' for the core group). */
  groupVersionPairs(): Array<[string, string]> {
    return [...this.byGroupVersion.keys()].map((gv) => {
      const slash = gv.indexOf('/');
      return slash < 0 ? ['', gv] : [gv.slice(0, slash), gv.slice(slash + 1)];
    });
  }

  /** Groups (excluding core) with their versions, the first version listed being the preferred one. */
  groups(): Map<string, string[]> {
    const groups = new Map<string, string[]>();
    for (const gv of this.byGroupVersion.keys()) {
      const slash = gv.indexOf('/');
      if (slash < 0) continue;
      const group = gv.slice(0, slash);
      const version = gv.slice(slash + 1);
      const versions = groups.get(group) ?? [];
      versions.push(version);
      groups.set(group, versions);
    }
    for (const versions of groups.values()) versions.sort(compareKubeVersions);
    return groups;
  }
}

/** Kubernetes version priority: GA > beta > alpha, higher numbers first (v2 > v1 > v1beta2 > v1beta1 > v1alpha1). */
export function compareKubeVersions(a: string, b: string): number {
  const rank = (v: string): [number, number, number] => {
    const match = /^v(\d+)(?:(alpha|beta)(\d+))?$/.exec(v);
    if (!match) return [-1, 0, 0];
    const stability = match[2] === undefined ? 3 : match[2] === 'beta' ? 2 : 1;
    return [stability, Number(match[1]), Number(match[3] ?? 0)];
  };
  const [sa, ma, na] = rank(a);
  const [sb, mb, nb] = rank(b);
  return sb - sa || mb - ma || nb - na || a.localeCompare(b);
}
