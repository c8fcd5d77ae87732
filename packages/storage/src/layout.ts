import { assertPathSegment } from './keys.js';

/** Root of the content-addressed volume repository (packages/repository). */
export const REPOSITORY_ROOT = 'repository/';

/** Root of every backup's objects. */
export const BACKUPS_ROOT = 'backups/';

/** Velero-compatible keys of one backup (docs/velero.md#storage-layout), plus Stowage's item staging area. */
export interface BackupLayout {
  /** `backups/<name>/` */
  dir: string;
  /** `backups/<name>/velero-backup.json` — the Backup object as JSON. */
  metadata: string;
  /** `backups/<name>/<name>.tar.gz` — the resources tarball. */
  tarball: string;
  /** `backups/<name>/<name>-logs.gz` */
  logs: string;
  /** `backups/<name>/<name>-podvolumebackups.json.gz` */
  podVolumeBackups: string;
  /** `backups/<name>/<name>-resource-list.json.gz` */
  resourceList: string;
  /** `backups/<name>/<name>-results.gz` */
  results: string;
  /** `backups/<name>/items/` — segments of items staged by item-block jobs (item-segments.ts), assembled into the tarball by finalize. */
  itemsPrefix: string;
}

export function backupLayout(backupName: string): BackupLayout {
  assertPathSegment('backup name', backupName);
  const dir = `${BACKUPS_ROOT}${backupName}/`;
  return {
    dir,
    metadata: `${dir}velero-backup.json`,
    tarball: `${dir}${backupName}.tar.gz`,
    logs: `${dir}${backupName}-logs.gz`,
    podVolumeBackups: `${dir}${backupName}-podvolumebackups.json.gz`,
    resourceList: `${dir}${backupName}-resource-list.json.gz`,
    results: `${dir}${backupName}-results.gz`,
    itemsPrefix: `${dir}items/`,
  };
}

/** Identifies an item the way Velero's tarball paths do. */
export interface ItemRef {
  /** `<resource>.<group>`, or just `<resource>` for the core group: `pods`, `deployments.apps`. */
  groupResource: string;
  /** Absent (or '') for cluster-scoped items. */
  namespace?: string | undefined;
  name: string;
}

/** `<group-resource>` from a resource and its API group ('' = core): `pods`, `deployments.apps`. */
export function groupResourceOf(resource: string, group: string): string {
  return group === '' ? resource : `${resource}.${group}`;
}

/** The item's path below `resources/` in the tarball (and in a staged segment's line): `<gr>/namespaces/<ns>/<name>.json` or `<gr>/cluster/<name>.json`. */
export function itemRelativePath(item: ItemRef): string {
  assertPathSegment('group-resource', item.groupResource);
  assertPathSegment('item name', item.name);
  if (item.namespace) {
    assertPathSegment('namespace', item.namespace);
    return `${item.groupResource}/namespaces/${item.namespace}/${item.name}.json`;
  }
  return `${item.groupResource}/cluster/${item.name}.json`;
}

/** Tarball path of an item (Velero's naming): `resources/<gr>/namespaces/<ns>/<name>.json` (or `…/cluster/<name>.json`). */
export function itemTarballPath(item: ItemRef): string {
  return `resources/${itemRelativePath(item)}`;
}

/** Stowage's own sidecars of a finished backup, where Velero's layout has nothing for what its views show (storage README). */
export interface StowageSidecarLayout {
  /** `backups/<name>/stowage/` */
  dir: string;
  /** `backups/<name>/stowage/backup.json.gz` — the record, counters and the index of the pages below. */
  manifest: string;
  /**
   * `backups/<name>/stowage/<generation>/blocks-<page>.json.gz` — one page of blocks in plan order.
   * Each writing of the sidecars has its own generation, named by the manifest, so a late second
   * writer never overwrites the pages the manifest points to.
   */
  blocksPage(generation: string, page: number): string;
  /** `backups/<name>/stowage/<generation>/events-<segment>.json.gz` — one segment of the event stream, in order. */
  eventsSegment(generation: string, segment: number): string;
}

/** Zero-padded so a backup's pages list in order. */
function pageNumber(n: number): string {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`a sidecar page number must be a whole number >= 0, got ${n}`);
  return String(n).padStart(6, '0');
}

function generationSegment(generation: string): string {
  assertPathSegment('sidecar generation', generation);
  return generation;
}

export function stowageSidecarLayout(backupName: string): StowageSidecarLayout {
  const dir = `${backupLayout(backupName).dir}stowage/`;
  return {
    dir,
    manifest: `${dir}backup.json.gz`,
    blocksPage: (generation, page) => `${dir}${generationSegment(generation)}/blocks-${pageNumber(page)}.json.gz`,
    eventsSegment: (generation, segment) => `${dir}${generationSegment(generation)}/events-${pageNumber(segment)}.json.gz`,
  };
}
