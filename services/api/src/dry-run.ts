/*
 * POST /v1/backups?dryRun=true after validation: pipeline's planDryRun (the real plan step into a
 * collecting sink) plus what only the API knows (a taken name). Reads Redis (the backup record,
 * the node-agent registry) and the cluster; writes nothing.
 */
import type { BackupSpec, DryRunPlan } from '@stowage/core';
import type { ApiDeps } from './api-deps.js';
import { ApiError, ApiErrorCode } from './errors.js';

/** What the API needs to plan without running: pipeline's planDryRun with its deps bound. */
export type DryRunPlanner = (request: { name: string; spec: BackupSpec }) => Promise<DryRunPlan>;

export async function runDryRun(deps: Pick<ApiDeps, 'dryRun' | 'state'>, request: { name: string; spec: BackupSpec }): Promise<DryRunPlan> {
  if (!deps.dryRun) throw new ApiError(ApiErrorCode.unavailable, 'this API process has no Kubernetes client; dry runs are not available');
  let plan: DryRunPlan;
  try {
    plan = await deps.dryRun(request);
  } catch (err) {
    throw new ApiError(ApiErrorCode.unavailable, `the dry run could not read the cluster: ${(err as Error).message}`, undefined, {
      cause: err,
    });
  }
  const taken = await deps.state.getBackup(request.name);
  if (taken) plan.warnings.unshift(`a backup named "${request.name}" already exists: submitting this request would be answered 409`);
  return plan;
}
