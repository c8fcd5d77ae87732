import type { KubernetesObject } from '@kubernetes/client-node';
import { groupVersionPath, mapWithConcurrency } from './discovery.js';
import type { KubeClients } from './kube-clients.js';
import { isKubeError, KubeError, KubeErrorCodes } from './kube-errors.js';

/** Which resource to list; a DiscoveredResource fits. */
export interface ResourceRef {
  /** '' for the core group. */
  group: string;
  version: string;
  /** Plural, as in the URL. */
  resource: string;
  /** Used to fill in `kind` on items when the list does not say. */
  kind?: string | undefined;
  namespaced?: boolean | undefined;
}

export interface ListAllOptions {
  resource: ResourceRef;
  /** Only this namespace; all namespaces otherwise. */
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  /** Items per request (`limit`). Default 500. */
  pageSize?: number | undefined;
}

export interface ListPage<T> {
  /** Items as the server sent them (raw JSON: timestamps are strings), with apiVersion and kind filled in. */
  items: T[];
  /** The list's resourceVersion: the snapshot every page shows (the same on each page), where a watch starts. */
  resourceVersion: string;
  /** 1 for the first page. */
  pageNumber: number;
  /** Items after this page, when the server says (Kubernetes does for lists without a selector). */
  remainingItemCount?: number | undefined;
}

interface ListJson<T> {
  kind?: string;
  apiVersion?: string;
  metadata?: { resourceVersion?: string; continue?: string; remainingItemCount?: number };
  items?: T[];
}

/** `v1` for the core group, `group/version` otherwise. */
function apiVersionOfResource(resource: ResourceRef): string {
  return resource.group === '' ? resource.version : `${resource.group}/${resource.version}`;
}

/** The collection path, e.g. `/apis/apps/v1/namespaces/ns1/deployments` or `/api/v1/nodes`. */
export function collectionPath(resource: ResourceRef, namespace?: string): string {
  const base = groupVersionPath(resource.group, resource.version);
  if (namespace === undefined) return `${base}/${resource.resource}`;
  return `${base}/namespaces/${encodeURIComponent(namespace)}/${resource.resource}`;
}

/**
 * Lists a resource page by page with `limit`/`continue`, so a 100k-object list never sits in one
 * response. Each request is retried like every other; an expired continue token (410) is thrown as
 * KUBE_EXPIRED rather than silently restarted, because restarting would yield items twice.
 */
export async function* listAll<T extends KubernetesObject = KubernetesObject>(
  kube: KubeClients,
  options: ListAllOptions,
): AsyncGenerator<ListPage<T>> {
  const { resource } = options;
  if (options.namespace !== undefined && resource.namespaced === false) {
    throw new KubeError({
      code: KubeErrorCodes.badArgument,
      message: `listAll: ${resource.resource} is cluster-scoped; it cannot be listed in namespace ${options.namespace}`,
    });
  }
  yield* listCollection<T>(kube, {
    path: collectionPath(resource, options.namespace),
    apiVersion: apiVersionOfResource(resource),
    kind: resource.kind,
    labelSelector: options.labelSelector,
    fieldSelector: options.fieldSelector,
    pageSize: options.pageSize,
  });
}

export interface ListCollectionOptions {
  /** A collection path such as `/apis/stowage.dev/v1alpha1/namespaces/stowage/podvolumebackups`. */
  path: string;
  /** Filled in on items that lack it; read from the path when not given. */
  apiVersion?: string | undefined;
  kind?: string | undefined;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  pageSize?: number | undefined;
}

/** `/api/v1/...` → `v1`, `/apis/g/v/...` → `g/v`. */
export function apiVersionOfPath(path: string): string | undefined {
  const core = /^\/api\/([^/]+)/.exec(path);
  if (core) return core[1];
  const grouped = /^\/apis\/([^/]+)\/([^/]+)/.exec(path);
  return grouped ? `${grouped[1]}/${grouped[2]}` : undefined;
}

/** listAll on a collection path (what informers use). */
export async function* listCollection<T extends KubernetesObject = KubernetesObject>(
  kube: KubeClients,
  options: ListCollectionOptions,
): AsyncGenerator<ListPage<T>> {
  const pageSize = options.pageSize ?? 500;
  if (!Number.isInteger(pageSize) || pageSize < 1) {
    throw new KubeError({
      code: KubeErrorCodes.badArgument,
      message: `listAll: pageSize must be a positive integer, got ${options.pageSize}`,
    });
  }
  const { path } = options;
  const apiVersion = options.apiVersion ?? apiVersionOfPath(path);
  let continueToken: string | undefined;
  let pageNumber = 0;
  do {
    pageNumber++;
    const list = await kube.requestJson<ListJson<T>>({
      path,
      query: { limit: pageSize, continue: continueToken, labelSelector: options.labelSelector, fieldSelector: options.fieldSelector },
      description: `list ${path} (page ${pageNumber})`,
    });
    const kind = list.kind?.endsWith('List') ? list.kind.slice(0, -'List'.length) : options.kind;
    const items = (list.items ?? []).map((item) => {
      // Kubernetes omits apiVersion/kind on list items; a backed-up manifest needs them.
      if (item.apiVersion && item.kind) return item;
      return { ...item, apiVersion: item.apiVersion ?? apiVersion ?? list.apiVersion, kind: item.kind ?? kind };
    });
    const nextToken = list.metadata?.continue || undefined;
    if (nextToken !== undefined && nextToken === continueToken) {
      throw new KubeError({ code: KubeErrorCodes.unexpected, message: `list ${path}: the server returned the same continue token twice` });
    }
    continueToken = nextToken;
    const remainingItemCount = list.metadata?.remainingItemCount;
    yield {
      items,
      resourceVersion: list.metadata?.resourceVersion ?? '',
      pageNumber,
      ...(remainingItemCount !== undefined ? { remainingItemCount } : {}),
    };
  } while (continueToken !== undefined);
}

/** Every item of listAll in one array (for small lists: nodes, one backup's PVBs). */
export async function listAllItems<T extends KubernetesObject = KubernetesObject>(
  kube: KubeClients,
  options: ListAllOptions,
): Promise<T[]> {
  const items: T[] = [];
  for await (const page of listAll<T>(kube, options)) items.push(...page.items);
  return items;
}

/**
 * One object of a resource by name, with apiVersion and kind filled in, or undefined when the
 * server does not know it (404): as a list would not have it.
 */
export async function getByName<T extends KubernetesObject = KubernetesObject>(
  kube: KubeClients,
  options: { resource: ResourceRef; namespace?: string | undefined; name: string },
): Promise<T | undefined> {
  const { resource, name } = options;
  const path = `${collectionPath(resource, options.namespace)}/${encodeURIComponent(name)}`;
  try {
    const item = await kube.requestJson<T>({ path, description: `get ${path}` });
    return { ...item, apiVersion: item.apiVersion ?? apiVersionOfResource(resource), kind: item.kind ?? resource.kind };
  } catch (err) {
    if (isKubeError(err, KubeErrorCodes.notFound)) return undefined;
    throw err;
  }
}

/** getByName for each name (at most `concurrency` at once), in the names' order; the unknown ones left out. */
export async function getAllByName<T extends KubernetesObject = KubernetesObject>(
  kube: KubeClients,
  options: { resource: ResourceRef; namespace?: string | undefined; names: readonly string[]; concurrency?: number | undefined },
): Promise<T[]> {
  const { resource, namespace } = options;
  const found = await mapWithConcurrency([...options.names], options.concurrency ?? 8, (name) =>
    getByName<T>(kube, { resource, namespace, name }),
  );
  return found.filter((item): item is Awaited<T> => item !== undefined) as T[];
}
