/*
 * Submitting and deleting a restore: one implementation for both doors, `POST /v1/restores` and
 * the Restore/ClusterRestore controller (docs/tenancy.md). Everything after "may the caller create
 * restores here" (which RBAC decided: the route asks, kubectl asked) is here: validation, a
 * namespaced restore confined to its namespace, the backup's existence, namespace and phase, the
 * requester's right to read it, and its right to write into every mapped namespace. A refusal is
 * an ApiError (400 naming each field, 403 in kube-apiserver's words, 404); the controller writes
 * the same into the resource's status.
 */
import {
  type AccessAttributes,
  confineRestoreSpec,
  generateBackupName,
  mappedRestoreAttributes,
  mappedTargetNamespaces,
  namespacedRestoreProblems,
  type Requester,
  type RestoreSpec,
  runKey,
  specLimitProblems,
  validateRestoreRequest,
} from '@stowage/core';
import type { AccessDecision } from '@stowage/kube';
import { restoreLayout, type SubmitRestoreResult } from '@stowage/pipeline';
import { QueueName, restoreJobIds } from '@stowage/queue';
import { backupLayout, readGzipJson } from '@stowage/storage';
import type { Queue } from 'bullmq';
import { findRunAs, forbidden } from './access.js';
import { TERMINAL_BACKUP_PHASES } from './api.schema.js';
import type { RestoreRoutesDeps } from './api-deps.js';
import { ApiError, ApiErrorCode, invalidRequest } from './errors.js';

/** Backups a restore may read (Velero: Completed or PartiallyFailed). */
const RESTORABLE_BACKUP_PHASES = new Set(['Completed', 'PartiallyFailed']);

export type RestoreRequestDeps = Pick<RestoreRoutesDeps, 'control' | 'backupPhase' | 'storage' | 'resourceOfKind' | 'specLimits'> & {
  randomSuffix: () => string;
};

export interface RestoreRequest {
  /** `{name?, spec}` as sent (untrusted). */
  body: unknown;
  /** A namespaced restore's namespace; absent: cluster-wide. */
  namespace?: string | undefined;
  requester?: Requester | undefined;
  /** What the requester may do (a SubjectAccessReview as it; Stowage's own requesters may do anything). */
  decide: (attrs: AccessAttributes) => Promise<AccessDecision>;
  requestId?: string | undefined;
  /** The run's name, fixed by the caller (the controller's uid-derived one); else the body's, or generated. */
  name?: string | undefined;
}

async function requireAllowed(request: RestoreRequest, attrs: AccessAttributes): Promise<void> {
  const decision = await request.decide(attrs);
  if (!decision.allowed) throw forbidden(request.requester, attrs, decision);
}

/**
 * A restore writes with the restorer's rights; into a namespace other than the items' own
 * (namespaceMapping) only when the requester itself may create there every kind the backup holds
 * for it (a SubjectAccessReview per kind and target; 403 naming the first refused).
 */
async function requireMappedTargets(deps: RestoreRequestDeps, request: RestoreRequest, spec: RestoreSpec): Promise<void> {
  if (request.requester?.kind !== 'user' || mappedTargetNamespaces(spec).length === 0) return;
  if (!deps.resourceOfKind)
    throw new ApiError(ApiErrorCode.forbidden, 'this API cannot check a namespaceMapping for a Kubernetes user (no discovery client)');
  const list = ((await readGzipJson(deps.storage, backupLayout(spec.backupName).resourceList)) ?? {}) as Record<string, string[]>;
  const { attributes, unknownKinds } = mappedRestoreAttributes(spec, list, await deps.resourceOfKind());
  if (unknownKinds.length > 0)
    throw new ApiError(
      ApiErrorCode.forbidden,
      `backup "${spec.backupName}" holds kinds the cluster does not serve (${unknownKinds.join(', ')}): whether you may create them in a mapped namespace cannot be asked; restore them without namespaceMapping`,
    );
  for (const attrs of attributes) await requireAllowed(request, attrs);
}

/** Validates, authorizes (as the requester) and submits a restore; throws the ApiError that says why not. */
export async function submitRestoreRequest(
  deps: RestoreRequestDeps,
  request: RestoreRequest,
): Promise<SubmitRestoreResult & { spec: RestoreSpec }> {
  const { namespace, body } = request;
  const overLimits = specLimitProblems('restore', body, deps.specLimits);
  if (overLimits.length > 0) throw invalidRequest('restore request', overLimits);
  const validation = validateRestoreRequest(body);
  if (!validation.ok) throw invalidRequest('restore request', validation.problems);
  // A namespaced restore holds its namespace's items only, never cluster-scoped ones.
  const outside = namespace ? namespacedRestoreProblems(validation.value, namespace) : [];
  if (outside.length > 0) throw invalidRequest('restore request', outside);
  const spec = namespace ? confineRestoreSpec(validation.value, namespace) : validation.value;
  // Restoring reads the backup: the requester must be allowed to read it where it lives, asked
  // before it is looked up (a 404 must not tell what exists where the requester may not look).
  const noBackup = () => new ApiError(ApiErrorCode.notFound, `backup "${spec.backupName}" does not exist`);
  const backup = await findRunAs(
    request.decide,
    request.requester,
    'backups',
    'get',
    spec.backupName,
    () => deps.backupPhase(spec.backupName),
    noBackup,
  );
  if (backup === undefined) throw noBackup();
  if (namespace && backup.namespace !== namespace) {
    const message = `backup "${spec.backupName}" is ${backup.namespace ? `namespace "${backup.namespace}"'s` : 'a cluster-wide backup'}; a Restore in namespace "${namespace}" restores only its own namespace's backups (a ClusterRestore restores any)`;
    throw new ApiError(ApiErrorCode.validation, message, [{ path: 'spec.backupName', message }]);
  }
  if (!RESTORABLE_BACKUP_PHASES.has(backup.phase)) {
    const message = `backup "${spec.backupName}" is ${backup.phase}; only a Completed or PartiallyFailed backup can be restored`;
    throw new ApiError(ApiErrorCode.validation, message, [{ path: 'spec.backupName', message }]);
  }
  await requireMappedTargets(deps, request, spec);
  const name = request.name ?? runKey(namespace, validation.name ?? generateBackupName(spec.backupName, deps.randomSuffix()));
  const result = await deps.control.submit({
    name,
    spec,
    ...(request.requestId ? { requestId: request.requestId } : {}),
    ...(namespace ? { namespace } : {}),
    ...(request.requester ? { requester: request.requester } : {}),
  });
  return { ...result, spec };
}

export type DeleteRestoreOutcome = 'deleted' | 'running';

/**
 * Deletes an ended restore: its results in storage (first: restore sync would bring back a
 * catalogue entry whose restore.json remained), its jobs, its record. A running one is left
 * alone (`running`: cancel it first). Restored objects stay.
 */
export async function deleteEndedRestore(
  deps: {
    storage: Pick<RestoreRoutesDeps['storage'], 'deletePrefix'>;
    queues: readonly Queue[];
    restores: Pick<RestoreRoutesDeps['restores'], 'deleteRestore'>;
  },
  rec: { name: string; phase: string },
): Promise<DeleteRestoreOutcome> {
  if (!TERMINAL_BACKUP_PHASES.has(rec.phase)) return 'running';
  await deps.storage.deletePrefix(restoreLayout(rec.name).dir);
  const queue = deps.queues.find((q) => q.name === QueueName.restores);
  if (queue) await queue.remove(restoreJobIds.finalize(rec.name), { removeChildren: true });
  await deps.restores.deleteRestore(rec.name);
  return 'deleted';
}
