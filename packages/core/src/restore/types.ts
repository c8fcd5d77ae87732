/*
 * Shapes shared by the restore rules. Objects are plain JSON as read from the backup tarball
 * (`resources/<resource.group>/namespaces/<ns>/<name>.json`); the rules never mutate their input.
 */
import type { ObjectMeta } from '../kube-types.js';

/** A JSON object (an API object or any part of one). */
export type JsonObject = { [key: string]: unknown };

/** An API object as stored in a backup: apiVersion/kind/metadata plus any other fields. */
export type RestoreObject = JsonObject & {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta & JsonObject;
};

/** One object from the backup, with where the tarball says it belongs. */
export interface BackedUpItem {
  /** API group, `''` for the core group. */
  group: string;
  /** Plural resource name, e.g. `pods`, `deployments`. */
  resource: string;
  /** The namespace it was backed up from; null for a cluster-scoped object. */
  namespace: string | null;
  name: string;
  object: RestoreObject;
}

/** Where a backed-up item is (its tarball path says it), without its object. */
export type BackedUpItemRef = Pick<BackedUpItem, 'group' | 'resource' | 'namespace' | 'name'>;

/** An item chosen for the restore: where it is created (after `namespaceMapping`). */
export interface RestoreItem extends BackedUpItem {
  /** The namespace it is restored into (mapped); null for a cluster-scoped object. */
  targetNamespace: string | null;
  /** The name it is created with (a namespace object takes its mapped name). */
  targetName: string;
  /**
   * `selected`: passed the filters; `target-namespace`: a namespace added because restored
   * items live in it (from the backup when it holds the namespace, else a bare one).
   */
  origin: 'selected' | 'target-namespace';
}

/** A volume of a backed-up pod whose data is in the repository (from the backup's PVBs). */
export interface BackedUpPodVolume {
  /** The pod's namespace and name in the backup (not mapped). */
  podNamespace: string;
  podName: string;
  /** The volume's name in the pod spec. */
  volume: string;
  /** The PVB's phase; only `Completed` with a snapshotID is restored. */
  phase: string;
  snapshotID?: string;
}

/** One pod volume that gets a PodVolumeRestore. */
export interface RestoredPodVolume {
  volume: string;
  snapshotID: string;
}
