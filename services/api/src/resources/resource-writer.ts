/*
 * What every stowage.dev controller writes back to the API server: status (only when it changed;
 * a condition keeps its transition time while its status holds), an Event on each phase change
 * (correlated as kube's recorder does: event-recorder.ts),
 * finalizers, and the resource's own deletion. Shared by the Backup, Restore and Schedule
 * controllers so the three report the same way (docs/tenancy.md#the-controller); with them, the
 * pass they share (reconcileEach) and whom a Restore or Schedule acts as (resourceRequester).
 */
import { type AccessAttributes, DEFAULT_SERVICE_ACCOUNT, type Requester, serviceAccountRequester } from '@stowage/core';
import { type AccessDecision, isKubeError, type KubeClients } from '@stowage/kube';
import { EventRecorder } from './event-recorder.js';
import { type Condition, DELETE_FINALIZER, objectPathOf, type ResourceKind } from './kinds.js';

/** A stowage.dev resource as the controllers read it. */
export interface StowageResource<S extends ResourceStatusBase = ResourceStatusBase> {
  metadata: {
    name: string;
    namespace?: string;
    uid: string;
    generation?: number;
    deletionTimestamp?: string;
    finalizers?: string[];
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: Record<string, unknown>;
  status?: S;
}

export interface ResourceStatusBase {
  phase?: string | undefined;
  runName?: string | undefined;
  validationErrors?: string[] | undefined;
  failureReason?: string | undefined;
  conditions?: Condition[] | undefined;
  observedGeneration?: number | undefined;
}

export interface ResourceWriterDeps {
  kube: Pick<KubeClients, 'requestJson'>;
  logger: { warn(obj: object, msg?: string): void };
  /** The namespace cluster-scoped resources' Events go to. */
  eventNamespace: string;
  now?: () => number;
}

/** Phases after which nothing more happens to a run. */
export const TERMINAL_PHASES = new Set(['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled']);

const WARNING_PHASES = new Set(['Failed', 'FailedValidation', 'PartiallyFailed']);

/** The run a resource stands for: `<name>-<8 hex of its uid>` (callers add the namespace: core's runKey). */
export function uidSuffixOf(uid: string): string {
  return uid
    .replace(/[^a-f0-9]/gi, '')
    .slice(0, 8)
    .toLowerCase();
}

export class ResourceWriter {
  private readonly events: EventRecorder;

  constructor(private readonly deps: ResourceWriterDeps) {
    this.events = new EventRecorder({ ...deps, component: 'stowage-controller' });
  }

  private now(): number {
    return (this.deps.now ?? Date.now)();
  }

  condition(type: string, status: Condition['status'], reason: string, message: string, res: StowageResource): Condition {
    return {
      type,
      status,
      reason: reason.replace(/[^A-Za-z0-9]/g, '') || 'Unknown',
      message,
      lastTransitionTime: new Date(this.now()).toISOString(),
      ...(res.metadata.generation !== undefined ? { observedGeneration: res.metadata.generation } : {}),
    };
  }

  /** The status of a spec that cannot run: FailedValidation, every problem named, nothing submitted. */
  rejected(res: StowageResource, runName: string, problems: string[], reason: string): ResourceStatusBase {
    return {
      phase: 'FailedValidation',
      runName,
      validationErrors: problems,
      conditions: [this.condition('Accepted', 'False', reason, problems.join('; '), res)],
      observedGeneration: res.metadata.generation,
    };
  }

  /** Whether the resource was already judged invalid at its current generation (nothing to do until it changes). */
  static judgedInvalid(res: StowageResource): boolean {
    return res.status?.phase === 'FailedValidation' && res.status.observedGeneration === res.metadata.generation;
  }

  /** Writes status when it changed (conditions keep their transition time while their status holds); an Event per phase change. */
  async setStatus(kind: ResourceKind, res: StowageResource, next: ResourceStatusBase): Promise<void> {
    const prev: ResourceStatusBase = res.status ?? {};
    const conditions = (next.conditions ?? []).map((c) => {
      const old = prev.conditions?.find((o) => o.type === c.type);
      return old && old.status === c.status ? { ...c, lastTransitionTime: old.lastTransitionTime } : c;
    });
    const status = { ...next, conditions };
    const unchanged = Object.entries(status).every(([k, v]) => JSON.stringify((prev as Record<string, unknown>)[k]) === JSON.stringify(v));
    if (unchanged) return;
    await this.patch(`${objectPathOf(kind, res.metadata.namespace, res.metadata.name)}/status`, { status });
    res.status = status;
    if (prev.phase !== status.phase) {
      const warn = WARNING_PHASES.has(status.phase ?? '');
      const why = status.validationErrors?.join('; ') ?? status.failureReason;
      await this.event(kind, res, warn ? 'Warning' : 'Normal', status.phase ?? 'Unknown', `phase ${status.phase}${why ? `: ${why}` : ''}`);
    }
  }

  /** Adds the delete finalizer unless present (deleting the resource then deletes the run first). */
  async ensureFinalizer(kind: ResourceKind, res: StowageResource): Promise<void> {
    const finalizers = res.metadata.finalizers ?? [];
    if (finalizers.includes(DELETE_FINALIZER)) return;
    await this.patch(objectPathOf(kind, res.metadata.namespace, res.metadata.name), {
      metadata: { finalizers: [...finalizers, DELETE_FINALIZER] },
    });
    res.metadata.finalizers = [...finalizers, DELETE_FINALIZER];
  }

  /** Lets a resource being deleted go: its run is gone. */
  async releaseFinalizer(kind: ResourceKind, res: StowageResource): Promise<void> {
    const finalizers = res.metadata.finalizers ?? [];
    if (!finalizers.includes(DELETE_FINALIZER)) return;
    await this.patch(objectPathOf(kind, res.metadata.namespace, res.metadata.name), {
      metadata: { finalizers: finalizers.filter((f) => f !== DELETE_FINALIZER) },
    });
  }

  /** Deletes the resource itself (its run went by another door: REST, TTL); the finalizer is released first. */
  async remove(kind: ResourceKind, res: StowageResource): Promise<void> {
    await this.releaseFinalizer(kind, res);
    await this.deps.kube
      .requestJson({
        method: 'DELETE',
        path: objectPathOf(kind, res.metadata.namespace, res.metadata.name),
        description: `delete ${kind.singular} ${res.metadata.name}`,
      })
      .catch((err: unknown) => {
        if (!(isKubeError(err) && err.status === 404)) throw err;
      });
  }

  patch(path: string, body: unknown): Promise<unknown> {
    return this.deps.kube.requestJson({
      method: 'PATCH',
      path,
      body,
      contentType: 'application/merge-patch+json',
      description: `patch ${path}`,
    });
  }

  /** An Event about the resource; the same type and reason again bumps its count (event-recorder.ts). */
  async event(kind: ResourceKind, res: StowageResource, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const { name, uid, namespace } = res.metadata;
    const involved = { apiVersion: 'stowage.dev/v1', kind: kind.kind, name, uid, namespace };
    await this.events.record(namespace ?? this.deps.eventNamespace, involved, type, reason, message);
  }
}

/** Lists every resource of a kind (all namespaces). */
export async function listResources<S extends ResourceStatusBase>(
  kube: Pick<KubeClients, 'requestJson'>,
  kind: ResourceKind,
): Promise<Array<StowageResource<S>>> {
  const list = await kube.requestJson<{ items?: Array<StowageResource<S>> }>({
    path: `/apis/stowage.dev/v1/${kind.plural}`,
    description: `list ${kind.plural}`,
  });
  return list.items ?? [];
}

/**
 * One level-triggered pass: every resource of the kinds, each reconciled on its own. A resource's
 * failure is logged and the pass goes on; the next pass tries it again.
 */
export async function reconcileEach<S extends ResourceStatusBase>(
  deps: { kube: Pick<KubeClients, 'requestJson'>; logger: { warn(obj: object, msg?: string): void } },
  kinds: readonly ResourceKind[],
  reconcile: (kind: ResourceKind, item: StowageResource<S>) => Promise<void>,
): Promise<void> {
  for (const kind of kinds) {
    for (const item of await listResources<S>(deps.kube, kind)) {
      try {
        await reconcile(kind, item);
      } catch (err) {
        deps.logger.warn({ err, kind: kind.kind, name: item.metadata.name, namespace: item.metadata.namespace }, 'reconcile failed');
      }
    }
  }
}

/** What the Restore and Schedule controllers are given besides their own deps. */
export interface ControllerContext {
  kube: Pick<KubeClients, 'requestJson'>;
  writer: ResourceWriter;
  decide: (requester: Requester, attrs: AccessAttributes) => Promise<AccessDecision>;
  logger: { warn(obj: object, msg?: string): void };
}

/**
 * Whom a resource acts as: a namespaced one as `spec.serviceAccountName` of its namespace (default
 * `default`), a cluster-scoped one as Stowage. The spec comes back without serviceAccountName.
 */
export function resourceRequester(
  kind: ResourceKind,
  res: StowageResource<ResourceStatusBase>,
): { spec: Record<string, unknown>; namespace: string | undefined; requester: Requester } {
  const { serviceAccountName, ...spec } = (res.spec ?? {}) as Record<string, unknown>;
  const namespace = kind.namespaced ? res.metadata.namespace : undefined;
  const requester: Requester = namespace
    ? serviceAccountRequester(namespace, typeof serviceAccountName === 'string' ? serviceAccountName : DEFAULT_SERVICE_ACCOUNT)
    : { kind: 'stowage', via: 'cluster-resource' };
  return { spec, namespace, requester };
}
