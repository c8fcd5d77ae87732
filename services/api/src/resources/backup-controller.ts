/*
 * The controller of Backup (namespaced) and ClusterBackup resources: level-triggered, it compares
 * each resource with the pipeline's state on every pass and does what is missing, through the same
 * submit and delete as REST (BackupControl). The run's name is derived from the resource's name
 * and uid, so a restart or a second replica finds the run it submitted instead of submitting
 * again (submit is idempotent by name). One replica at a time runs it (a Lease, lease.ts).
 *
 * - A bad spec, or one a namespaced Backup may not have, ends in phase FailedValidation with an
 *   `Accepted=False` condition naming every bad field; nothing is submitted.
 * - A namespaced Backup acts as its `spec.serviceAccountName` (default `default`) of its namespace:
 *   its spec hooks need that account's `create pods/exec` (asked before submitting, and at each exec).
 * - status mirrors the REST view; an Event records each phase change.
 * - The finalizer `stowage.dev/delete` makes `kubectl delete` delete the backup's data first.
 * - Two doors, one list: a backup with no resource (submitted by REST, a schedule's tick, found in
 *   storage) gets one — a ClusterBackup, or a Backup in its namespace — annotated `stowage.dev/run`
 *   with its name; a resource whose run was deleted by another door (REST, TTL) goes with it.
 */
import {
  type BackupSpec,
  confineBackupSpec,
  DEFAULT_SERVICE_ACCOUNT,
  describeRefusal,
  describeRequester,
  generateBackupName,
  namespacedBackupProblems,
  podExecAttributes,
  type Requester,
  runKey,
  serviceAccountRequester,
  specForDisplay,
  specHookNamespaces,
  validateBackupRequest,
} from '@stowage/core';
import { type AccessReviewer, isKubeError, type KubeClients } from '@stowage/kube';
import type { BackupRecord } from '@stowage/pipeline';
import type { BackupControl } from '../api-deps.js';
import type { BackupReads } from '../backup-view.js';
import {
  type BackupResourceStatus,
  collectionPathOf,
  DELETE_FINALIZER,
  type ResourceKind,
  RUN_ANNOTATION,
  resourceKind,
  STOWAGE_API_VERSION,
} from './kinds.js';
import { ResourceWriter, reconcileEach, type StowageResource, TERMINAL_PHASES, uidSuffixOf } from './resource-writer.js';

type BackupResource = StowageResource<BackupResourceStatus>;

export interface BackupControllerDeps {
  kube: Pick<KubeClients, 'requestJson'>;
  control: BackupControl;
  reads: BackupReads;
  /** Asks what a namespaced Backup's service account may do (its spec hooks' execs). */
  access: Pick<AccessReviewer, 'review'>;
  logger: { warn(obj: object, msg?: string): void; info(obj: object, msg?: string): void };
  /** The namespace cluster-scoped resources' Events go to. */
  eventNamespace: string;
  now?: () => number;
  writer?: ResourceWriter;
}

/** The run a resource stands for: the run it was made for (`stowage.dev/run`), else `<name>-<8 hex of its uid>` (per namespace: core's runKey). */
export function runNameOf(resource: BackupResource): string {
  const adopted = resource.metadata.annotations?.[RUN_ANNOTATION];
  if (adopted) return adopted;
  return runKey(resource.metadata.namespace, generateBackupName(resource.metadata.name, uidSuffixOf(resource.metadata.uid)));
}

const PAGE = 500;

export class BackupController {
  private readonly kinds: ResourceKind[] = [resourceKind('backup', true), resourceKind('backup', false)];
  private readonly writer: ResourceWriter;
  /** Runs whose resource could not be made (logged once each, tried again every pass). */
  private readonly unmirrorable = new Set<string>();

  constructor(private readonly deps: BackupControllerDeps) {
    this.writer = deps.writer ?? new ResourceWriter(deps);
  }

  /** One pass over every Backup and ClusterBackup, then a resource for every backup without one; a resource's failure is logged and the pass goes on. */
  async reconcileAll(): Promise<void> {
    const claimed = new Set<string>();
    await reconcileEach<BackupResourceStatus>(this.deps, this.kinds, async (kind, item) => {
      claimed.add(runNameOf(item));
      await this.reconcile(kind, item);
    });
    await this.mirrorRuns(claimed);
  }

  async reconcile(kind: ResourceKind, res: BackupResource): Promise<void> {
    const { writer } = this;
    const runName = runNameOf(res);
    const adopted = res.metadata.annotations?.[RUN_ANNOTATION] !== undefined;
    if (res.metadata.deletionTimestamp) {
      if (!(res.metadata.finalizers ?? []).includes(DELETE_FINALIZER)) return;
      const own = await this.ownRecord(kind, res, runName);
      if (own) {
        const outcome = (await this.deps.control.delete(runName)).outcome;
        if (outcome === 'deleting') return; // a running backup is being canceled first: next pass
      }
      await writer.releaseFinalizer(kind, res);
      await writer.event(kind, res, 'Normal', 'Deleted', `backup ${runName} deleted (data and snapshots)`);
      return;
    }
    await writer.ensureFinalizer(kind, res);

    let record = await this.deps.reads.record(runName);
    if (record && adopted && !this.belongs(kind, res, record)) {
      const problem = `metadata.annotations[${RUN_ANNOTATION}]: backup ${runName} is ${record.namespace ? `namespace "${record.namespace}"'s` : 'a cluster-wide backup'}, not this resource's`;
      await writer.setStatus(kind, res, writer.rejected(res, runName, [problem], 'Forbidden'));
      return;
    }
    if (!record) {
      const ran = res.status?.runName === runName && res.status.phase !== undefined && res.status.phase !== 'FailedValidation';
      if (ran || adopted) {
        // Its run was deleted by another door (REST, its TTL): the resource goes with it.
        await writer.remove(kind, res);
        this.deps.logger.info(
          { kind: kind.kind, name: res.metadata.name, namespace: res.metadata.namespace, run: runName },
          'run gone: resource removed',
        );
        return;
      }
      if (ResourceWriter.judgedInvalid(res)) return;
      const judged = await this.judge(kind, res);
      if ('problems' in judged) {
        await writer.setStatus(kind, res, writer.rejected(res, runName, judged.problems, judged.reason));
        return;
      }
      const submitted = await this.deps.control.submit({
        name: runName,
        spec: judged.spec,
        ...(res.metadata.namespace ? { namespace: res.metadata.namespace } : {}),
        requester: judged.requester,
      });
      record = submitted.backup;
    }
    await writer.setStatus(kind, res, await this.statusOf(res, runName, record));
  }

  /** The status of a resource from its run's REST view. */
  private async statusOf(res: BackupResource, runName: string, record: BackupRecord): Promise<BackupResourceStatus> {
    const { writer } = this;
    const view = await this.deps.reads.view(record);
    const total = view.progress.totalItems;
    const done = view.progress.itemsBackedUp;
    return {
      phase: view.phase,
      runName,
      requestedBy: describeRequester(record.requester),
      progress: { totalItems: total, itemsBackedUp: done, summary: `${done}/${total}` },
      hookStatus: view.hookStatus,
      podVolumeBackups: {
        total: view.podVolumeBackups.total,
        completed: view.podVolumeBackups.Completed,
        failed: view.podVolumeBackups.Failed,
      },
      errors: view.errors,
      warnings: view.warnings,
      ...(view.failureReason ? { failureReason: view.failureReason } : {}),
      ...(view.startedAt ? { startTimestamp: view.startedAt } : {}),
      ...(view.completedAt ? { completionTimestamp: view.completedAt } : {}),
      ...(view.expiration ? { expiration: view.expiration } : {}),
      storageLocation: (record.spec as BackupSpec).storageLocation,
      archive: `backups/${runName}/`,
      conditions: [
        writer.condition('Accepted', 'True', 'Submitted', `submitted as backup ${runName}`, res),
        TERMINAL_PHASES.has(view.phase)
          ? writer.condition('Finished', 'True', view.phase, view.failureReason ?? `the backup ended ${view.phase}`, res)
          : writer.condition('Finished', 'False', view.phase, `the backup is ${view.phase}`, res),
      ],
      observedGeneration: res.metadata.generation,
    };
  }

  /** Whether a run may be this resource's: a namespaced resource's runs are its namespace's, a cluster one's cluster-wide. */
  private belongs(kind: ResourceKind, res: BackupResource, record: BackupRecord): boolean {
    return kind.namespaced ? record.namespace === res.metadata.namespace : record.namespace === undefined;
  }

  /** The run, when it exists and is this resource's to delete. */
  private async ownRecord(kind: ResourceKind, res: BackupResource, runName: string): Promise<BackupRecord | undefined> {
    const record = await this.deps.reads.record(runName);
    return record && this.belongs(kind, res, record) ? record : undefined;
  }

  /**
   * A resource for every backup that has none (REST, schedules, backup sync): named as the run,
   * in the run's namespace (a ClusterBackup for a cluster-wide one), `stowage.dev/run` naming it.
   */
  private async mirrorRuns(claimed: ReadonlySet<string>): Promise<void> {
    let cursor: string | undefined;
    do {
      const page = await this.deps.reads.state.listBackups({ limit: PAGE, ...(cursor ? { cursor } : {}) });
      for (const record of page.items) {
        if (claimed.has(record.name)) continue;
        try {
          await this.mirror(record);
          this.unmirrorable.delete(record.name);
        } catch (err) {
          if (!this.unmirrorable.has(record.name)) {
            this.unmirrorable.add(record.name);
            this.deps.logger.warn({ err, backup: record.name }, 'cannot make a resource for this backup; trying again every pass');
          }
        }
      }
      cursor = page.nextCursor;
    } while (cursor);
  }

  private async mirror(record: BackupRecord): Promise<void> {
    const kind = resourceKind('backup', record.namespace !== undefined);
    const body = {
      apiVersion: STOWAGE_API_VERSION,
      kind: kind.kind,
      metadata: {
        name: record.name,
        ...(record.namespace ? { namespace: record.namespace } : {}),
        ...(record.labels ? { labels: record.labels } : {}),
        annotations: { [RUN_ANNOTATION]: record.name },
        finalizers: [DELETE_FINALIZER],
      },
      spec: specForDisplay(record.spec),
    };
    let created: BackupResource;
    try {
      created = await this.deps.kube.requestJson<BackupResource>({
        method: 'POST',
        path: collectionPathOf(kind, record.namespace),
        body,
        description: `create ${kind.singular} ${record.name}`,
      });
    } catch (err) {
      // Made meanwhile (another replica, a pass racing this one): the next pass reconciles it.
      if (isKubeError(err) && err.status === 409) return;
      throw err;
    }
    await this.writer.setStatus(kind, created, await this.statusOf(created, record.name, record));
  }

  /** The spec to submit and its requester, or every problem (each naming its field). */
  private async judge(
    kind: ResourceKind,
    res: BackupResource,
  ): Promise<{ spec: BackupSpec; requester: Requester } | { problems: string[]; reason: string }> {
    const { serviceAccountName, ...spec } = (res.spec ?? {}) as Record<string, unknown>;
    const namespace = kind.namespaced ? res.metadata.namespace : undefined;
    const validation = validateBackupRequest({ spec });
    const problems = validation.ok ? (namespace ? namespacedBackupProblems(validation.value, namespace) : []) : validation.problems;
    if (!validation.ok || problems.length > 0) return { problems: problems.map((p) => `${p.path}: ${p.message}`), reason: 'InvalidSpec' };
    if (!namespace) return { spec: validation.value, requester: { kind: 'stowage', via: 'cluster-resource' } };
    const requester = serviceAccountRequester(
      namespace,
      typeof serviceAccountName === 'string' ? serviceAccountName : DEFAULT_SERVICE_ACCOUNT,
    );
    const confined = confineBackupSpec(validation.value, namespace);
    if (requester.kind === 'user') {
      for (const ns of specHookNamespaces(confined).named) {
        const attrs = podExecAttributes(ns);
        const decision = await this.deps.access.review(requester, attrs);
        if (!decision.allowed) return { problems: [`spec.hooks: ${describeRefusal(requester, attrs)}`], reason: 'Forbidden' };
      }
    }
    return { spec: confined, requester };
  }
}
