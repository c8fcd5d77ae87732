/*
 * What a schedule must meet before it is created or changed, for both doors (`/v1/schedules` and
 * the Schedule/ClusterSchedule controller, docs/tenancy.md): core's validation (every problem with
 * its path), its template's fsBackupTimeout against the prune grace, a namespaced schedule's
 * template confined to its namespace, and its spec hooks' execs allowed to the requester. A refusal
 * is an ApiError (400 naming each field, 403 in kube-apiserver's words); the controller writes the
 * same into the resource's status. Creating and changing is then ScheduleControl's, for both.
 */
import {
  type AccessAttributes,
  confineBackupSpec,
  fsBackupTimeoutProblem,
  namespacedBackupProblems,
  podExecAttributes,
  type Requester,
  type ScheduleSpec,
  specHookNamespaces,
  specLimitProblems,
  type ValidationProblem,
  validateScheduleRequest,
} from '@stowage/core';
import type { AccessDecision } from '@stowage/kube';
import { forbidden } from './access.js';
import type { ScheduleRoutesDeps } from './api-deps.js';
import { invalidRequest } from './errors.js';

export type ScheduleRequestDeps = Pick<ScheduleRoutesDeps, 'specLimits' | 'pruneGraceMs'>;

export interface ScheduleAdmission {
  namespace?: string | undefined;
  requester?: Requester | undefined;
  decide: (attrs: AccessAttributes) => Promise<AccessDecision>;
}

/** `{name, spec}` validated as a new schedule (or a schedule's whole new spec); throws the 400 naming every problem. */
export function validateScheduleBody(deps: ScheduleRequestDeps, body: unknown): { name: string; value: ScheduleSpec } {
  const overLimits = specLimitProblems('schedule', body, deps.specLimits);
  if (overLimits.length > 0) throw invalidRequest('schedule', overLimits);
  const validation = validateScheduleRequest(body);
  if (!validation.ok) throw invalidRequest('schedule', validation.problems);
  return { name: validation.name, value: validation.value };
}

/**
 * The rules beyond the spec's own shape: the template's fsBackupTimeout is shorter than the prune
 * grace, a namespaced schedule's template stays in its namespace, and the requester may exec where
 * the template's spec hooks name (a 403 naming pods/exec).
 */
export async function admitSchedule(deps: ScheduleRequestDeps, spec: ScheduleSpec, admission: ScheduleAdmission): Promise<void> {
  const problems: ValidationProblem[] = [];
  const grace = deps.pruneGraceMs === undefined ? undefined : fsBackupTimeoutProblem(spec.template.fsBackupTimeoutMs, deps.pruneGraceMs);
  if (grace) problems.push({ ...grace, path: 'spec.template.fsBackupTimeout' });
  if (admission.namespace) problems.push(...namespacedBackupProblems(spec.template, admission.namespace, 'spec.template'));
  if (problems.length > 0) throw invalidRequest('schedule', problems);
  if (admission.requester?.kind !== 'user') return;
  const template = admission.namespace ? confineBackupSpec(spec.template, admission.namespace) : spec.template;
  for (const namespace of specHookNamespaces(template).named) {
    const attrs = podExecAttributes(namespace);
    const decision = await admission.decide(attrs);
    if (!decision.allowed) throw forbidden(admission.requester, attrs, decision);
  }
}
