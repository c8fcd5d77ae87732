import { groupResourceOf } from '@stowage/core';
import { isKubeError, KubeErrorCodes } from '@stowage/kube';

/** A problem the plan raises outside a block (discovery, grouping, pulled-in items); `onceKey` dedups it. */
export interface ClusterPlanProblem {
  level: 'warn';
  onceKey: string;
  msg: string;
  /**
   * The group-resource (`deployments.apps`) the API server refused to let the plan read (403):
   * its items are not in the backup, which therefore cannot end Completed (PartiallyFailed).
   */
  forbidden?: string;
}

/**
 * What a 403 on reading a type becomes: a warning naming the type and the permission missing,
 * with the API server's own message (which names the identity), never a failed plan.
 */
export function forbiddenReadProblem(resource: { group: string; resource: string }, verb: string, err: Error): ClusterPlanProblem {
  const gr = groupResourceOf(resource);
  const group = resource.group === '' ? '"" (core)' : `"${resource.group}"`;
  return {
    level: 'warn',
    onceKey: `forbidden:${gr}`,
    forbidden: gr,
    msg: `${gr} not backed up: Stowage may not ${verb} it (missing RBAC permission: verb "${verb}" on resource "${resource.resource}" in API group ${group}; see docs/deploy.md#what-runs-and-with-which-rights): ${err.message}`,
  };
}

/** True for the API server's 403 (RBAC said no). */
export function isForbidden(err: unknown): err is Error {
  return isKubeError(err, KubeErrorCodes.forbidden);
}
