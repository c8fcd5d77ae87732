/*
 * The controller of Restore (namespaced) and ClusterRestore resources, level-triggered like the
 * Backup controller: each resource is submitted through the same code as `POST /v1/restores`
 * (restore-requests.ts), named `<name>-<8 hex of its uid>` (per namespace: core's runKey) so a
 * restart or a second replica finds the run instead of submitting again.
 *
 * - `spec.backupName` names a Backup resource of the same namespace (a ClusterBackup for a
 *   ClusterRestore) or, failing that, a run by its REST name.
 * - A namespaced Restore acts as `spec.serviceAccountName` of its namespace (default `default`):
 *   it must be allowed to read the backup, and to create every restored kind in each mapped namespace.
 * - Whatever `POST /v1/restores` refuses (a bad field, a backup of another namespace, a mapped
 *   namespace the account may not write in) ends in FailedValidation with an `Accepted=False`
 *   condition naming it; nothing is submitted.
 * - The finalizer: deleting the resource cancels a running restore, then deletes its record and
 *   results as `DELETE /v1/restores/:name` does (restored objects stay).
 */
import { describeRequester, generateBackupName, runKey } from '@stowage/core';
import { isKubeError } from '@stowage/kube';
import type { RestoreRecord, RestoreState } from '@stowage/pipeline';
import type { Queue } from 'bullmq';
import type { RestoreControl } from '../api-deps.js';
import { ApiError, ApiErrorCode } from '../errors.js';
import { deleteEndedRestore, type RestoreRequestDeps, submitRestoreRequest } from '../restore-requests.js';
import type { RestoreReads } from '../restore-view.js';
import { DELETE_FINALIZER, objectPathOf, type ResourceKind, type RestoreResourceStatus, resourceKind } from './kinds.js';
import {
  type ControllerContext,
  reconcileEach,
  resourceRequester,
  type StowageResource,
  TERMINAL_PHASES,
  uidSuffixOf,
} from './resource-writer.js';

type RestoreResource = StowageResource<RestoreResourceStatus>;

export interface RestoreResourcesDeps {
  /** What `POST /v1/restores` submits with (its control, the backup's phase, storage, discovery). */
  requests: Omit<RestoreRequestDeps, 'randomSuffix'>;
  reads: RestoreReads;
  restores: RestoreState;
  control: RestoreControl;
  queues: readonly Queue[];
  storage: RestoreRequestDeps['storage'];
}

/** The run a Restore resource stands for. */
export function restoreRunNameOf(res: RestoreResource): string {
  return runKey(res.metadata.namespace, generateBackupName(res.metadata.name, uidSuffixOf(res.metadata.uid)));
}

export class RestoreController {
  private readonly kinds: ResourceKind[] = [resourceKind('restore', true), resourceKind('restore', false)];

  constructor(private readonly deps: RestoreResourcesDeps & ControllerContext) {}

  async reconcileAll(): Promise<void> {
    await reconcileEach<RestoreResourceStatus>(this.deps, this.kinds, (kind, item) => this.reconcile(kind, item));
  }

  async reconcile(kind: ResourceKind, res: RestoreResource): Promise<void> {
    const { writer } = this.deps;
    const runName = restoreRunNameOf(res);
    if (res.metadata.deletionTimestamp) {
      if (!(res.metadata.finalizers ?? []).includes(DELETE_FINALIZER)) return;
      const found = await this.deps.reads.find(runName);
      if (found) {
        if ((await deleteEndedRestore(this.deps, found.rec)) === 'running') {
          await this.deps.control.cancel(runName); // it ends Canceled; the next pass deletes it
          return;
        }
      }
      await writer.releaseFinalizer(kind, res);
      await writer.event(kind, res, 'Normal', 'Deleted', `restore ${runName} deleted (its record and results; restored objects stay)`);
      return;
    }
    await writer.ensureFinalizer(kind, res);

    let found = await this.deps.reads.find(runName);
    if (!found) {
      if (res.status?.runName === runName && res.status.phase && res.status.phase !== 'FailedValidation') {
        // It ran and is gone (DELETE /v1/restores/:name): the resource goes with it.
        await writer.remove(kind, res);
        return;
      }
      if (res.status?.phase === 'FailedValidation' && res.status.observedGeneration === res.metadata.generation) return;
      const submitted = await this.submit(kind, res, runName);
      if ('problems' in submitted) {
        await writer.setStatus(kind, res, writer.rejected(res, runName, submitted.problems, submitted.reason));
        return;
      }
      found = { rec: submitted.restore };
    }
    const view = await this.deps.reads.view(found);
    const rec: RestoreRecord = found.rec;
    const total = view.progress.totalItems;
    const done = view.progress.itemsRestored;
    const status: RestoreResourceStatus = {
      phase: view.phase,
      runName,
      backupRunName: rec.backupName,
      requestedBy: describeRequester(rec.requester),
      progress: { totalItems: total, itemsRestored: done, summary: `${done}/${total}` },
      podVolumeRestores: {
        total: view.podVolumeRestores.total,
        completed: view.podVolumeRestores.Completed,
        failed: view.podVolumeRestores.Failed,
      },
      errors: view.errors,
      warnings: view.warnings,
      ...(view.failureReason ? { failureReason: view.failureReason } : {}),
      ...(view.startedAt ? { startTimestamp: view.startedAt } : {}),
      ...(view.completedAt ? { completionTimestamp: view.completedAt } : {}),
      conditions: [
        writer.condition('Accepted', 'True', 'Submitted', `submitted as restore ${runName}`, res),
        TERMINAL_PHASES.has(view.phase)
          ? writer.condition('Finished', 'True', view.phase, view.failureReason ?? `the restore ended ${view.phase}`, res)
          : writer.condition('Finished', 'False', view.phase, `the restore is ${view.phase}`, res),
      ],
      observedGeneration: res.metadata.generation,
    };
    await writer.setStatus(kind, res, status);
  }

  /** Submits through POST /v1/restores' code; a refusal comes back as every problem, each naming its field. */
  private async submit(
    kind: ResourceKind,
    res: RestoreResource,
    runName: string,
  ): Promise<{ restore: RestoreRecord } | { problems: string[]; reason: string }> {
    const { spec, namespace, requester } = resourceRequester(kind, res);
    const backupName = typeof spec.backupName === 'string' ? await this.backupRunName(kind, namespace, spec.backupName) : spec.backupName;
    try {
      const result = await submitRestoreRequest(
        { ...this.deps.requests, randomSuffix: () => uidSuffixOf(res.metadata.uid) },
        {
          body: { spec: { ...spec, backupName } },
          namespace,
          requester,
          name: runName,
          requestId: `resource-${res.metadata.uid}`,
          decide: (attrs) => this.deps.decide(requester, attrs),
        },
      );
      return { restore: result.restore };
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      switch (err.code) {
        case ApiErrorCode.validation:
          return { problems: (err.problems ?? []).map((p) => `${p.path}: ${p.message}`), reason: 'InvalidSpec' };
        case ApiErrorCode.notFound:
          return { problems: [`spec.backupName: ${err.message}`], reason: 'BackupNotFound' };
        case ApiErrorCode.forbidden:
          return { problems: [err.message], reason: 'Forbidden' };
        default:
          throw err;
      }
    }
  }

  /** A Backup resource's run (a ClusterBackup's for a ClusterRestore) by the resource's name; else the name as given. */
  private async backupRunName(kind: ResourceKind, namespace: string | undefined, name: string): Promise<string> {
    const backupKind = resourceKind('backup', kind.namespaced);
    try {
      const backup = await this.deps.kube.requestJson<StowageResource>({
        path: objectPathOf(backupKind, namespace, name),
        description: `read ${backupKind.singular} ${name}`,
      });
      return backup.status?.runName ?? name;
    } catch (err) {
      if (isKubeError(err) && err.status === 404) return name;
      throw err;
    }
  }
}
