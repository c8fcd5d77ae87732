/*
 * Which VolumeSnapshotClass a CSI volume is snapshotted with, in Velero's order:
 * 1. the PVC's annotation `velero.io/csi-volumesnapshot-class` (or `stowage.dev/csi-volumesnapshot-class`)
 *    naming a class, which must exist and be for the volume's driver;
 * 2. the one class of the driver labelled `stowage.dev/csi-volumesnapshot-class: "true"` (or Velero's
 *    `velero.io/csi-volumesnapshot-class`); two such classes are an error, never a guess;
 * 3. the driver's default class (`snapshot.storage.kubernetes.io/is-default-class: "true"`), the
 *    one the snapshot controller itself would take; two defaults are an error too.
 * No class: the volume cannot be snapshotted, and the caller records that as an error.
 */

export const SNAPSHOT_CLASS_LABEL = 'stowage.dev/csi-volumesnapshot-class';
export const VELERO_SNAPSHOT_CLASS_LABEL = 'velero.io/csi-volumesnapshot-class';
export const DEFAULT_SNAPSHOT_CLASS_ANNOTATION = 'snapshot.storage.kubernetes.io/is-default-class';

/** What the decision needs of a VolumeSnapshotClass. */
export interface SnapshotClassInfo {
  name: string;
  driver: string;
  deletionPolicy?: string | undefined;
  labels?: Readonly<Record<string, string>> | undefined;
  annotations?: Readonly<Record<string, string>> | undefined;
}

export type SnapshotClassChoice = { ok: true; className: string; why: string } | { ok: false; message: string };

function names(classes: readonly SnapshotClassInfo[]): string {
  return classes.map((c) => c.name).join(', ');
}

/**
 * The class for a volume of `driver` whose claim has `claimAnnotations`; `classes` undefined means
 * the cluster serves no snapshot API at all.
 */
export function chooseSnapshotClass(
  driver: string,
  classes: readonly SnapshotClassInfo[] | undefined,
  claimAnnotations: Readonly<Record<string, string>> | undefined,
): SnapshotClassChoice {
  if (classes === undefined) {
    return { ok: false, message: 'the cluster serves no VolumeSnapshotClass (snapshot.storage.k8s.io is not installed)' };
  }
  for (const key of [SNAPSHOT_CLASS_LABEL, VELERO_SNAPSHOT_CLASS_LABEL]) {
    const named = claimAnnotations?.[key];
    if (named === undefined || named === '') continue;
    const found = classes.find((c) => c.name === named);
    if (!found) return { ok: false, message: `its PVC's annotation ${key} names VolumeSnapshotClass ${named}, which does not exist` };
    if (found.driver !== driver) {
      return {
        ok: false,
        message: `its PVC's annotation ${key} names VolumeSnapshotClass ${named}, which is for driver ${found.driver}, not ${driver}`,
      };
    }
    return { ok: true, className: named, why: `named by the PVC's annotation ${key}` };
  }
  const ofDriver = classes.filter((c) => c.driver === driver);
  for (const key of [SNAPSHOT_CLASS_LABEL, VELERO_SNAPSHOT_CLASS_LABEL]) {
    const labelled = ofDriver.filter((c) => c.labels?.[key] === 'true');
    if (labelled.length > 1) {
      return {
        ok: false,
        message: `${labelled.length} VolumeSnapshotClasses of driver ${driver} carry the label ${key}: ${names(labelled)}`,
      };
    }
    if (labelled.length === 1) return { ok: true, className: labelled[0]!.name, why: `the class of driver ${driver} labelled ${key}` };
  }
  const defaults = ofDriver.filter((c) => c.annotations?.[DEFAULT_SNAPSHOT_CLASS_ANNOTATION] === 'true');
  if (defaults.length > 1) {
    return { ok: false, message: `${defaults.length} VolumeSnapshotClasses are the default of driver ${driver}: ${names(defaults)}` };
  }
  if (defaults.length === 1) return { ok: true, className: defaults[0]!.name, why: `the default class of driver ${driver}` };
  return {
    ok: false,
    message:
      ofDriver.length === 0
        ? `no VolumeSnapshotClass exists for its CSI driver ${driver}`
        : `no VolumeSnapshotClass of driver ${driver} is labelled ${SNAPSHOT_CLASS_LABEL}: "true" or is the driver's default (there are ${ofDriver.length}: ${names(ofDriver)})`,
  };
}
