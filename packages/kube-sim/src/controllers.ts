/**
 * The simulator's stand-ins for the cluster's controllers, for objects created through the API
 * (a restore creates everything that way; fixture objects load as they are written):
 *
 * - scheduler: a pod without `spec.nodeName` gets a node whose labels satisfy its `nodeSelector`,
 *   preferring nodes that run a node agent (set with `setNodeAgents`, or a Running pod labelled
 *   `app.kubernetes.io/name=stowage-node-agent` on the node), round-robin; with no such node the
 *   pod stays Pending (PodScheduled False, Unschedulable) and is placed when one appears;
 * - kubelet: a pod whose claims are all bound and that has no init containers starts Running at
 *   once; otherwise it starts Pending, and once its claims are bound its volume directories are
 *   created (the kubelet layout of volume-data.ts), its init containers run in order —
 *   `stowage-restore-wait` until the done marker `.stowage/<STOWAGE_RESTORE_UID>` is in every
 *   volume it mounts (looked for every RESTORE_WAIT_POLL_MS, as the real program polls, and at once
 *   when a PodVolumeRestore of the pod is made terminal, as the real program wakes on inotify) (then the markers, and `.stowage` when empty, are removed), any other one as
 *   its scripted exec behaviour says for its command (exit code, duration; default exit 0 at once)
 *   — and then it is Running and Ready. Every step is a status write, so watches see it;
 * - provisioner: a claim bound to nothing is bound to the PV that claims it (static binding), or
 *   gets a new `pvc-<uid>` PV from its storage class (or the default class); a claim naming a PV
 *   is bound once that PV exists. The claim gets `spec.volumeName` and phase Bound;
 * - CRDs: with `crdEstablishDelayMs` > 0 a CRD is Established (and its resources served) that
 *   long after it is created; namespaces are Active at once.
 *
 * One timer drives all of it (every `tickMs` while there is work), so nothing runs while idle.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rmdir, stat, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { ApiError } from './api-status.js';
import type { ClusterState } from './cluster-state.js';
import { containerBehaviour, type PodExecBehaviour, resolveExecOutcome } from './exec-sim.js';
import { type MaterializeMode, materializePodVolumes, podVolumeDirs } from './fixture-loader.js';
import { isPlainObject, type KubeObject } from './kube-object.js';
import type { ResourceType } from './resource-registry.js';
import { quantityBytes, SNAPSHOT_API_GROUP, SnapshotController } from './snapshot-controller.js';
import { type CopyMode, VolumeDisks } from './volume-disks.js';

export const RESTORE_WAIT_CONTAINER = 'stowage-restore-wait';
export const RESTORE_UID_ENV = 'STOWAGE_RESTORE_UID';
export const RESTORE_WAIT_TIMEOUT_ENV = 'STOWAGE_RESTORE_WAIT_TIMEOUT_MS';
export const RESTORE_MARKER_DIR = '.stowage';
export const NODE_AGENT_POD_LABEL = 'app.kubernetes.io/name';
export const NODE_AGENT_POD_LABEL_VALUE = 'stowage-node-agent';
const DEFAULT_CLASS_ANNOTATIONS = ['storageclass.kubernetes.io/is-default-class', 'storageclass.beta.kubernetes.io/is-default-class'];
const DEFAULT_RESTORE_WAIT_TIMEOUT_MS = 4 * 3_600_000;
/**
 * The real program's fallback poll (`restoreWaitContainer.pollIntervalMs` in @stowage/kube). The real
 * program also wakes on inotify when a marker appears; the simulator models that wake without a file
 * watch: the node agent writes a volume's marker before it marks the volume's PodVolumeRestore
 * terminal, so that status write (which the simulator, as the API server, sees) makes the pod look at once.
 */
export const RESTORE_WAIT_POLL_MS = 100;
/** The PodVolumeRestore whose terminal status write wakes its pod's `stowage-restore-wait` (spec.pod names the pod). */
const PVR_GROUP = 'stowage.dev';
const PVR_KIND = 'PodVolumeRestore';
const TERMINAL_PVR_PHASES: ReadonlySet<unknown> = new Set(['Completed', 'Failed', 'Canceled']);

export interface ControllerOptions {
  state: ClusterState;
  dataRoot: string;
  materialize: MaterializeMode;
  execOverrides: Map<string, PodExecBehaviour>;
  warn: (message: string) => void;
  /** How often pending work is looked at; default 20 ms. */
  tickMs?: number;
  /** Delay before an API-created CRD is Established; 0 (default) = at once, in the create. */
  crdEstablishDelayMs?: number;
  /** How often `stowage-restore-wait` looks between wakes; default RESTORE_WAIT_POLL_MS. */
  restoreWaitPollMs?: number;
  /** Milliseconds from a snapshot's cut to readyToUse when its class does not say; default 0. */
  snapshotReadyDelayMs?: number;
  now?: () => Date;
}

type Json = Record<string, unknown>;

interface InitRun {
  index: number;
  startedAt: number;
  /** When a scripted init container ends, and how. */
  endsAt?: number;
  exitCode?: number;
  /** When `stowage-restore-wait` last looked for its markers. */
  lastLookAt?: number;
}

interface PodWork {
  namespace: string;
  name: string;
  uid: string;
  volumesReady: boolean;
  init?: InitRun;
  /** The step under way (a tick's or a wake's): a pod is stepped by one at a time. */
  stepping?: Promise<void>;
  /** A PVR of this pod went terminal: `stowage-restore-wait` looks at its next step, whatever its poll says. */
  lookNow?: boolean;
  /** When `stowage-restore-wait`, having looked in vain, looks again by its poll: no tick steps the pod before. */
  nextLookAt?: number;
}

function record(value: unknown): Json {
  return isPlainObject(value) ? value : {};
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function podKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** The VolumeSnapshot a claim is to be provisioned from (`dataSource` or `dataSourceRef`), if any. */
function snapshotSourceOf(spec: Json): string | undefined {
  for (const source of [record(spec.dataSourceRef), record(spec.dataSource)]) {
    if (source.kind === 'VolumeSnapshot' && source.apiGroup === SNAPSHOT_API_GROUP && typeof source.name === 'string') return source.name;
  }
  return undefined;
}

export class SimControllers {
  private readonly state: ClusterState;
  private readonly podType: ResourceType;
  private readonly pvcType: ResourceType;
  private readonly pvType: ResourceType;
  private readonly tickMs: number;
  private readonly now: () => Date;
  private readonly pods = new Map<string, PodWork>();
  private readonly claims = new Set<string>();
  private readonly crds = new Map<string, number>();
  private readonly nodeAgents = new Set<string>();
  private readonly pendingWrites = new Set<Promise<unknown>>();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private scheduleCounter = 0;
  private closed = false;
  /** Where volumes' bytes live while no pod mounts them, and snapshots' (volume-disks.ts). */
  readonly disks: VolumeDisks;
  readonly snapshots: SnapshotController;
  /** Claims provisioned from a snapshot whose new volume is being filled (PV name → done). */
  private readonly filling = new Map<string, { done: boolean; restoreSizeBytes?: number | undefined }>();

  constructor(private readonly options: ControllerOptions) {
    this.state = options.state;
    this.podType = this.state.registry.get('', 'v1', 'pods')!;
    this.pvcType = this.state.registry.get('', 'v1', 'persistentvolumeclaims')!;
    this.pvType = this.state.registry.get('', 'v1', 'persistentvolumes')!;
    this.tickMs = options.tickMs ?? 20;
    this.now = options.now ?? (() => new Date());
    this.disks = new VolumeDisks(this.state, options.dataRoot);
    this.snapshots = new SnapshotController({
      state: this.state,
      disks: this.disks,
      warn: options.warn,
      readyDelayMs: options.snapshotReadyDelayMs ?? 0,
      track: (work) => this.track(work),
      ...(options.now ? { now: options.now } : {}),
    });
  }

  /** Hooks the controllers into the cluster state; objects loaded before keep their fixture state. */
  install(): void {
    this.state.deferCrdEstablishment = (this.options.crdEstablishDelayMs ?? 0) > 0;
    this.state.hooks.preparePod = (pod) => this.preparePod(pod);
    this.state.hooks.onCreated = (type, object) => this.onCreated(type, object);
    this.state.hooks.onUpdated = (type, object, previous) => this.onUpdated(type, object, previous);
    this.state.hooks.onDeleted = (type, object) => this.onDeleted(type, object);
  }

  /** Nodes the scheduler prefers (they run a node agent), in addition to those running a node-agent pod. */
  setNodeAgents(nodes: readonly string[]): void {
    this.nodeAgents.clear();
    for (const node of nodes) this.nodeAgents.add(node);
    this.wake();
  }

  /** Forgets pending work (the cluster was reset). */
  clear(): void {
    this.pods.clear();
    this.claims.clear();
    this.crds.clear();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.snapshots.close();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await Promise.allSettled([...this.pendingWrites]);
  }

  private timestamp(): string {
    return this.now()
      .toISOString()
      .replace(/\.\d{3}Z$/, 'Z');
  }

  private wake(): void {
    if (this.closed || this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.tickMs);
    this.timer.unref();
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.pendingWrites.add(work);
    void work.finally(() => this.pendingWrites.delete(work)).catch(() => undefined);
    return work;
  }

  // --- scheduler -------------------------------------------------------------------------------

  private nodesWithAgents(): Set<string> {
    const nodes = new Set(this.nodeAgents);
    for (const pod of this.state.store.list('pods', undefined)) {
      const spec = record(pod.spec);
      if (pod.metadata.labels?.[NODE_AGENT_POD_LABEL] !== NODE_AGENT_POD_LABEL_VALUE) continue;
      if (record(pod.status).phase === 'Running' && typeof spec.nodeName === 'string') nodes.add(spec.nodeName);
    }
    return nodes;
  }

  /** A node for `pod`: matching its nodeSelector, preferring nodes with a node agent; undefined when none fits. */
  pickNode(pod: KubeObject): string | undefined {
    const selector = record(record(pod.spec).nodeSelector);
    const candidates = [...this.state.store.list('nodes', undefined)]
      .filter((node) => Object.entries(selector).every(([key, value]) => node.metadata.labels?.[key] === value))
      .map((node) => node.metadata.name!);
    if (candidates.length === 0) return undefined;
    const agents = this.nodesWithAgents();
    const preferred = candidates.filter((node) => agents.has(node));
    const pool = preferred.length > 0 ? preferred : candidates;
    return pool[this.scheduleCounter++ % pool.length];
  }

  private unschedulableCondition(pod: KubeObject): Json {
    const nodes = this.state.store.count('nodes');
    return {
      type: 'PodScheduled',
      status: 'False',
      reason: 'Unschedulable',
      message: `0/${nodes} nodes are available: ${nodes} node(s) didn't match Pod's node affinity/selector (nodeSelector ${JSON.stringify(record(pod.spec).nodeSelector ?? {})}).`,
      lastTransitionTime: this.timestamp(),
    };
  }

  // --- kubelet -----------------------------------------------------------------------------------

  private claimsBound(pod: KubeObject): boolean {
    const namespace = pod.metadata.namespace ?? '';
    for (const volume of list(record(pod.spec).volumes)) {
      const claimName = record(record(volume).persistentVolumeClaim).claimName;
      if (typeof claimName !== 'string') continue;
      const claim = this.state.tryGet(this.pvcType, namespace, claimName);
      const volumeName = record(claim?.spec).volumeName;
      if (!claim || typeof volumeName !== 'string' || volumeName === '' || record(claim.status).phase !== 'Bound') return false;
    }
    return true;
  }

  private runningStatus(pod: KubeObject, base: Json, initStatuses?: Json[]): Json {
    const at = this.timestamp();
    const containers = list(record(pod.spec).containers).map((container) => ({
      name: String(record(container).name ?? ''),
      image: record(container).image ?? '',
      ready: true,
      started: true,
      restartCount: 0,
      state: { running: { startedAt: at } },
    }));
    const conditions = ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map((type) => ({
      type,
      status: 'True',
      lastTransitionTime: at,
    }));
    return {
      ...base,
      phase: 'Running',
      conditions,
      containerStatuses: containers,
      ...(initStatuses ? { initContainerStatuses: initStatuses } : {}),
    };
  }

  /** What a pod created through the API looks like when stored: scheduled, and Running or Pending. */
  private preparePod(pod: KubeObject): KubeObject {
    const spec = { ...record(pod.spec) };
    const status: Json = { ...record(pod.status) };
    if (status.startTime === undefined) status.startTime = this.timestamp();
    if (typeof spec.nodeName !== 'string' || spec.nodeName === '') {
      const node = this.pickNode(pod);
      if (node === undefined) {
        return { ...pod, spec, status: { ...status, phase: 'Pending', conditions: [this.unschedulableCondition(pod)] } };
      }
      spec.nodeName = node;
    }
    const scheduled: KubeObject = { ...pod, spec };
    if (typeof status.phase === 'string') return { ...scheduled, status };
    const hasInit = list(spec.initContainers).length > 0;
    if (!hasInit && this.claimsBound(scheduled)) return { ...scheduled, status: this.runningStatus(scheduled, status) };
    const initStatuses = list(spec.initContainers).map((container) => ({
      name: String(record(container).name ?? ''),
      ready: false,
      restartCount: 0,
      state: { waiting: { reason: 'PodInitializing' } },
    }));
    return {
      ...scheduled,
      status: {
        ...status,
        phase: 'Pending',
        conditions: [
          { type: 'PodScheduled', status: 'True', lastTransitionTime: this.timestamp() },
          { type: 'Initialized', status: 'False', reason: 'ContainersNotInitialized', lastTransitionTime: this.timestamp() },
        ],
        ...(hasInit ? { initContainerStatuses: initStatuses } : {}),
      },
    };
  }

  private onCreated(type: ResourceType, object: KubeObject): void {
    if (type.group === SNAPSHOT_API_GROUP) {
      this.snapshots.onCreated(type, object);
    } else if (type.group === '' && type.kind === 'Pod') {
      const phase = record(object.status).phase;
      if (phase === 'Running') {
        this.materialize(object);
        return;
      }
      if (phase !== 'Pending') return;
      this.pods.set(podKey(object.metadata.namespace ?? '', object.metadata.name!), {
        namespace: object.metadata.namespace ?? '',
        name: object.metadata.name!,
        uid: object.metadata.uid!,
        volumesReady: false,
      });
      this.wake();
    } else if (type.group === '' && type.kind === 'PersistentVolumeClaim') {
      this.claims.add(podKey(object.metadata.namespace ?? '', object.metadata.name!));
      this.wake();
    } else if (type.kind === 'CustomResourceDefinition' && (this.options.crdEstablishDelayMs ?? 0) > 0) {
      this.crds.set(object.metadata.name!, Date.now() + (this.options.crdEstablishDelayMs ?? 0));
      this.wake();
    }
  }

  /** A PVR made terminal: its pod's restore-wait looks now (the real program's inotify wake), not at its next poll. */
  private onUpdated(type: ResourceType, object: KubeObject, previous: KubeObject): void {
    if (this.closed || type.group !== PVR_GROUP || type.kind !== PVR_KIND) return;
    const phase = record(object.status).phase;
    if (!TERMINAL_PVR_PHASES.has(phase) || phase === record(previous.status).phase) return;
    const target = record(record(object.spec).pod);
    const key = podKey(String(target.namespace ?? ''), String(target.name ?? ''));
    const work = this.pods.get(key);
    if (!work || work.uid !== target.uid) return;
    work.lookNow = true;
    // after the write that woke it is done, not inside it
    queueMicrotask(() => void this.step(key, work));
  }

  private materialize(pod: KubeObject): Promise<void> {
    if (this.options.materialize === 'none') return Promise.resolve();
    const where = `pod ${pod.metadata.namespace}/${pod.metadata.name}`;
    // A volume that has a disk (it was mounted before, or was provisioned from a snapshot) is
    // attached with its bytes; only the others are created here.
    const attaching = this.disks.attach(pod).catch((error: unknown) => {
      this.options.warn(`attaching the volumes of ${where} failed: ${String(error)}`);
      return new Set<string>();
    });
    // A restored pod's volumes start empty, as a real kubelet's do: the node agent writes the
    // backed-up files into them. Fixture files (from the restored pod's or claim's files
    // annotation) written at the same time would race the restore and leave their own mtimes.
    if (list(record(pod.spec).initContainers).some((c) => record(c).name === RESTORE_WAIT_CONTAINER)) {
      return this.track(
        attaching
          .then(async (attached) => {
            const dirs = podVolumeDirs(this.state, this.options.dataRoot, pod).filter((dir) => !attached.has(dir.volume));
            await Promise.all(
              dirs.map((dir) =>
                dir.block
                  ? mkdir(dirname(dir.path), { recursive: true }).then(() => writeFile(dir.path, '', { flag: 'a' }))
                  : mkdir(dir.path, { recursive: true }),
              ),
            );
          })
          .catch((error: unknown) => this.options.warn(`creating volume directories of ${where} failed: ${String(error)}`)),
      );
    }
    // a kubelet creates every volume directory of a pod it starts, with or without fixture files
    return this.track(
      attaching
        .then((attached) => materializePodVolumes(this.state, this.options.dataRoot, [pod], 'all', (volume) => !attached.has(volume)))
        .then((result) => result.warnings.forEach(this.options.warn))
        .catch((error: unknown) => this.options.warn(`writing volumes of ${where} failed: ${String(error)}`)),
    );
  }

  /** Objects gone: a pod's volumes go back to their disks, a claim's volume is reclaimed, snapshots cascade. */
  private onDeleted(type: ResourceType, object: KubeObject): void {
    if (this.closed) return;
    if (type.group === SNAPSHOT_API_GROUP) {
      this.snapshots.onDeleted(type, object);
      return;
    }
    if (type.group !== '') return;
    if (type.kind === 'Pod') {
      void this.track(
        this.disks
          .detach(object)
          .catch((error: unknown) =>
            this.options.warn(`detaching the volumes of pod ${object.metadata.namespace}/${object.metadata.name} failed: ${String(error)}`),
          ),
      );
    } else if (type.kind === 'PersistentVolumeClaim') {
      this.reclaim(object);
    } else if (type.kind === 'PersistentVolume') {
      const name = object.metadata.name!;
      void this.track(
        this.disks.removeDisk(name).catch((error: unknown) => this.options.warn(`removing the disk of ${name} failed: ${String(error)}`)),
      );
    }
  }

  /**
   * A deleted claim's volume, as the PV controller treats it: reclaim policy Delete deletes the
   * volume (and its bytes), Retain leaves it Released (still naming the old claim).
   */
  private reclaim(claim: KubeObject): void {
    const volumeName = record(claim.spec).volumeName;
    if (typeof volumeName !== 'string' || volumeName === '') return;
    const volume = this.state.tryGet(this.pvType, '', volumeName);
    if (!volume || record(record(volume.spec).claimRef).uid !== claim.metadata.uid) return;
    try {
      if (record(volume.spec).persistentVolumeReclaimPolicy === 'Delete') this.state.delete(this.pvType, '', volumeName);
      else this.state.update(this.pvType, '', volumeName, { ...volume, status: { ...record(volume.status), phase: 'Released' } }, 'status');
    } catch (error) {
      this.giveUp('claim', `${claim.metadata.namespace}/${claim.metadata.name}`, error);
    }
  }

  /** The kubelet owns pod status: its writes are unconditional (no resourceVersion), as a status update after an await may be based on an older read. */
  private writeStatus(pod: KubeObject, status: Json): KubeObject {
    const { resourceVersion: _ignored, ...metadata } = pod.metadata;
    return this.state.update(this.podType, pod.metadata.namespace ?? '', pod.metadata.name!, { ...pod, metadata, status }, 'status');
  }

  private async stepPod(work: PodWork): Promise<'done' | 'waiting'> {
    let pod = this.state.tryGet(this.podType, work.namespace, work.name);
    if (!pod || pod.metadata.uid !== work.uid || pod.metadata.deletionTimestamp) return 'done';
    const spec = record(pod.spec);
    if (typeof spec.nodeName !== 'string' || spec.nodeName === '') {
      const node = this.pickNode(pod);
      if (node === undefined) return 'waiting';
      // a binding: the scheduler sets nodeName on the pod as it is now
      pod = this.state.update(this.podType, work.namespace, work.name, { ...pod, spec: { ...spec, nodeName: node } }, undefined);
      const conditions = list(record(pod.status).conditions).filter((c) => record(c).type !== 'PodScheduled');
      pod = this.writeStatus(pod, {
        ...record(pod.status),
        conditions: [{ type: 'PodScheduled', status: 'True', lastTransitionTime: this.timestamp() }, ...conditions],
      });
    }
    if (!work.volumesReady) {
      if (!this.claimsBound(pod)) return 'waiting';
      await this.materialize(pod);
      work.volumesReady = true;
      const current = this.state.tryGet(this.podType, work.namespace, work.name);
      if (!current || current.metadata.uid !== work.uid) return 'done';
      pod = current;
    }
    const initContainers = list(record(pod.spec).initContainers).map(record);
    let run = work.init ?? { index: 0, startedAt: Date.now() };
    while (run.index < initContainers.length) {
      const container = initContainers[run.index]!;
      if (!work.init || work.init.index !== run.index) {
        work.init = run;
        pod = this.writeStatus(pod, this.withInitState(pod, run.index, { running: { startedAt: this.timestamp() } }, false));
      }
      const outcome =
        container.name === RESTORE_WAIT_CONTAINER ? await this.restoreWait(work, pod, container, run) : this.scripted(pod, container, run);
      if (outcome === 'waiting') return 'waiting';
      const finished = {
        terminated: {
          exitCode: outcome.exitCode,
          reason: outcome.exitCode === 0 ? 'Completed' : 'Error',
          ...(outcome.message ? { message: outcome.message } : {}),
          startedAt: new Date(run.startedAt).toISOString().replace(/\.\d{3}Z$/, 'Z'),
          finishedAt: this.timestamp(),
        },
      };
      pod = this.writeStatus(pod, this.withInitState(pod, run.index, finished, outcome.exitCode === 0));
      if (outcome.exitCode !== 0) {
        // no restarts are modelled: with restartPolicy Never the pod fails, otherwise it stays Pending
        if (record(pod.spec).restartPolicy === 'Never') this.writeStatus(pod, { ...record(pod.status), phase: 'Failed' });
        return 'done';
      }
      run = { index: run.index + 1, startedAt: Date.now() };
    }
    const initStatuses = list(record(pod.status).initContainerStatuses).map(record);
    this.writeStatus(pod, this.runningStatus(pod, record(pod.status), initStatuses.length > 0 ? initStatuses : undefined));
    return 'done';
  }

  private withInitState(pod: KubeObject, index: number, state: Json, ready: boolean): Json {
    const status = record(pod.status);
    const containers = list(record(pod.spec).initContainers).map(record);
    const current = list(status.initContainerStatuses).map(record);
    const statuses = containers.map((container, i) => {
      const existing = current[i] ?? {
        name: container.name,
        ready: false,
        restartCount: 0,
        state: { waiting: { reason: 'PodInitializing' } },
      };
      return i === index ? { ...existing, name: container.name, image: container.image ?? '', ready, state } : existing;
    });
    return { ...status, initContainerStatuses: statuses };
  }

  private scripted(pod: KubeObject, container: Json, run: InitRun): { exitCode: number; message?: string } | 'waiting' {
    if (run.endsAt === undefined) {
      const { behaviour } = containerBehaviour(
        pod.metadata.annotations,
        this.options.execOverrides.get(podKey(pod.metadata.namespace ?? '', pod.metadata.name!)),
        String(container.name ?? ''),
      );
      const command = [...list(container.command), ...list(container.args)].map(String);
      const outcome = resolveExecOutcome(behaviour, command);
      run.endsAt = run.startedAt + outcome.durationMs;
      run.exitCode = outcome.exitCode;
    }
    if (Date.now() < run.endsAt) return 'waiting';
    return { exitCode: run.exitCode ?? 0 };
  }

  /** `stowage-restore-wait`: done when every mounted volume holds `.stowage/<restore uid>`; then removes the markers. */
  private async restoreWait(
    work: PodWork,
    pod: KubeObject,
    container: Json,
    run: InitRun,
  ): Promise<{ exitCode: number; message?: string } | 'waiting'> {
    const env = new Map(list(container.env).map((entry) => [String(record(entry).name), String(record(entry).value ?? '')]));
    const restoreUid = env.get(RESTORE_UID_ENV) ?? '';
    if (!restoreUid || restoreUid.includes('/')) return { exitCode: 2, message: `${RESTORE_UID_ENV} must be the restore's uid` };
    const mounted = new Set(list(container.volumeMounts).map((mount) => String(record(mount).name)));
    const dirs = podVolumeDirs(this.state, this.options.dataRoot, pod).filter((dir) => mounted.has(dir.volume));
    if (dirs.length === 0) return { exitCode: 2, message: 'no restored volume is mounted' };
    // Looks as often as the real init container does, not at every tick, or at once when woken.
    const now = Date.now();
    const pollMs = this.options.restoreWaitPollMs ?? RESTORE_WAIT_POLL_MS;
    if (!work.lookNow && run.lastLookAt !== undefined && now - run.lastLookAt < pollMs) return 'waiting';
    // cleared before looking: a wake during this look (a marker written after its stat) looks again at the next tick
    work.lookNow = false;
    work.nextLookAt = undefined;
    run.lastLookAt = now;
    const markers = dirs.map((dir) => join(dir.path, RESTORE_MARKER_DIR, restoreUid));
    const present = await Promise.all(
      markers.map((marker) =>
        stat(marker).then(
          () => true,
          () => false,
        ),
      ),
    );
    if (present.every(Boolean)) {
      for (const [i, marker] of markers.entries()) {
        await unlink(marker).catch(() => undefined);
        const markerDir = join(dirs[i]!.path, RESTORE_MARKER_DIR);
        if ((await readdir(markerDir).catch(() => ['?'])).length === 0) await rmdir(markerDir).catch(() => undefined);
      }
      return { exitCode: 0 };
    }
    const timeoutMs = Number(env.get(RESTORE_WAIT_TIMEOUT_ENV) ?? DEFAULT_RESTORE_WAIT_TIMEOUT_MS);
    if (Number.isFinite(timeoutMs) && timeoutMs > 0 && Date.now() - run.startedAt > timeoutMs) {
      const missing = dirs.filter((_, i) => !present[i]).map((dir) => dir.volume);
      return { exitCode: 1, message: `timed out waiting for the restore of volume(s) ${missing.join(', ')}` };
    }
    work.nextLookAt = now + pollMs;
    return 'waiting';
  }

  // --- provisioner --------------------------------------------------------------------------------

  private defaultStorageClass(): string | undefined {
    for (const storageClass of this.state.store.list('storageclasses.storage.k8s.io', undefined)) {
      if (DEFAULT_CLASS_ANNOTATIONS.some((key) => storageClass.metadata.annotations?.[key] === 'true')) return storageClass.metadata.name;
    }
    return undefined;
  }

  /** Binds one claim if it can be; true when it is bound (or gone) and needs no more looking at. */
  private stepClaim(namespace: string, name: string): boolean {
    const claim = this.state.tryGet(this.pvcType, namespace, name);
    if (!claim || claim.metadata.deletionTimestamp) return true;
    if (record(claim.status).phase === 'Bound') return true;
    const spec = record(claim.spec);
    let volumeName = typeof spec.volumeName === 'string' && spec.volumeName !== '' ? spec.volumeName : undefined;
    let volume: KubeObject | undefined;
    if (volumeName !== undefined) {
      volume = this.state.tryGet(this.pvType, '', volumeName);
      if (!volume) return false; // waits for its PV (a restore creates PVs first)
    } else {
      volume = [...this.state.store.list('persistentvolumes', undefined)].find((pv) => {
        const claimRef = record(record(pv.spec).claimRef);
        return (
          claimRef.namespace === namespace && claimRef.name === name && (claimRef.uid === undefined || claimRef.uid === claim.metadata.uid)
        );
      });
      // A claim with a selector is bound to an Available volume that matches it, never provisioned
      // (as the external provisioner refuses to): a restore rebinds a filled volume to it.
      if (!volume && isPlainObject(spec.selector)) volume = this.availableVolumeFor(claim);
      if (!volume && isPlainObject(spec.selector)) return false;
      if (!volume) {
        const className =
          spec.storageClassName === undefined || spec.storageClassName === null ? this.defaultStorageClass() : spec.storageClassName;
        if (typeof className !== 'string' || className === '') return false; // no class: only a matching PV can bind it
        const storageClass = this.state.store.get('storageclasses.storage.k8s.io', '', className);
        if (!storageClass) return false;
        const source = snapshotSourceOf(spec);
        if (source) {
          const filled = this.fillFromSnapshot(claim, source);
          if (filled === 'waiting') return false;
          volume = this.provision(claim, storageClass, filled.restoreSizeBytes);
        } else {
          volume = this.provision(claim, storageClass);
        }
      }
      volumeName = volume.metadata.name!;
    }
    const claimRef = record(record(volume.spec).claimRef);
    if (claimRef.uid !== claim.metadata.uid || record(volume.status).phase !== 'Bound') {
      const bound = this.state.update(
        this.pvType,
        '',
        volumeName,
        {
          ...volume,
          spec: {
            ...record(volume.spec),
            claimRef: { kind: 'PersistentVolumeClaim', apiVersion: 'v1', ...claimRef, namespace, name, uid: claim.metadata.uid },
          },
        },
        undefined,
      );
      this.state.update(this.pvType, '', volumeName, { ...bound, status: { phase: 'Bound' } }, 'status');
    }
    const annotations = {
      ...(claim.metadata.annotations ?? {}),
      'pv.kubernetes.io/bind-completed': 'yes',
      'pv.kubernetes.io/bound-by-controller': 'yes',
    };
    const updated = this.state.update(
      this.pvcType,
      namespace,
      name,
      { ...claim, metadata: { ...claim.metadata, annotations }, spec: { ...spec, volumeName } },
      undefined,
    );
    const volumeSpec = record(volume.spec);
    this.state.update(
      this.pvcType,
      namespace,
      name,
      {
        ...updated,
        status: {
          phase: 'Bound',
          accessModes: volumeSpec.accessModes ?? spec.accessModes ?? ['ReadWriteOnce'],
          capacity: volumeSpec.capacity ?? {},
        },
      },
      'status',
    );
    return true;
  }

  /** An Available volume (no claim) whose labels match the claim's selector, of the claim's class and mode. */
  private availableVolumeFor(claim: KubeObject): KubeObject | undefined {
    const spec = record(claim.spec);
    const wanted = record(record(spec.selector).matchLabels);
    return [...this.state.store.list('persistentvolumes', undefined)].find((pv) => {
      const pvSpec = record(pv.spec);
      if (isPlainObject(pvSpec.claimRef) || pv.metadata.deletionTimestamp) return false;
      if (typeof spec.storageClassName === 'string' && pvSpec.storageClassName !== spec.storageClassName) return false;
      if ((pvSpec.volumeMode ?? 'Filesystem') !== (spec.volumeMode ?? 'Filesystem')) return false;
      return Object.entries(wanted).every(([key, value]) => pv.metadata.labels?.[key] === value);
    });
  }

  /**
   * The disk of a claim's new volume, filled from the VolumeSnapshot its dataSource names once that
   * is ready to use: copied (or shared by hard links for a ReadOnlyMany claim). 'waiting' until then.
   */
  private fillFromSnapshot(claim: KubeObject, snapshotName: string): 'waiting' | { restoreSizeBytes: number | undefined } {
    const pvName = `pvc-${claim.metadata.uid}`;
    const filling = this.filling.get(pvName);
    if (filling?.done) {
      this.filling.delete(pvName);
      return { restoreSizeBytes: filling.restoreSizeBytes };
    }
    if (filling) return 'waiting';
    const entry: { done: boolean; restoreSizeBytes?: number | undefined } = { done: false };
    this.filling.set(pvName, entry);
    const accessModes = list(record(claim.spec).accessModes);
    const mode: CopyMode = accessModes.length > 0 && accessModes.every((m) => m === 'ReadOnlyMany') ? 'link' : 'copy';
    void this.track(
      this.snapshots
        .readyForRestore(claim.metadata.namespace ?? '', snapshotName)
        .then(async (ready) => {
          if (!ready) {
            this.filling.delete(pvName); // not ready yet: looked at again on a later tick
            return;
          }
          await this.disks.provisionFromSnapshot(pvName, ready.handle, mode);
          entry.restoreSizeBytes = ready.restoreSizeBytes;
          entry.done = true;
        })
        .catch((error: unknown) => {
          this.filling.delete(pvName);
          this.options.warn(`provisioning ${pvName} from snapshot ${snapshotName} failed: ${String(error)}`);
        }),
    );
    return 'waiting';
  }

  private provision(claim: KubeObject, storageClass: KubeObject, minimumBytes?: number): KubeObject {
    const spec = record(claim.spec);
    const uid = claim.metadata.uid ?? randomUUID();
    const name = `pvc-${uid}`;
    const provisioner = typeof storageClass.provisioner === 'string' ? storageClass.provisioner : 'sim.csi.stowage.dev';
    const requested = record(record(spec.resources).requests).storage;
    const storage = minimumBytes !== undefined && (quantityBytes(requested) ?? 0) < minimumBytes ? String(minimumBytes) : requested;
    return this.state.create(this.pvType, '', {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name, annotations: { 'pv.kubernetes.io/provisioned-by': provisioner } },
      spec: {
        capacity: { storage: typeof storage === 'string' ? storage : '1Gi' },
        accessModes: Array.isArray(spec.accessModes) ? spec.accessModes : ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: typeof storageClass.reclaimPolicy === 'string' ? storageClass.reclaimPolicy : 'Delete',
        storageClassName: storageClass.metadata.name,
        volumeMode: typeof spec.volumeMode === 'string' ? spec.volumeMode : 'Filesystem',
        csi: { driver: provisioner, volumeHandle: name },
        claimRef: { kind: 'PersistentVolumeClaim', apiVersion: 'v1', namespace: claim.metadata.namespace, name: claim.metadata.name, uid },
      },
    });
  }

  // --- the loop -------------------------------------------------------------------------------------

  /** An object deleted while it was being worked on is simply done; anything else is worth a warning. */
  private giveUp(what: string, key: string, error: unknown): void {
    if (error instanceof ApiError && error.status.code === 404) return;
    this.options.warn(`the simulated ${what === 'pod' ? 'kubelet' : 'provisioner'} gave up on ${what} ${key}: ${String(error)}`);
  }

  /**
   * Steps one pod unless a step of it is under way (that one is returned; a wake it missed keeps
   * `lookNow` and is served by the next tick).
   */
  private step(key: string, work: PodWork): Promise<void> {
    if (work.stepping) return work.stepping;
    work.stepping = this.stepPod(work).then(
      (result) => {
        work.stepping = undefined;
        if (result === 'done') this.pods.delete(key);
      },
      (error: unknown) => {
        work.stepping = undefined;
        this.giveUp('pod', key, error);
        this.pods.delete(key);
      },
    );
    return work.stepping;
  }

  private async tick(): Promise<void> {
    if (this.ticking || this.closed) return;
    this.ticking = true;
    try {
      const now = Date.now();
      for (const [name, at] of this.crds) {
        if (at > now) continue;
        this.crds.delete(name);
        this.state.establishCrd(name);
      }
      for (const key of [...this.claims]) {
        const slash = key.indexOf('/');
        try {
          if (this.stepClaim(key.slice(0, slash), key.slice(slash + 1))) this.claims.delete(key);
        } catch (error) {
          this.giveUp('claim', key, error);
          this.claims.delete(key);
        }
      }
      // Every pod at once, as every kubelet works on its own: stepped one after another, a tick over
      // hundreds of pods waiting for restore markers (a file stat each) would delay the last by the
      // sum of the others' stats. Each pod is still stepped by one tick at a time.
      // A pod whose restore-wait is between looks is not stepped at all (hundreds wait at once).
      await Promise.all(
        [...this.pods].map(([key, work]) =>
          !work.lookNow && work.nextLookAt !== undefined && now < work.nextLookAt ? undefined : this.step(key, work),
        ),
      );
    } finally {
      this.ticking = false;
      if (this.pods.size === 0 && this.claims.size === 0 && this.crds.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    }
  }
}
