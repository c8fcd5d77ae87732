/*
 * One authorization model for both doors (REST and the stowage.dev resources): every REST call is
 * checked as the RBAC verb on the `stowage.dev` resource it stands for — `create backups` in
 * namespace X for a namespaced backup, `create clusterbackups` for a cluster-wide one, `get
 * restores`, `delete clusterbackups` … — asked of the API server (SubjectAccessReview) as the
 * caller, so a RoleBinding decides the same for `kubectl` and for REST. Stowage's own requesters (a
 * static token, the API without auth) are cluster-admin equivalents and are not asked about.
 */
import {
  type AccessAttributes,
  type BackupSpec,
  describeRefusal,
  explainDns1123Label,
  podExecAttributes,
  type Requester,
  runKeyScopes,
  specHookNamespaces,
} from '@stowage/core';
import type { AccessDecision, AccessReviewer } from '@stowage/kube';
import type { FastifyRequest } from 'fastify';
import { ApiError, ApiErrorCode, type ApiProblem } from './errors.js';

/** The API group of Stowage's resources (the CRDs of k8s/base). */
export const STOWAGE_GROUP = 'stowage.dev';

/** The kinds of run the REST API serves; a namespaced one is `<kind>`, a cluster-wide one `cluster<kind>`. */
export type RunResource = 'backups' | 'restores' | 'schedules';

/** The RBAC attributes of `verb` on a backup, restore or schedule: namespaced when `namespace` is given. */
export function runAttributes(resource: RunResource, verb: string, namespace?: string | undefined, name?: string): AccessAttributes {
  return namespace
    ? { verb, group: STOWAGE_GROUP, resource, namespace, ...(name !== undefined ? { name } : {}) }
    : { verb, group: STOWAGE_GROUP, resource: `cluster${resource}`, ...(name !== undefined ? { name } : {}) };
}

/** Asks the API server what a requester may do; Stowage's own rights are not asked about. */
export class Access {
  constructor(private readonly reviewer: AccessReviewer | undefined) {}

  /** The decision for `requester`; a user without a reviewer (cannot happen when wired) is refused. */
  async decide(requester: Requester | undefined, attrs: AccessAttributes): Promise<AccessDecision> {
    if (requester === undefined) return { allowed: false, reason: 'no authenticated requester' };
    if (requester.kind === 'stowage') return { allowed: true };
    if (!this.reviewer) return { allowed: false, reason: 'Kubernetes tokens are not accepted by this API (STOWAGE_KUBE_AUTH)' };
    try {
      return await this.reviewer.review(requester, attrs);
    } catch (err) {
      throw new ApiError(
        ApiErrorCode.unavailable,
        'the Kubernetes API server did not answer a SubjectAccessReview; retry later',
        undefined,
        {
          cause: err,
        },
      );
    }
  }

  /** Throws 403 naming what the caller may not do (kube-apiserver's wording) unless it may. */
  async require(req: FastifyRequest, attrs: AccessAttributes): Promise<void> {
    const decision = await this.decide(req.requester, attrs);
    if (!decision.allowed) throw forbidden(req.requester, attrs, decision);
  }

  /** A run addressed by its name in the API, the caller authorized before it is read: see `findRunAs`. */
  findRun<T extends { namespace?: string | undefined }>(
    req: FastifyRequest,
    resource: RunResource,
    verb: string,
    name: string,
    read: () => Promise<T | undefined>,
    hidden: () => Error,
  ): Promise<T | undefined> {
    return findRunAs((attrs) => this.decide(req.requester, attrs), req.requester, resource, verb, name, read, hidden);
  }

  /**
   * A spec hook execs with Stowage's rights, so its requester must hold them itself: `create
   * pods/exec` in every namespace the spec's hooks name, asked before the backup exists (403 naming
   * pods/exec). Namespaces only the plan finds are checked at each exec (the pipeline's hook runner).
   */
  async requireSpecHookExec(req: FastifyRequest, spec: BackupSpec): Promise<void> {
    if (req.requester?.kind !== 'user') return;
    for (const namespace of specHookNamespaces(spec).named) await this.require(req, podExecAttributes(namespace));
  }

  /**
   * Whether the caller may `verb` the runs of one namespace (undefined: the cluster-wide ones),
   * one review per namespace for the whole request: what a list shows.
   */
  visibility(req: FastifyRequest, resource: RunResource, verb = 'list'): (namespace: string | undefined) => Promise<boolean> {
    const seen = new Map<string, Promise<boolean>>();
    return (namespace) => {
      const key = namespace ?? '';
      let p = seen.get(key);
      if (!p) {
        p = this.decide(req.requester, runAttributes(resource, verb, namespace)).then((d) => d.allowed);
        seen.set(key, p);
      }
      return p;
    };
  }
}

/**
 * A run addressed by its name in the API, its requester authorized before the run is read, so
 * that no answer tells whether a name exists where the requester may not look (a 404 there would).
 * First `verb` on one of the scopes the name stands for (core's runKeyScopes: `backups` in the
 * namespace a `<ns>-<name>-<hash>` name carries, else `clusterbackups`…), or 403 naming the first
 * scope. Then `read`: a run found in another scope than the one allowed (a cluster-scoped run
 * named like a namespaced one, a cut key) needs `verb` there too, and is `hidden()` (thrown: the
 * caller's 404) when that is refused. Undefined: there is no such run.
 */
export async function findRunAs<T extends { namespace?: string | undefined }>(
  decide: (attrs: AccessAttributes) => Promise<AccessDecision>,
  requester: Requester | undefined,
  resource: RunResource,
  verb: string,
  name: string,
  read: () => Promise<T | undefined>,
  hidden: () => Error,
): Promise<T | undefined> {
  if (requester?.kind === 'stowage') return await read();
  let allowed: { scope: string | undefined } | undefined;
  let refused: { attrs: AccessAttributes; decision: AccessDecision } | undefined;
  for (const scope of runKeyScopes(name)) {
    const attrs = runAttributes(resource, verb, scope);
    const decision = await decide(attrs);
    if (decision.allowed) {
      allowed = { scope };
      break;
    }
    refused ??= { attrs, decision };
  }
  if (!allowed) {
    const first = refused ?? { attrs: runAttributes(resource, verb), decision: { allowed: false } };
    throw forbidden(requester, first.attrs, first.decision);
  }
  const found = await read();
  if (!found || (found.namespace || undefined) === allowed.scope) return found;
  const there = await decide(runAttributes(resource, verb, found.namespace || undefined));
  if (!there.allowed) throw hidden();
  return found;
}

/** A 403 in kube-apiserver's words: `User "alice" cannot create resource "backups" in API group "stowage.dev" in the namespace "b"`. */
export function forbidden(requester: Requester | undefined, attrs: AccessAttributes, decision?: AccessDecision): ApiError {
  const reason = decision?.reason ? `: ${decision.reason}` : '';
  return new ApiError(ApiErrorCode.forbidden, `${describeRefusal(requester, attrs)}${reason}`);
}

/** Keeps the items whose namespace (undefined: cluster-wide) `visible` allows, in order. */
export async function visibleOnly<T>(
  items: readonly T[],
  namespaceOf: (item: T) => string | undefined,
  visible: (namespace: string | undefined) => Promise<boolean>,
): Promise<T[]> {
  const keep = await Promise.all(items.map((item) => visible(namespaceOf(item))));
  return items.filter((_, i) => keep[i]);
}

/**
 * A request body's `namespace` (a namespaced run) taken out of it, so core validates `{name, spec, …}`
 * as before: a DNS-1123 label, or a problem naming the field.
 */
export function takeNamespace(body: unknown): { namespace: string | undefined; rest: unknown; problems: ApiProblem[] } {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !('namespace' in body))
    return { namespace: undefined, rest: body, problems: [] };
  const { namespace, ...rest } = body as Record<string, unknown>;
  if (namespace === undefined) return { namespace: undefined, rest, problems: [] };
  if (typeof namespace !== 'string') return { namespace: undefined, rest, problems: [{ path: 'namespace', message: 'must be a string' }] };
  const why = explainDns1123Label(namespace);
  if (why.length > 0)
    return { namespace: undefined, rest, problems: [{ path: 'namespace', message: `is not a namespace name: ${why.join('; ')}` }] };
  return { namespace, rest, problems: [] };
}
