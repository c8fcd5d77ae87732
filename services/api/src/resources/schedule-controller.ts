/*
 * The controller of Schedule (namespaced) and ClusterSchedule resources, level-triggered: each
 * resource is one schedule of ScheduleControl — the one `/v1/schedules` creates, changes and
 * deletes — named `<name>-<8 hex of its uid>` (per namespace: core's runKey). Its ticks are the
 * schedule's (BullMQ job schedulers), its backups appear as Backup/ClusterBackup resources (the
 * Backup controller makes one for every backup without one).
 *
 * - A changed spec (anything but serviceAccountName differs from the stored one) is validated as a
 *   whole and replaces it; the stored spec is what the ticks use.
 * - A namespaced Schedule acts as `spec.serviceAccountName` of its namespace (default `default`):
 *   its template is confined to the namespace (anything wider: FailedValidation naming the field),
 *   its spec hooks need that account's `create pods/exec`, its backups are that namespace's.
 * - Deleting the resource deletes the schedule (its backups stay, as in Velero).
 */
import { describeRequester, generateBackupName, type Requester, runKey, SCHEDULE_NAME_MAX_LENGTH } from '@stowage/core';
import type { ScheduleControl, ScheduleRecord, ScheduleStore } from '@stowage/pipeline';
import { ApiError, ApiErrorCode } from '../errors.js';
import { admitSchedule, type ScheduleRequestDeps, validateScheduleBody } from '../schedule-requests.js';
import { DELETE_FINALIZER, type ResourceKind, resourceKind, type ScheduleResourceStatus } from './kinds.js';
import {
  type ControllerContext,
  ResourceWriter,
  reconcileEach,
  resourceRequester,
  type StowageResource,
  uidSuffixOf,
} from './resource-writer.js';

type ScheduleResource = StowageResource<ScheduleResourceStatus>;

export interface ScheduleResourcesDeps {
  schedules: { control: ScheduleControl; store: ScheduleStore };
  requests: ScheduleRequestDeps;
}

/** JSON with object keys sorted: the API server need not keep a spec's key order. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b))) : v,
  );
}

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/** The schedule a resource stands for; short enough for its backups' names (`<schedule>-yyyyMMddHHmmss`). */
export function scheduleRunNameOf(res: ScheduleResource): string {
  const suffix = uidSuffixOf(res.metadata.uid);
  const name = runKey(res.metadata.namespace, generateBackupName(res.metadata.name, suffix));
  if (name.length <= SCHEDULE_NAME_MAX_LENGTH) return name;
  // runKey's hash keeps two long names apart; cut the readable part, keep the hash.
  const hash = name.slice(name.lastIndexOf('-') + 1);
  return `${name.slice(0, SCHEDULE_NAME_MAX_LENGTH - hash.length - 1).replace(/-+$/, '')}-${hash}`;
}

export class ScheduleController {
  private readonly kinds: ResourceKind[] = [resourceKind('schedule', true), resourceKind('schedule', false)];

  constructor(private readonly deps: ScheduleResourcesDeps & ControllerContext) {}

  async reconcileAll(): Promise<void> {
    await reconcileEach<ScheduleResourceStatus>(this.deps, this.kinds, (kind, item) => this.reconcile(kind, item));
  }

  async reconcile(kind: ResourceKind, res: ScheduleResource): Promise<void> {
    const { writer } = this.deps;
    const { control, store } = this.deps.schedules;
    const runName = scheduleRunNameOf(res);
    if (res.metadata.deletionTimestamp) {
      if (!(res.metadata.finalizers ?? []).includes(DELETE_FINALIZER)) return;
      const record = await store.get(runName);
      if (record && this.belongs(kind, res, record)) await control.remove(runName);
      await writer.releaseFinalizer(kind, res);
      await writer.event(kind, res, 'Normal', 'Deleted', `schedule ${runName} deleted (its backups stay)`);
      return;
    }
    await writer.ensureFinalizer(kind, res);

    const { spec, namespace, requester } = resourceRequester(kind, res);
    let record = await store.get(runName);
    if (record && !this.belongs(kind, res, record)) {
      const problem = `metadata.name: schedule ${runName} exists and is not this resource's`;
      await writer.setStatus(kind, res, writer.rejected(res, runName, [problem], 'Conflict'));
      return;
    }
    if (!record && res.status?.runName === runName && res.status.phase === 'Enabled') {
      // It ran and is gone (DELETE /v1/schedules/:name): the resource goes with it.
      await writer.remove(kind, res);
      return;
    }
    const changed = !record || canonical(record.spec) !== canonical(spec);
    if (changed) {
      if (ResourceWriter.judgedInvalid(res)) return;
      const admitted = await this.admit(runName, spec, namespace, requester);
      if ('problems' in admitted) {
        await writer.setStatus(kind, res, writer.rejected(res, runName, admitted.problems, admitted.reason));
        return;
      }
      if (!record) {
        const created = await control.create(runName, spec, admitted.value, { namespace, requester });
        record = created.created ? created.record : await store.get(runName);
        if (!record) return; // deleted meanwhile: the next pass sees
      } else {
        record = await control.update(record, spec, admitted.value);
      }
    }
    if (!record) return;
    const status = await control.status(record);
    const next: ScheduleResourceStatus = {
      phase: status.phase,
      runName,
      requestedBy: describeRequester(record.requester),
      ...(status.lastBackup ? { lastBackup: status.lastBackup.name, lastBackupTime: iso(status.lastBackup.startedAt) } : {}),
      ...(status.lastSuccessfulBackup ? { lastSuccessfulBackup: status.lastSuccessfulBackup.name } : {}),
      ...(status.nextRunAt !== undefined ? { nextRunTime: iso(status.nextRunAt) } : {}),
      paused: status.paused,
      skipped: status.skipped,
      ...(status.lastSkip ? { lastSkipReason: status.lastSkip.reason } : {}),
      ...(status.validationErrors.length > 0 ? { validationErrors: status.validationErrors.map((p) => `${p.path}: ${p.message}`) } : {}),
      conditions: [
        status.phase === 'Enabled'
          ? writer.condition('Accepted', 'True', 'Scheduled', `runs as schedule ${runName}`, res)
          : writer.condition(
              'Accepted',
              'False',
              'InvalidSpec',
              status.validationErrors.map((p) => `${p.path}: ${p.message}`).join('; '),
              res,
            ),
      ],
      observedGeneration: res.metadata.generation,
    };
    await writer.setStatus(kind, res, next);
  }

  private belongs(kind: ResourceKind, res: ScheduleResource, record: ScheduleRecord): boolean {
    return kind.namespaced ? record.namespace === res.metadata.namespace : record.namespace === undefined;
  }

  /** Validated and admitted as `/v1/schedules` would; else every problem, each naming its field. */
  private async admit(
    runName: string,
    spec: Record<string, unknown>,
    namespace: string | undefined,
    requester: Requester,
  ): Promise<{ value: Parameters<ScheduleControl['create']>[2] } | { problems: string[]; reason: string }> {
    try {
      const validated = validateScheduleBody(this.deps.requests, { name: runName, spec });
      await admitSchedule(this.deps.requests, validated.value, {
        namespace,
        requester,
        decide: (attrs) => this.deps.decide(requester, attrs),
      });
      return { value: validated.value };
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      if (err.code === ApiErrorCode.validation)
        return { problems: (err.problems ?? []).map((p) => `${p.path}: ${p.message}`), reason: 'InvalidSpec' };
      if (err.code === ApiErrorCode.forbidden) return { problems: [`spec.template.hooks: ${err.message}`], reason: 'Forbidden' };
      throw err;
    }
  }
}
