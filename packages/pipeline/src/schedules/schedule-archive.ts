import type { Requester } from '@stowage/core';
import { assertPathSegment, type BackupStorage } from '@stowage/storage';

/*
 * Schedules in backup storage, beside the backups they make: `schedules/<name>/schedule.json`,
 * written whenever a schedule is created or changed and removed when it is deleted. Redis holds
 * the schedules Stowage runs; storage holds what a fresh install needs to bring them back (backup
 * sync, services/api/src/schedule-sync.ts). Only the spec and its times are kept: what the ticks
 * did is read again from the backups (their `stowage.dev/schedule-name` label).
 */

export const SCHEDULES_ROOT = 'schedules/';

/** Version of `schedule.json`; a reader refuses a version it does not know. */
export const SCHEDULE_ARCHIVE_FORMAT_VERSION = 1;

export function scheduleLayout(name: string): { dir: string; record: string } {
  assertPathSegment('schedule name', name);
  const dir = `${SCHEDULES_ROOT}${name}/`;
  return { dir, record: `${dir}schedule.json` };
}

/** A schedule as storage keeps it: the spec as submitted, and when it was made and last changed. */
export interface ArchivedSchedule {
  name: string;
  /** `{schedule, template, paused?, skipImmediately?}` as submitted (validated again wherever it is used). */
  spec: Record<string, unknown>;
  createdAt: number;
  updatedAt: number;
  /** A namespaced schedule's namespace (its backups act on it only); absent: cluster-wide. */
  namespace?: string | undefined;
  requester?: Requester | undefined;
}

interface ScheduleDocument {
  formatVersion: typeof SCHEDULE_ARCHIVE_FORMAT_VERSION;
  name: string;
  spec: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
  namespace?: string;
  requester?: Requester;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export class ScheduleArchive {
  constructor(private readonly storage: Pick<BackupStorage, 'putObject' | 'getObject' | 'exists' | 'deletePrefix'>) {}

  async write(schedule: ArchivedSchedule): Promise<void> {
    const doc: ScheduleDocument = {
      formatVersion: SCHEDULE_ARCHIVE_FORMAT_VERSION,
      name: schedule.name,
      spec: schedule.spec,
      createdAt: new Date(schedule.createdAt).toISOString(),
      updatedAt: new Date(schedule.updatedAt).toISOString(),
      ...(schedule.namespace ? { namespace: schedule.namespace } : {}),
      ...(schedule.requester ? { requester: schedule.requester } : {}),
    };
    await this.storage.putObject(scheduleLayout(schedule.name).record, `${JSON.stringify(doc, null, 2)}\n`);
  }

  async exists(name: string): Promise<boolean> {
    return this.storage.exists(scheduleLayout(name).record);
  }

  /** The stored schedule; undefined when there is none. Throws, naming the object, when it is not one this Stowage wrote. */
  async read(name: string): Promise<ArchivedSchedule | undefined> {
    const key = scheduleLayout(name).record;
    const bytes = await this.storage.getObject(key);
    if (!bytes) return undefined;
    let doc: unknown;
    try {
      doc = JSON.parse(bytes.toString('utf8'));
    } catch (err) {
      throw new Error(`${key} is not JSON: ${(err as Error).message}`);
    }
    if (!isObject(doc)) throw new Error(`${key} is not a JSON object`);
    if (doc.formatVersion !== SCHEDULE_ARCHIVE_FORMAT_VERSION)
      throw new Error(
        `${key} has formatVersion ${JSON.stringify(doc.formatVersion)}; this Stowage reads ${SCHEDULE_ARCHIVE_FORMAT_VERSION}`,
      );
    if (doc.name !== name) throw new Error(`${key} names schedule ${JSON.stringify(doc.name)}, not "${name}"`);
    if (!isObject(doc.spec)) throw new Error(`${key} has no spec object`);
    const createdAt = Date.parse(String(doc.createdAt));
    const updatedAt = Date.parse(String(doc.updatedAt));
    if (Number.isNaN(createdAt) || Number.isNaN(updatedAt)) throw new Error(`${key} has no valid createdAt/updatedAt`);
    if (doc.namespace !== undefined && typeof doc.namespace !== 'string') throw new Error(`${key} has a namespace that is not a string`);
    return {
      name,
      spec: doc.spec,
      createdAt,
      updatedAt,
      ...(typeof doc.namespace === 'string' ? { namespace: doc.namespace } : {}),
      ...(isObject(doc.requester) ? { requester: doc.requester as unknown as Requester } : {}),
    };
  }

  async remove(name: string): Promise<void> {
    await this.storage.deletePrefix(scheduleLayout(name).dir);
  }
}
