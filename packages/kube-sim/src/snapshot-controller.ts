/**
 * The simulator's CSI snapshot stack: what the common snapshot controller and a CSI driver's
 * external-snapshotter sidecar do together in a cluster, for objects created through the API.
 *
 * Dynamic snapshot (a VolumeSnapshot naming a PVC):
 *  1. the class: `spec.volumeSnapshotClassName`, or the default class of the volume's CSI driver
 *     (annotation `snapshot.storage.kubernetes.io/is-default-class: "true"`); none, a missing one,
 *     a claim that is missing or unbound, a volume that is not CSI, or a class of another driver
 *     → `status.error` on the VolumeSnapshot, never a snapshot;
 *  2. a bound VolumeSnapshotContent `snapcontent-<snapshot uid>` (the class's deletionPolicy), and
 *     `status.boundVolumeSnapshotContentName` with `readyToUse: false`;
 *  3. the cut: a point-in-time copy of the volume's bytes (volume-disks.ts: its pod's directory, or
 *     the one file of a block volume). Only when the copy is complete do both objects get
 *     `creationTime` (the content in nanoseconds, the snapshot in RFC 3339 seconds) and
 *     `restoreSize` — a cut costs what its copy costs;
 *  4. `readyToUse: true` after the class's `sim.stowage.dev/ready-delay-ms` parameter (or the
 *     simulator's `snapshotReadyDelayMs`, default 0): providers such as EBS cut at once and upload
 *     for minutes after. A class parameter `sim.stowage.dev/fail-cut: <message>` makes every cut of
 *     the class fail with that message (`status.error`, no creationTime).
 *
 * Pre-provisioned (a VolumeSnapshotContent with `source.snapshotHandle`, and a VolumeSnapshot
 * naming it): the content is ready when its snapshot exists (else `status.error`), and the
 * snapshot bound to it shows the content's creationTime, restoreSize and readiness.
 *
 * Deletion: a deleted VolumeSnapshot takes its content when the content's deletionPolicy is
 * `Delete`; a deleted content with `Delete` takes the snapshot's data. `Retain` keeps them.
 * Not modelled: finalizers, volume group snapshots, the immutability of `spec.source`.
 */
import { fileURLToPath } from 'node:url';
import type { ClusterState } from './cluster-state.js';
import { isPlainObject, type KubeObject } from './kube-object.js';
import type { ResourceType } from './resource-registry.js';
import type { VolumeDisks } from './volume-disks.js';

export const snapshotCrdsPath = fileURLToPath(new URL('../crds/snapshot.storage.k8s.io.yaml', import.meta.url));
export const SNAPSHOT_API_GROUP = 'snapshot.storage.k8s.io';
export const SNAPSHOT_API_VERSION = `${SNAPSHOT_API_GROUP}/v1`;
export const DEFAULT_SNAPSHOT_CLASS_ANNOTATION = 'snapshot.storage.kubernetes.io/is-default-class';
/** VolumeSnapshotClass parameters the simulated CSI driver reads. */
export const SIM_SNAPSHOT_PARAMETERS = Object.freeze({
  /** Milliseconds from the cut to `readyToUse: true`. */
  readyDelayMs: 'sim.stowage.dev/ready-delay-ms',
  /** "true": cut, then not ready until the test calls `releaseSnapshots()` (a window it controls). */
  holdReady: 'sim.stowage.dev/hold-ready',
  /** Every cut of the class fails with this message. */
  failCut: 'sim.stowage.dev/fail-cut',
});

type Json = Record<string, unknown>;

function record(value: unknown): Json {
  return isPlainObject(value) ? value : {};
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

const QUANTITY_SUFFIXES: Readonly<Record<string, number>> = {
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
};

/** Bytes of a storage quantity (`1Gi`, `500M`, `1024`), or undefined when it is not one. */
export function quantityBytes(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value !== 'string') return undefined;
  const match = /^([0-9]+(?:\.[0-9]+)?)([kMGTP]i?|)$/.exec(value.trim());
  if (!match) return undefined;
  const factor = QUANTITY_SUFFIXES[match[2]!];
  return factor === undefined ? undefined : Math.ceil(Number(match[1]) * factor);
}

export interface SnapshotControllerOptions {
  state: ClusterState;
  disks: VolumeDisks;
  warn: (message: string) => void;
  /** Default milliseconds from a cut to readyToUse (a class's parameter wins). Default 0. */
  readyDelayMs?: number;
  /** Keeps asynchronous work known to the simulator's close(). */
  track: <T>(work: Promise<T>) => Promise<T>;
  now?: () => Date;
}

/** What a restore from a snapshot needs of it (the provisioner reads this). */
export interface ReadySnapshot {
  handle: string;
  restoreSizeBytes: number | undefined;
}

export class SnapshotController {
  private readonly state: ClusterState;
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Snapshots cut under a `holdReady` class, each waiting for `releaseHeld()`. */
  private readonly held: Array<() => void> = [];
  /** When each snapshot handle was cut (nanoseconds), for pre-provisioned contents naming it. */
  private readonly cutAt = new Map<string, bigint>();
  private closed = false;

  constructor(private readonly options: SnapshotControllerOptions) {
    this.state = options.state;
  }

  private type(plural: 'volumesnapshots' | 'volumesnapshotcontents' | 'volumesnapshotclasses'): ResourceType | undefined {
    return this.state.registry.get(SNAPSHOT_API_GROUP, 'v1', plural);
  }

  private timestamp(): string {
    return (this.options.now?.() ?? new Date()).toISOString().replace(/\.\d{3}Z$/, 'Z');
  }

  private run(what: string, work: () => Promise<void>): void {
    if (this.closed) return;
    void this.options.track(
      work().catch((error: unknown) => {
        if (!this.closed) this.options.warn(`the simulated snapshot controller gave up on ${what}: ${String(error)}`);
      }),
    );
  }

  onCreated(type: ResourceType, object: KubeObject): void {
    if (type.group !== SNAPSHOT_API_GROUP) return;
    if (type.kind === 'VolumeSnapshot') {
      const namespace = object.metadata.namespace ?? '';
      const name = object.metadata.name!;
      this.run(`volumesnapshot ${namespace}/${name}`, () => this.syncSnapshot(namespace, name));
    } else if (type.kind === 'VolumeSnapshotContent') {
      const name = object.metadata.name!;
      this.run(`volumesnapshotcontent ${name}`, () => this.syncContent(name));
    }
  }

  onDeleted(type: ResourceType, object: KubeObject): void {
    if (type.group !== SNAPSHOT_API_GROUP) return;
    if (type.kind === 'VolumeSnapshot') {
      const contentName = str(record(object.status).boundVolumeSnapshotContentName);
      const contentType = this.type('volumesnapshotcontents');
      const content = contentName && contentType ? this.state.tryGet(contentType, '', contentName) : undefined;
      if (!content || !contentType || record(content.spec).deletionPolicy !== 'Delete') return;
      const ref = record(record(content.spec).volumeSnapshotRef);
      if (ref.namespace !== object.metadata.namespace || ref.name !== object.metadata.name) return;
      try {
        this.state.delete(contentType, '', contentName!);
      } catch {
        // gone already
      }
    } else if (type.kind === 'VolumeSnapshotContent') {
      if (record(object.spec).deletionPolicy !== 'Delete') return;
      const handle = str(record(object.status).snapshotHandle) ?? str(record(record(object.spec).source).snapshotHandle);
      if (!handle) return;
      this.cutAt.delete(handle);
      this.run(`the data of snapshot ${handle}`, () => this.options.disks.removeSnapshot(handle));
    }
  }

  close(): void {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  /**
   * The snapshot a claim's `dataSource` names, when it can be restored from: ready, bound to a
   * content whose snapshot has data. undefined: not (yet).
   */
  async readyForRestore(namespace: string, snapshotName: string): Promise<ReadySnapshot | undefined> {
    const snapshotType = this.type('volumesnapshots');
    const contentType = this.type('volumesnapshotcontents');
    if (!snapshotType || !contentType) return undefined;
    const snapshot = this.state.tryGet(snapshotType, namespace, snapshotName);
    const status = record(snapshot?.status);
    if (!snapshot || status.readyToUse !== true) return undefined;
    const contentName = str(status.boundVolumeSnapshotContentName);
    const content = contentName ? this.state.tryGet(contentType, '', contentName) : undefined;
    const handle = str(record(content?.status).snapshotHandle);
    if (!handle) return undefined;
    const size = await this.options.disks.snapshotSize(handle);
    if (size === undefined) return undefined;
    const restoreSize = record(content?.status).restoreSize;
    return { handle, restoreSizeBytes: typeof restoreSize === 'number' ? restoreSize : undefined };
  }

  // ---- VolumeSnapshot ---------------------------------------------------------------------

  private async syncSnapshot(namespace: string, name: string): Promise<void> {
    const snapshotType = this.type('volumesnapshots');
    if (!snapshotType) return;
    const snapshot = this.state.tryGet(snapshotType, namespace, name);
    if (!snapshot || snapshot.metadata.deletionTimestamp) return;
    const status = record(snapshot.status);
    if (str(status.boundVolumeSnapshotContentName) || status.error) return;
    const source = record(record(snapshot.spec).source);
    const contentName = str(source.volumeSnapshotContentName);
    if (contentName) return this.bindPreProvisioned(snapshot, contentName);
    const claimName = str(source.persistentVolumeClaimName);
    if (claimName) return this.cutDynamic(snapshot, claimName);
  }

  private writeSnapshotStatus(namespace: string, name: string, status: Json): void {
    const snapshotType = this.type('volumesnapshots');
    const current = snapshotType ? this.state.tryGet(snapshotType, namespace, name) : undefined;
    if (!snapshotType || !current) return;
    this.state.update(snapshotType, namespace, name, { ...current, status: { ...record(current.status), ...status } }, 'status');
  }

  private writeContentStatus(name: string, status: Json): void {
    const contentType = this.type('volumesnapshotcontents');
    const current = contentType ? this.state.tryGet(contentType, '', name) : undefined;
    if (!contentType || !current) return;
    this.state.update(contentType, '', name, { ...current, status: { ...record(current.status), ...status } }, 'status');
  }

  private snapshotError(snapshot: KubeObject, message: string): void {
    this.writeSnapshotStatus(snapshot.metadata.namespace ?? '', snapshot.metadata.name!, {
      readyToUse: false,
      error: { message, time: this.timestamp() },
    });
  }

  /** The class for a volume of `driver`: the named one, or the driver's default. */
  private classFor(snapshot: KubeObject, driver: string): { ok: true; object: KubeObject } | { ok: false; message: string } {
    const classType = this.type('volumesnapshotclasses');
    if (!classType) return { ok: false, message: 'no VolumeSnapshotClass is served (the snapshot CRDs are not installed)' };
    const named = str(record(snapshot.spec).volumeSnapshotClassName);
    if (named) {
      const found = this.state.tryGet(classType, '', named);
      if (!found)
        return { ok: false, message: `failed to get snapshot class: volumesnapshotclass.snapshot.storage.k8s.io "${named}" not found` };
      if (found.driver !== driver) {
        return {
          ok: false,
          message: `VolumeSnapshotClass ${named} is for CSI driver ${String(found.driver)}, but the volume's driver is ${driver}`,
        };
      }
      return { ok: true, object: found };
    }
    const defaults = [...this.state.store.list('volumesnapshotclasses.snapshot.storage.k8s.io', undefined)].filter(
      (c) => c.driver === driver && c.metadata.annotations?.[DEFAULT_SNAPSHOT_CLASS_ANNOTATION] === 'true',
    );
    if (defaults.length === 1) return { ok: true, object: defaults[0]! };
    if (defaults.length > 1) {
      return {
        ok: false,
        message: `cannot find default snapshot class: ${defaults.length} default classes for driver ${driver} (${defaults.map((c) => c.metadata.name).join(', ')})`,
      };
    }
    return { ok: false, message: `cannot find default snapshot class for CSI driver ${driver}` };
  }

  private async cutDynamic(snapshot: KubeObject, claimName: string): Promise<void> {
    const namespace = snapshot.metadata.namespace ?? '';
    const name = snapshot.metadata.name!;
    const claim = this.state.store.get('persistentvolumeclaims', namespace, claimName);
    if (!claim) return this.snapshotError(snapshot, `persistentvolumeclaim "${claimName}" not found`);
    const pvName = str(record(claim.spec).volumeName);
    if (!pvName || record(claim.status).phase !== 'Bound') {
      return this.snapshotError(snapshot, `the PVC ${claimName} is not yet bound to a PV, will not attempt to take a snapshot`);
    }
    const pv = this.state.store.get('persistentvolumes', '', pvName);
    const csi = record(record(pv?.spec).csi);
    const driver = str(csi.driver);
    if (!pv || !driver)
      return this.snapshotError(snapshot, `the volume ${pvName} of PVC ${claimName} is not a CSI volume and cannot be snapshotted`);
    const chosen = this.classFor(snapshot, driver);
    if (!chosen.ok) return this.snapshotError(snapshot, chosen.message);
    const snapshotClass = chosen.object;
    const parameters = record(snapshotClass.parameters);
    const contentType = this.type('volumesnapshotcontents')!;
    const contentName = `snapcontent-${snapshot.metadata.uid}`;
    const blockMode = record(pv.spec).volumeMode === 'Block';
    const content =
      this.state.tryGet(contentType, '', contentName) ??
      this.state.create(contentType, '', {
        apiVersion: SNAPSHOT_API_VERSION,
        kind: 'VolumeSnapshotContent',
        metadata: { name: contentName },
        spec: {
          deletionPolicy: snapshotClass.deletionPolicy === 'Retain' ? 'Retain' : 'Delete',
          driver,
          source: { volumeHandle: str(csi.volumeHandle) ?? pvName },
          sourceVolumeMode: blockMode ? 'Block' : 'Filesystem',
          volumeSnapshotClassName: snapshotClass.metadata.name,
          volumeSnapshotRef: { kind: 'VolumeSnapshot', apiVersion: SNAPSHOT_API_VERSION, namespace, name, uid: snapshot.metadata.uid },
        },
      });
    this.writeSnapshotStatus(namespace, name, { boundVolumeSnapshotContentName: contentName, readyToUse: false });

    const failWith = str(parameters[SIM_SNAPSHOT_PARAMETERS.failCut]);
    const handle = `snapshot-${content.metadata.uid}`;
    let bytes: number;
    try {
      if (failWith) throw new Error(failWith);
      ({ bytes } = await this.options.disks.cut(pvName, handle, blockMode));
    } catch (error) {
      const message = `failed to take snapshot of the volume ${pvName}: ${(error as Error).message}`;
      const time = this.timestamp();
      this.writeContentStatus(contentName, { readyToUse: false, error: { message, time } });
      this.writeSnapshotStatus(namespace, name, { readyToUse: false, error: { message, time } });
      return;
    }
    if (this.closed) return;
    const cutAt = new Date();
    const cutAtNs = BigInt(cutAt.getTime()) * 1_000_000n;
    this.cutAt.set(handle, cutAtNs);
    const capacity = quantityBytes(record(record(pv.spec).capacity).storage);
    const restoreSize = Math.max(capacity ?? 0, bytes);
    const delayParameter = Number(parameters[SIM_SNAPSHOT_PARAMETERS.readyDelayMs]);
    const delayMs = Number.isFinite(delayParameter) && delayParameter >= 0 ? delayParameter : (this.options.readyDelayMs ?? 0);
    const held = str(parameters[SIM_SNAPSHOT_PARAMETERS.holdReady]) === 'true';
    const ready = delayMs <= 0 && !held;
    this.writeContentStatus(contentName, { snapshotHandle: handle, creationTime: Number(cutAtNs), readyToUse: ready, restoreSize });
    this.writeSnapshotStatus(namespace, name, {
      boundVolumeSnapshotContentName: contentName,
      creationTime: cutAt.toISOString().replace(/\.\d{3}Z$/, 'Z'),
      readyToUse: ready,
      restoreSize: String(restoreSize),
    });
    if (ready) return;
    const markReady = () => {
      if (this.closed) return;
      try {
        this.writeContentStatus(contentName, { readyToUse: true });
        const current = this.state.tryGet(this.type('volumesnapshots')!, namespace, name);
        if (current && record(current.status).boundVolumeSnapshotContentName === contentName) {
          this.writeSnapshotStatus(namespace, name, { readyToUse: true });
        }
      } catch (error) {
        this.options.warn(`the simulated snapshot controller could not mark ${namespace}/${name} ready: ${String(error)}`);
      }
    };
    if (held) {
      this.held.push(markReady);
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      markReady();
    }, delayMs);
    timer.unref();
    this.timers.add(timer);
  }

  /** Marks every snapshot cut under a `holdReady` class ready to use; returns how many. */
  releaseHeld(): number {
    const held = this.held.splice(0);
    for (const markReady of held) markReady();
    return held.length;
  }

  // ---- pre-provisioned ------------------------------------------------------------------------

  private async syncContent(name: string): Promise<void> {
    const contentType = this.type('volumesnapshotcontents');
    if (!contentType) return;
    const content = this.state.tryGet(contentType, '', name);
    if (!content) return;
    const spec = record(content.spec);
    const handle = str(record(spec.source).snapshotHandle);
    if (!handle || record(content.status).readyToUse !== undefined || record(content.status).error) return;
    const size = await this.options.disks.snapshotSize(handle);
    if (size === undefined) {
      this.writeContentStatus(name, { readyToUse: false, error: { message: `snapshot ${handle} not found`, time: this.timestamp() } });
    } else {
      const creationTime = this.cutAt.get(handle) ?? BigInt(Date.now()) * 1_000_000n;
      this.writeContentStatus(name, { snapshotHandle: handle, creationTime: Number(creationTime), readyToUse: true, restoreSize: size });
    }
    const ref = record(spec.volumeSnapshotRef);
    const namespace = str(ref.namespace);
    const snapshotName = str(ref.name);
    const snapshotType = this.type('volumesnapshots');
    const snapshot = namespace && snapshotName && snapshotType ? this.state.tryGet(snapshotType, namespace, snapshotName) : undefined;
    if (snapshot && !record(snapshot.status).boundVolumeSnapshotContentName) await this.bindPreProvisioned(snapshot, name);
  }

  private async bindPreProvisioned(snapshot: KubeObject, contentName: string): Promise<void> {
    const contentType = this.type('volumesnapshotcontents');
    const content = contentType ? this.state.tryGet(contentType, '', contentName) : undefined;
    if (!content) return; // bound when the content is created
    const ref = record(record(content.spec).volumeSnapshotRef);
    if (ref.namespace !== snapshot.metadata.namespace || ref.name !== snapshot.metadata.name) {
      return this.snapshotError(
        snapshot,
        `VolumeSnapshotContent ${contentName} is bound to VolumeSnapshot ${String(ref.namespace)}/${String(ref.name)}, not to this one`,
      );
    }
    const status = record(content.status);
    if (status.error) {
      return this.snapshotError(snapshot, `VolumeSnapshotContent ${contentName}: ${String(record(status.error).message ?? 'error')}`);
    }
    if (status.readyToUse === undefined) return; // the content is being checked; it binds this snapshot when done
    const creationTime = typeof status.creationTime === 'number' ? new Date(Math.floor(status.creationTime / 1e6)) : new Date();
    this.writeSnapshotStatus(snapshot.metadata.namespace ?? '', snapshot.metadata.name!, {
      boundVolumeSnapshotContentName: contentName,
      creationTime: creationTime.toISOString().replace(/\.\d{3}Z$/, 'Z'),
      readyToUse: status.readyToUse === true,
      ...(typeof status.restoreSize === 'number' ? { restoreSize: String(status.restoreSize) } : {}),
    });
  }
}
