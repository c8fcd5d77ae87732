import type {
  Informer,
  VolumeOperation,
  VolumeOperationClient,
  VolumeOperationPhase,
  VolumeOperationSpecBase,
  VolumeOperationStatusBase,
} from '@stowage/kube';
import type { Logger } from '@stowage/platform';
import { abortableSleep } from '@stowage/repository';
import { addStorageCost, emptyStorageCost, parseStorageCost, type StorageCost, StorageMeter } from '@stowage/storage/request-meter';

/**
 * How the node agent runs a volume operation — a PodVolumeBackup (copy a volume into the
 * repository) or a PodVolumeRestore (restore a snapshot into a volume) — one implementation for
 * both kinds: claim with a conditional status update (one winner even with two agents or
 * duplicate events), progress writes, `spec.cancel`, ownership fencing by the claim's
 * startTimestamp, shutdown leaving it InProgress, and takeover of what a previous run left
 * InProgress. What differs per kind (which objects are this node's, the work itself, messages)
 * comes in a `VolumeOperationHandler`. The node-wide limit is the agent's (agent.ts): it asks
 * every kind's source what is busy and what is queued, and claims in creation order.
 */

/** How logs, metrics and start records name each kind of volume operation. */
export type OperationKindLabel = 'PVB' | 'PVR' | 'DataUpload' | 'DataDownload';

export interface OperationProgress {
  totalBytes: number;
  bytesDone: number;
}

/** An expected failure whose message is what the user reads in status.message. */
export class OperationFailure extends Error {
  override readonly name = 'OperationFailure';
}

export interface OperationRunContext {
  signal: AbortSignal;
  /** True when this run took over an object a previous agent run left InProgress. */
  resumed: boolean;
  onProgress(progress: OperationProgress): void;
}

export interface OperationResult<Status> {
  /** Fields of the Completed status beyond phase, timestamps and progress. */
  status: Partial<Status>;
  /** Bytes the operation moved (the Completed status's progress). */
  bytes: number;
  /** For the log line. */
  details: Record<string, unknown>;
}

export interface VolumeOperationHandler<Spec extends VolumeOperationSpecBase, Status extends VolumeOperationStatusBase> {
  /** `PVB` / `PVR`: logs, metrics and start records name objects by it. */
  readonly label: OperationKindLabel;
  /** What the work is called in messages: `copy`, `restore`. */
  readonly noun: string;
  readonly client: VolumeOperationClient<Spec, Status>;
  readonly labelSelector?: string | undefined;
  /** An object this node runs, ran, or may start (counts against the node's limit while active). */
  belongsToNode(object: VolumeOperation<Spec, Status>): boolean;
  /** A New object this node may start now. */
  isStartable(object: VolumeOperation<Spec, Status>): boolean;
  /** A New object whose spec.cancel this agent may answer (a conditional write: one agent wins). */
  answersCancelOf(object: VolumeOperation<Spec, Status>): boolean;
  /**
   * The outside state `belongsToNode` and `isStartable` read besides the object (a PVR's pod uid):
   * when the agent reports a change to it (`dependencyChanged`), the objects that name it are
   * evaluated again. None when the object alone decides (a PVB's node is in its spec).
   */
  dependencyOf?(object: VolumeOperation<Spec, Status>): string | undefined;
  /** Fields the claim adds to the InProgress status (a PVR records its node). */
  readonly claimFields: Partial<Status>;
  readonly messages: {
    /** status.message of a run that took over an object left InProgress. */
    resumed: string;
    canceledBeforeStart: string;
    /** After spec.cancel stopped a run that had moved `bytesDone` bytes. */
    canceled(bytesDone: number): string;
    /** Canceling when the agent restarted. */
    canceledAtRestart: string;
  };
  run(object: VolumeOperation<Spec, Status>, context: OperationRunContext): Promise<OperationResult<Status>>;
  /** A message a person can act on, from whatever run() threw. */
  describeFailure(error: unknown): string;
  /** True when `error` is the work stopping because its signal was aborted. */
  isCanceledError(error: unknown): boolean;
}

export interface OperationStart {
  kind: OperationKindLabel;
  name: string;
  resumed: boolean;
  at: string;
}

export interface OperationCounters {
  started: number;
  completed: number;
  failed: number;
  canceled: number;
  bytes: number;
}

export interface QueuedOperation {
  kind: OperationKindLabel;
  name: string;
  creationTimestamp: string;
  /** First-seen order breaks creationTimestamp ties (whole seconds). */
  seen: number;
  claim(): Promise<boolean>;
}

export interface OperationSourceDeps {
  log: Logger;
  progressIntervalMs: number;
  takeoverGraceMs: number;
  /** Ask the agent for a scheduling pass (something changed). */
  schedule(): void;
  /** A global first-seen counter, shared by all kinds. */
  nextSeen(): number;
  /** Aborted when the agent stops. */
  stopSignal: AbortSignal;
  /** Records every start, in order, across kinds. */
  recordStart(start: OperationStart): void;
}

/** What the agent's scheduler needs of a kind's source, whatever the kind. */
export interface ScheduledSource {
  readonly label: OperationKindLabel;
  readonly counters: OperationCounters;
  /** true once the informer's first list is in. */
  readonly synced: Promise<boolean>;
  /**
   * Brings this kind's view of the node up to date for a scheduling pass: evaluates again only
   * the objects that changed since the last pass (informer events, `dependencyChanged`), or all
   * of them after `rescanAll`, and answers their spec.cancel (forwarded to running work, answered
   * for New objects). True when what is busy or startable here may have changed since the last
   * refresh (or a run ended): only then is there anything new to claim.
   */
  refresh(): Promise<boolean>;
  /** The next refresh evaluates every cached object (the periodic safety net, and a kind joining). */
  rescanAll(): void;
  /** Outside state an object's eligibility reads changed (see VolumeOperationHandler.dependencyOf). */
  dependencyChanged(key: string): void;
  /** Names InProgress or Canceling on this node: running here, or held by another (previous) agent. */
  busyOnNode(): Iterable<string>;
  queued(): QueuedOperation[];
  /** Takes over what a previous run of this node's agent left InProgress (see README, Restart). */
  recoverOrphans(): Promise<void>;
  running(): number;
  byPhase(): Record<VolumeOperationPhase, number>;
  /** Stops the informer, aborts running work (left InProgress), resolves when it has stopped. */
  stop(): Promise<void>;
}

export interface OperationSource<Spec extends VolumeOperationSpecBase, Status extends VolumeOperationStatusBase> extends ScheduledSource {
  readonly informer: Informer<VolumeOperation<Spec, Status>>;
}

const ACTIVE_PHASES: ReadonlySet<string> = new Set(['InProgress', 'Canceling']);

export function phaseOf(object: { status?: VolumeOperationStatusBase | undefined }): VolumeOperationPhase {
  return object.status?.phase ?? 'New';
}

export function isActivePhase(object: { status?: VolumeOperationStatusBase | undefined }): boolean {
  return ACTIVE_PHASES.has(phaseOf(object));
}

interface RunningOperation<Status> {
  readonly name: string;
  readonly controller: AbortController;
  /** startTimestamp written at claim: the fencing token of this run (a takeover writes a new one). */
  readonly token: string;
  status: Status;
  resourceVersion: string;
  cancelRequested: boolean;
  shuttingDown: boolean;
  lostOwnership: boolean;
  lastProgressWriteAt: number;
  progressWritePending: boolean;
  lastBytes: number;
  writes: Promise<unknown>;
  done?: Promise<void>;
  /** Counts the storage requests of this run (the work runs in its scope). */
  readonly meter: StorageMeter;
  /** What earlier runs of the object asked of storage (a resumed run goes on from there). */
  readonly priorCost: StorageCost;
}

/** status.storage of a run: what it and the runs before it asked of storage. */
function storageOf(run: { meter: StorageMeter; priorCost: StorageCost }): StorageCost {
  return addStorageCost(run.priorCost, run.meter.total());
}

export function startOperationSource<Spec extends VolumeOperationSpecBase, Status extends VolumeOperationStatusBase>(
  handler: VolumeOperationHandler<Spec, Status>,
  deps: OperationSourceDeps,
): OperationSource<Spec, Status> {
  type Obj = VolumeOperation<Spec, Status>;
  const { label, noun, client } = handler;
  const log = deps.log.child({ kind: label });
  const key = label.toLowerCase();
  const runs = new Map<string, RunningOperation<Status>>();
  const firstSeen = new Map<string, number>();
  /** resourceVersions of New+cancel objects already answered, so a re-scan does not write twice. */
  const answeredCancels = new Set<string>();
  const counters: OperationCounters = { started: 0, completed: 0, failed: 0, canceled: 0, bytes: 0 };
  let stopped = false;

  // The node view, kept up to date object by object: a pass costs what changed, not the whole
  // cache (every agent sees every PVR, and a restore's burst of PVR events reached every agent).
  /** Names changed since the last refresh. */
  const dirty = new Set<string>();
  let rescanDue = true;
  /**
   * Something the claim step reads moved since the last refresh: an object entered or left the
   * active or startable set, a run ended, or a rescan. Most PVR events are other nodes' and move
   * nothing here, and then the agent skips the claim step.
   */
  let viewChanged = true;
  /** Active (InProgress, Canceling) objects of this node, as of the last refresh. */
  const activeHere = new Set<string>();
  /** New objects without spec.cancel this node may start, as of the last refresh. */
  const startable = new Set<string>();
  /** dependencyOf key → names of the objects that read it, and back. */
  const dependents = new Map<string, Set<string>>();
  const dependencyOfName = new Map<string, string>();

  const trackDependency = (name: string, key: string | undefined) => {
    const previous = dependencyOfName.get(name);
    if (previous === key) return;
    if (previous !== undefined) {
      const names = dependents.get(previous);
      names?.delete(name);
      if (names?.size === 0) dependents.delete(previous);
    }
    if (key === undefined) {
      dependencyOfName.delete(name);
      return;
    }
    dependencyOfName.set(name, key);
    const names = dependents.get(key) ?? new Set<string>();
    names.add(name);
    dependents.set(key, names);
  };

  const informer = client.watch({
    labelSelector: handler.labelSelector,
    onEvent: (event) => {
      const name = event.object.metadata.name;
      dirty.add(name);
      trackDependency(name, event.type === 'DELETED' ? undefined : handler.dependencyOf?.(event.object));
      if (event.type === 'DELETED') {
        firstSeen.delete(name);
        const run = runs.get(name);
        if (run) {
          log.warn({ [key]: name }, `${label} deleted while running; stopping the ${noun}`);
          run.lostOwnership = true;
          run.controller.abort(new Error(`${label} deleted`));
        }
      } else if (!firstSeen.has(name)) {
        firstSeen.set(name, deps.nextSeen());
      }
      deps.schedule();
    },
    onError: (err) => log.warn({ err, code: err.code }, `${label} watch problem (it recovers by itself)`),
  });

  const current = (name: string): Obj | undefined => informer.get(name, client.namespace);
  const isQueueable = (object: Obj) =>
    phaseOf(object) === 'New' && !object.spec?.cancel && !runs.has(object.metadata.name) && handler.isStartable(object);

  function busyOnNode(): Iterable<string> {
    return new Set<string>([...runs.keys(), ...activeHere]);
  }

  function queued(): QueuedOperation[] {
    const out: QueuedOperation[] = [];
    for (const name of startable) {
      // Checked again on the cached object: an event may have come in since the refresh.
      const object = current(name);
      if (!object || !isQueueable(object)) continue;
      out.push({
        kind: label,
        name,
        creationTimestamp: (object.metadata.creationTimestamp ?? '').toString(),
        seen: firstSeen.get(name) ?? 0,
        claim: () => claim(object, false),
      });
    }
    return out;
  }

  async function refresh(): Promise<boolean> {
    let names: Iterable<string>;
    if (rescanDue) {
      rescanDue = false;
      viewChanged = true;
      dirty.clear();
      activeHere.clear();
      startable.clear();
      names = informer.list().map((object) => object.metadata.name);
    } else {
      names = [...dirty];
      dirty.clear();
    }
    for (const name of names) {
      if (stopped) break;
      await evaluate(name);
    }
    const changed = viewChanged;
    viewChanged = false;
    return changed;
  }

  /** One object's place in the node view, and its spec.cancel answered. */
  async function evaluate(name: string): Promise<void> {
    const object = current(name);
    const active = object !== undefined && isActivePhase(object) && handler.belongsToNode(object);
    const queueable = object !== undefined && isQueueable(object);
    if (active !== activeHere.has(name) || queueable !== startable.has(name)) viewChanged = true;
    if (active) activeHere.add(name);
    else activeHere.delete(name);
    if (queueable) startable.add(name);
    else startable.delete(name);
    if (!object?.spec?.cancel) return;
    const run = runs.get(name);
    if (run) {
      if (!run.cancelRequested) requestCancel(run);
      return;
    }
    const rv = object.metadata.resourceVersion ?? '';
    if (phaseOf(object) !== 'New' || !handler.answersCancelOf(object) || answeredCancels.has(rv)) return;
    answeredCancels.add(rv);
    try {
      const result = await client.updateStatusIf(name, rv, {
        phase: 'Canceled',
        completionTimestamp: new Date().toISOString(),
        message: handler.messages.canceledBeforeStart,
      } as Status);
      if (result.outcome === 'updated') {
        counters.canceled++;
        log.info({ [key]: name }, `${label} canceled before it started`);
      }
    } catch (error) {
      // Not answered: the periodic full rescan tries again (no event may come for this object).
      answeredCancels.delete(rv);
      log.warn({ [key]: name, err: error }, 'cancel not answered yet; the next rescan tries again');
    }
  }

  /** New (or orphaned InProgress) → InProgress with a fresh token; true when this agent won. */
  async function claim(object: Obj, resumed: boolean): Promise<boolean> {
    if (stopped) return false;
    const name = object.metadata.name;
    const token = new Date().toISOString();
    // A resumed object keeps what its earlier runs asked of storage; a new one starts at zero.
    const priorCost = (resumed ? parseStorageCost(object.status?.storage) : undefined) ?? emptyStorageCost();
    const status = {
      ...handler.claimFields,
      phase: 'InProgress',
      startTimestamp: token,
      progress: { totalBytes: 0, bytesDone: 0 },
      storage: priorCost,
      ...(resumed ? { message: handler.messages.resumed } : {}),
    } as Status;
    const result = await client.updateStatusIf(name, object.metadata.resourceVersion ?? '', status);
    if (result.outcome !== 'updated') {
      log.debug({ [key]: name, outcome: result.outcome }, 'claim lost: another agent or a newer version has it');
      return false;
    }
    const run: RunningOperation<Status> = {
      name,
      controller: new AbortController(),
      token,
      status,
      resourceVersion: result.object.metadata.resourceVersion ?? '',
      cancelRequested: false,
      shuttingDown: false,
      lostOwnership: false,
      lastProgressWriteAt: Date.now(),
      progressWritePending: false,
      lastBytes: 0,
      writes: Promise.resolve(),
      meter: new StorageMeter(label === 'PVB' ? 'backup' : 'restore'),
      priorCost,
    };
    runs.set(name, run);
    counters.started++;
    deps.recordStart({ kind: label, name, resumed, at: token });
    log.info({ [key]: name, resumed }, resumed ? `${label} resumed` : `${label} claimed`);
    run.done = execute(run, result.object, resumed).finally(() => {
      runs.delete(name);
      viewChanged = true;
      deps.schedule();
    });
    return true;
  }

  // ---------------------------------------------------------------- status writes
  /**
   * Every write of a run is conditional on the last resourceVersion it saw; on a conflict it
   * re-reads and goes on only if the object still carries its token (startTimestamp). Otherwise
   * someone took it over (or deleted it): the run stops and records nothing.
   */
  function writeStatus(run: RunningOperation<Status>, next: Status, opts: { terminal: boolean }): Promise<boolean> {
    const write = run.writes.then(async () => {
      if (run.lostOwnership) return false;
      for (let attempt = 0; attempt < 20; attempt++) {
        try {
          const result = await client.updateStatusIf(run.name, run.resourceVersion, next);
          if (result.outcome === 'updated') {
            run.resourceVersion = result.object.metadata.resourceVersion ?? run.resourceVersion;
            run.status = next;
            return true;
          }
          const current = result.outcome === 'conflict' ? result.current : undefined;
          if (current && current.status?.startTimestamp === run.token && sameStatus(current.status, next)) {
            // Our earlier attempt landed and only its answer was lost.
            run.resourceVersion = current.metadata.resourceVersion ?? run.resourceVersion;
            run.status = next;
            return true;
          }
          if (!current || current.status?.startTimestamp !== run.token || !isActivePhase(current)) {
            loseOwnership(run, current ? `now ${phaseOf(current)} with start ${current.status?.startTimestamp ?? 'none'}` : 'deleted');
            return false;
          }
          run.resourceVersion = current.metadata.resourceVersion ?? run.resourceVersion;
        } catch (error) {
          if (!opts.terminal) {
            log.warn({ [key]: run.name, err: error }, 'progress not written; the next one will try again');
            return false;
          }
          log.warn({ [key]: run.name, err: error, attempt }, 'status not written yet; retrying');
          await abortableSleep(Math.min(5000, 200 * 2 ** attempt)).catch(() => undefined);
        }
      }
      log.error({ [key]: run.name, phase: next.phase }, `status could not be written; the next start of the agent resumes this ${label}`);
      return false;
    });
    run.writes = write.catch(() => false);
    return write;
  }

  function loseOwnership(run: RunningOperation<Status>, why: string): void {
    if (run.lostOwnership) return;
    run.lostOwnership = true;
    log.warn({ [key]: run.name, why }, `${label} was taken over by another agent; this ${noun} stops and records nothing`);
    run.controller.abort(new Error('ownership lost'));
  }

  function requestCancel(run: RunningOperation<Status>): void {
    run.cancelRequested = true;
    log.info({ [key]: run.name }, `cancel requested; stopping the ${noun}`);
    void writeStatus(
      run,
      { ...run.status, phase: 'Canceling', message: `cancel requested (spec.cancel); stopping the ${noun}`, storage: storageOf(run) },
      { terminal: false },
    );
    run.controller.abort(new Error('canceled by spec.cancel'));
  }

  function onProgress(run: RunningOperation<Status>, progress: OperationProgress): void {
    counters.bytes += Math.max(0, progress.bytesDone - run.lastBytes);
    run.lastBytes = progress.bytesDone;
    const now = Date.now();
    if (run.progressWritePending || run.cancelRequested || now - run.lastProgressWriteAt < deps.progressIntervalMs) return;
    const current = run.status.progress;
    if (current?.bytesDone === progress.bytesDone && current?.totalBytes === progress.totalBytes) return;
    run.lastProgressWriteAt = now;
    run.progressWritePending = true;
    void writeStatus(
      run,
      { ...run.status, progress: { totalBytes: progress.totalBytes, bytesDone: progress.bytesDone }, storage: storageOf(run) },
      { terminal: false },
    ).finally(() => {
      run.progressWritePending = false;
    });
  }

  // ---------------------------------------------------------------- the work
  async function execute(run: RunningOperation<Status>, object: Obj, resumed: boolean): Promise<void> {
    const name = run.name;
    try {
      // Every storage request of the work is counted for this object (status.storage).
      const result = await run.meter.run(() =>
        handler.run(object, {
          signal: run.controller.signal,
          resumed,
          onProgress: (progress) => onProgress(run, progress),
        }),
      );
      const written = await writeStatus(
        run,
        {
          ...run.status,
          ...result.status,
          phase: 'Completed',
          startTimestamp: run.token,
          completionTimestamp: new Date().toISOString(),
          progress: { totalBytes: result.bytes, bytesDone: result.bytes },
          storage: storageOf(run),
          // a resume message does not describe the outcome; the handler's (if any) does
          message: result.status.message,
        } as Status,
        { terminal: true },
      );
      if (written) counters.completed++;
      log.info({ [key]: name, ...result.details, recorded: written }, `${label} completed`);
    } catch (error) {
      if (run.lostOwnership) return;
      const aborted = run.controller.signal.aborted || handler.isCanceledError(error);
      if (aborted && run.cancelRequested) {
        const written = await writeStatus(
          run,
          {
            ...run.status,
            phase: 'Canceled',
            completionTimestamp: new Date().toISOString(),
            message: handler.messages.canceled(run.lastBytes),
            storage: storageOf(run),
          } as Status,
          { terminal: true },
        );
        if (written) counters.canceled++;
        log.info({ [key]: name }, `${label} canceled`);
        return;
      }
      if (aborted && run.shuttingDown) {
        // Left InProgress on purpose: the next start of this agent resumes it (see README, Restart).
        await writeStatus(
          run,
          {
            ...run.status,
            message: 'interrupted by a node agent shutdown; the agent resumes it when it starts again',
            storage: storageOf(run),
          },
          { terminal: false },
        );
        log.info({ [key]: name }, `${noun} interrupted by shutdown; left InProgress for the next start`);
        return;
      }
      const message = error instanceof OperationFailure ? error.message : handler.describeFailure(error);
      log.warn({ [key]: name, err: error }, `${label} failed`);
      const written = await writeStatus(
        run,
        { ...run.status, phase: 'Failed', completionTimestamp: new Date().toISOString(), message, storage: storageOf(run) } as Status,
        { terminal: true },
      );
      if (written) counters.failed++;
    }
  }

  // ---------------------------------------------------------------- restart recovery
  /**
   * Objects of this node that are InProgress or Canceling when the agent starts were left by its
   * previous run (one agent per node). They are resumed — the work restarts from scratch — after
   * checking for `takeoverGraceMs` that no live agent is still writing their status. Canceling
   * ones end Canceled.
   */
  async function recoverOrphans(): Promise<void> {
    const orphans = informer.list().filter((object) => handler.belongsToNode(object) && isActivePhase(object));
    if (orphans.length === 0) return;
    log.info(
      { [`${key}s`]: orphans.map((o) => o.metadata.name) },
      `found ${label}s left in progress; checking that no agent still runs them`,
    );
    await abortableSleep(deps.takeoverGraceMs, deps.stopSignal);
    for (const seen of orphans) {
      if (stopped) return;
      const current = await client.get(seen.metadata.name);
      if (!current || !isActivePhase(current) || runs.has(current.metadata.name)) continue;
      if (JSON.stringify(current.status ?? {}) !== JSON.stringify(seen.status ?? {})) {
        log.info({ [key]: current.metadata.name }, `${label} status still changes: another live agent runs it; leaving it alone`);
        continue;
      }
      if (phaseOf(current) === 'Canceling' || current.spec.cancel) {
        const result = await client.updateStatusIf(current.metadata.name, current.metadata.resourceVersion ?? '', {
          ...current.status,
          phase: 'Canceled',
          completionTimestamp: new Date().toISOString(),
          message: handler.messages.canceledAtRestart,
        } as Status);
        if (result.outcome === 'updated') counters.canceled++;
        continue;
      }
      await claim(current, true);
    }
  }

  return {
    label,
    informer,
    synced: informer.synced,
    counters,
    busyOnNode,
    queued,
    refresh,
    rescanAll: () => {
      rescanDue = true;
    },
    dependencyChanged: (dependency) => {
      for (const name of dependents.get(dependency) ?? []) dirty.add(name);
    },
    recoverOrphans,
    running: () => runs.size,
    byPhase: () => {
      const counts: Record<VolumeOperationPhase, number> = { New: 0, InProgress: 0, Completed: 0, Failed: 0, Canceling: 0, Canceled: 0 };
      for (const object of informer.list()) if (handler.belongsToNode(object)) counts[phaseOf(object)]++;
      return counts;
    },
    stop: async () => {
      stopped = true;
      await informer.stop();
      for (const run of runs.values()) {
        run.shuttingDown = true;
        run.controller.abort(new Error('node agent shutting down'));
      }
      await Promise.allSettled([...runs.values()].map((run) => run.done));
    },
  };
}

function sameStatus(a: VolumeOperationStatusBase, b: VolumeOperationStatusBase): boolean {
  const snapshot = (s: VolumeOperationStatusBase) => (s as { snapshotID?: string }).snapshotID;
  return a.phase === b.phase && snapshot(a) === snapshot(b) && a.message === b.message && a.progress?.bytesDone === b.progress?.bytesDone;
}
