import type { KubeClients } from './kube-clients.js';
import { toKubeError } from './kube-errors.js';

/** One resource type the API server serves and lets us list. */
export interface DiscoveredResource {
  /** '' for the core group. */
  group: string;
  version: string;
  /** `v1` or `apps/v1`: what goes in an object's apiVersion. */
  groupVersion: string;
  /** The plural used in paths: `pods`, `podvolumebackups`. */
  resource: string;
  kind: string;
  namespaced: boolean;
  verbs: string[];
  shortNames: string[];
}

export interface DiscoveryFailure {
  groupVersion: string;
  message: string;
}

export interface DiscoveryResult {
  resources: DiscoveredResource[];
  /** Group versions whose resource list could not be read (an aggregated API that is down, say). */
  failures: DiscoveryFailure[];
}

interface ApiResourceJson {
  name?: string;
  kind?: string;
  namespaced?: boolean;
  verbs?: string[];
  shortNames?: string[];
}

interface ApiResourceListJson {
  groupVersion?: string;
  resources?: ApiResourceJson[];
}

interface ApiGroupListJson {
  groups?: Array<{ name?: string; preferredVersion?: { groupVersion?: string }; versions?: Array<{ groupVersion?: string }> }>;
}

interface ApiVersionsJson {
  versions?: string[];
}

/** Splits `apps/v1` into group and version; `v1` is the core group. */
export function splitGroupVersion(groupVersion: string): { group: string; version: string } {
  const slash = groupVersion.indexOf('/');
  return slash < 0 ? { group: '', version: groupVersion } : { group: groupVersion.slice(0, slash), version: groupVersion.slice(slash + 1) };
}

/** `/api/v1` for the core group, `/apis/<group>/<version>` otherwise. */
export function groupVersionPath(group: string, version: string): string {
  return group === '' ? `/api/${version}` : `/apis/${group}/${version}`;
}

/**
 * The listable top-level resources of one group version: subresources (`pods/exec`, `pods/status`)
 * and resources without the `list` verb are dropped.
 */
export function selectListableResources(groupVersion: string, list: ApiResourceListJson): DiscoveredResource[] {
  const { group, version } = splitGroupVersion(groupVersion);
  const selected: DiscoveredResource[] = [];
  for (const entry of list.resources ?? []) {
    if (!entry.name || entry.name.includes('/') || !entry.kind) continue;
    const verbs = entry.verbs ?? [];
    if (!verbs.includes('list')) continue;
    selected.push({
      group,
      version,
      groupVersion,
      resource: entry.name,
      kind: entry.kind,
      namespaced: entry.namespaced === true,
      verbs: [...verbs],
      shortNames: [...(entry.shortNames ?? [])],
    });
  }
  return selected;
}

/** The preferred group version of every group (the first listed one when none is preferred). */
export function preferredGroupVersions(groups: ApiGroupListJson): string[] {
  const result: string[] = [];
  for (const group of groups.groups ?? []) {
    const preferred = group.preferredVersion?.groupVersion ?? group.versions?.[0]?.groupVersion;
    if (preferred) result.push(preferred);
  }
  return result;
}

/**
 * Every listable resource in the preferred version of each group, core included, from `/api`,
 * `/apis` and each group version's resource list. `/api` or `/apis` failing throws (nothing can be
 * listed); one group version failing is reported in `failures` and the rest is returned.
 */
export async function discoverResources(kube: KubeClients): Promise<DiscoveryResult> {
  const [coreVersions, groups] = await Promise.all([
    kube.requestJson<ApiVersionsJson>({ path: '/api', description: 'discovery GET /api' }),
    kube.requestJson<ApiGroupListJson>({ path: '/apis', description: 'discovery GET /apis' }),
  ]);
  // The core group has a single version in practice (v1); its first entry is the preferred one.
  const coreVersion = coreVersions.versions?.[0];
  const groupVersions = [...(coreVersion ? [coreVersion] : []), ...preferredGroupVersions(groups)];
  const lists = await mapWithConcurrency(groupVersions, 4, async (groupVersion) => {
    const { group, version } = splitGroupVersion(groupVersion);
    try {
      const list = await kube.requestJson<ApiResourceListJson>({
        path: groupVersionPath(group, version),
        description: `discovery GET ${groupVersion}`,
      });
      return { groupVersion, resources: selectListableResources(groupVersion, list) };
    } catch (err) {
      return { groupVersion, failure: toKubeError(err, `discovery ${groupVersion}`).message };
    }
  });
  const resources: DiscoveredResource[] = [];
  const failures: DiscoveryFailure[] = [];
  for (const entry of lists) {
    if ('failure' in entry && entry.failure !== undefined) failures.push({ groupVersion: entry.groupVersion, message: entry.failure });
    else if ('resources' in entry && entry.resources) resources.push(...entry.resources);
  }
  return { resources, failures };
}

/** `fn` over `items`, at most `limit` at once; results in the items' order. */
export async function mapWithConcurrency<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fn(items[index] as T);
    }
  });
  await Promise.all(workers);
  return results;
}

/**
 * `<apiVersion>/<Kind>` (a backup resource list's keys) → the group and plural RBAC names, from
 * discovery read at most once per `ttlMs` (default 5 min; a failed read is not kept).
 */
export function createKindResolver(
  kube: KubeClients,
  options: { ttlMs?: number; now?: () => number } = {},
): () => Promise<(apiVersionKind: string) => { group: string; resource: string } | undefined> {
  const ttlMs = options.ttlMs ?? 5 * 60_000;
  const now = options.now ?? Date.now;
  let cached: { at: number; lookup: Promise<Map<string, { group: string; resource: string }>> } | undefined;
  return async () => {
    if (!cached || now() - cached.at > ttlMs) {
      const lookup = discoverResources(kube).then(({ resources }) => {
        const map = new Map<string, { group: string; resource: string }>();
        for (const r of resources) map.set(`${r.groupVersion}/${r.kind}`, { group: r.group, resource: r.resource });
        return map;
      });
      cached = { at: now(), lookup };
      lookup.catch(() => {
        if (cached?.lookup === lookup) cached = undefined;
      });
    }
    const map = await cached.lookup;
    return (apiVersionKind) => map.get(apiVersionKind);
  };
}
