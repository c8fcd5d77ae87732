import type { Requester } from '@stowage/core';
import type { RedisClient } from '@stowage/queue';
import { scheduleIndexKey, scheduleKey } from '@stowage/queue';

/** A tick that started no backup, and why (the previous backup still ran, the spec became invalid, …). */
export interface ScheduleSkip {
  at: number;
  /** The backup this tick would have made. */
  backup: string;
  reason: string;
}

/**
 * A schedule as stored: the spec as submitted (so a PATCH merges over what the user wrote and
 * every read validates it again with today's rules) and what its ticks did.
 */
export interface ScheduleRecord {
  name: string;
  /** `{schedule, template, paused?, skipImmediately?}` as submitted. */
  spec: Record<string, unknown>;
  createdAt: number;
  updatedAt: number;
  /** The newest backup a tick started, and when. */
  lastBackup?: string;
  lastBackupAt?: number;
  lastSkip?: ScheduleSkip;
  /** Ticks that started no backup. */
  skipped: number;
  /** A namespaced schedule's namespace (a Schedule resource): its backups are that namespace's only. Absent: cluster-wide. */
  namespace?: string;
  /** Whose rights its backups' spec hooks are checked against at each exec (core's Requester); absent: Stowage's own. */
  requester?: Requester;
}

/**
 * Schedules in Redis: one hash per schedule (`<prefix>:sched:{<name>}`, tagged by name), an index
 * of names, and per schedule the backups its ticks started (a sorted set by tick), which answers
 * "last successful backup" without scanning every backup.
 */
export class ScheduleStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  private key(name: string, suffix?: string): string {
    return scheduleKey(this.prefix, name, suffix);
  }

  private get indexKey(): string {
    return scheduleIndexKey(this.prefix);
  }

  /** Records a new schedule; false when the name is taken (nothing changed). */
  async create(record: ScheduleRecord): Promise<boolean> {
    // The spec is written first and only if absent: it alone makes a schedule exist.
    const created = await this.redis.hsetnx(this.key(record.name), 'spec', JSON.stringify(record.spec));
    if (created === 0) return false;
    const { spec: _spec, ...rest } = encode(record);
    await this.redis.hset(this.key(record.name), rest);
    await this.redis.zadd(this.indexKey, record.createdAt, record.name);
    return true;
  }

  async get(name: string): Promise<ScheduleRecord | undefined> {
    const raw = await this.redis.hgetall(this.key(name));
    return raw.spec ? decode(name, raw) : undefined;
  }

  /** Every schedule's name, oldest first. */
  names(): Promise<string[]> {
    return this.redis.zrange(this.indexKey, 0, -1);
  }

  async list(): Promise<ScheduleRecord[]> {
    const names = await this.names();
    const records = await Promise.all(names.map((n) => this.get(n)));
    return records.filter((r): r is ScheduleRecord => r !== undefined);
  }

  async updateSpec(name: string, spec: Record<string, unknown>, now: number): Promise<void> {
    await this.redis.hset(this.key(name), 'spec', JSON.stringify(spec), 'updatedAt', String(now));
  }

  /** A tick started `backup`: it becomes the last backup and joins the schedule's backups. */
  async recordBackup(name: string, backup: string, tickMs: number, now: number): Promise<void> {
    await this.redis
      .multi()
      .hset(this.key(name), 'lastBackup', backup, 'lastBackupAt', String(now))
      .zadd(this.key(name, 'backups'), tickMs, backup)
      .exec();
  }

  /**
   * A backup of this schedule found in storage (backup sync): it joins the schedule's backups, and
   * becomes the last backup when it is newer than the one recorded. Nothing when the schedule does
   * not exist (deleted: its backups stay, unattached). Returns whether it was linked.
   */
  async linkBackup(name: string, backup: string, tickMs: number): Promise<boolean> {
    const linked = await this.redis.eval(LINK_BACKUP_LUA, 2, this.key(name), this.key(name, 'backups'), backup, String(tickMs));
    return linked === 1;
  }

  async recordSkip(name: string, skip: ScheduleSkip): Promise<void> {
    await this.redis.multi().hset(this.key(name), 'lastSkip', JSON.stringify(skip)).hincrby(this.key(name), 'skipped', 1).exec();
  }

  /**
   * Ticks BullMQ never produced a job for, counted once by the run of the tick `afterTickMs` before
   * them (`skip` names the last of them): its re-runs and retries count nothing again. False when
   * they were counted already or the schedule is gone.
   */
  async recordMissed(name: string, afterTickMs: number, count: number, skip: ScheduleSkip): Promise<boolean> {
    const recorded = await this.redis.eval(RECORD_MISSED_LUA, 1, this.key(name), String(afterTickMs), String(count), JSON.stringify(skip));
    return recorded === 1;
  }

  /** The schedule's backups, newest tick first. */
  async backups(name: string, limit: number): Promise<string[]> {
    return this.redis.zrevrange(this.key(name, 'backups'), 0, limit - 1);
  }

  async delete(name: string): Promise<boolean> {
    const removed = await this.redis.del(this.key(name), this.key(name, 'backups'));
    await this.redis.zrem(this.indexKey, name);
    return removed > 0;
  }
}

/**
 * KEYS: the schedule's hash, its backups' sorted set (one hash tag). ARGV: backup, tick (ms).
 * Links only to an existing schedule (its spec field); the last backup moves only forward.
 */
const LINK_BACKUP_LUA = `
if redis.call('HEXISTS', KEYS[1], 'spec') == 0 then return 0 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
local last = tonumber(redis.call('HGET', KEYS[1], 'lastBackupAt') or '-1')
if tonumber(ARGV[2]) > last then redis.call('HSET', KEYS[1], 'lastBackup', ARGV[1], 'lastBackupAt', ARGV[2]) end
return 1
`;

/** KEYS: the schedule's hash. ARGV: the tick whose run counts them, how many, the skip (JSON). Once per tick, moving only forward. */
const RECORD_MISSED_LUA = `
if redis.call('HEXISTS', KEYS[1], 'spec') == 0 then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'missedAfter') or '-1') >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'missedAfter', ARGV[1], 'lastSkip', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'skipped', ARGV[2])
return 1
`;

function encode(record: ScheduleRecord): Record<string, string> {
  const fields: Record<string, string> = {
    name: record.name,
    spec: JSON.stringify(record.spec),
    createdAt: String(record.createdAt),
    updatedAt: String(record.updatedAt),
    skipped: String(record.skipped),
  };
  if (record.lastBackup) fields.lastBackup = record.lastBackup;
  if (record.lastBackupAt !== undefined) fields.lastBackupAt = String(record.lastBackupAt);
  if (record.lastSkip) fields.lastSkip = JSON.stringify(record.lastSkip);
  if (record.namespace) fields.namespace = record.namespace;
  if (record.requester) fields.requester = JSON.stringify(record.requester);
  return fields;
}

function decode(name: string, raw: Record<string, string>): ScheduleRecord {
  return {
    name,
    spec: JSON.parse(raw.spec ?? '{}') as Record<string, unknown>,
    createdAt: Number(raw.createdAt ?? 0),
    updatedAt: Number(raw.updatedAt ?? 0),
    skipped: Number(raw.skipped ?? 0),
    ...(raw.lastBackup ? { lastBackup: raw.lastBackup } : {}),
    ...(raw.lastBackupAt ? { lastBackupAt: Number(raw.lastBackupAt) } : {}),
    ...(raw.lastSkip ? { lastSkip: JSON.parse(raw.lastSkip) as ScheduleSkip } : {}),
    ...(raw.namespace ? { namespace: raw.namespace } : {}),
    ...(raw.requester ? { requester: JSON.parse(raw.requester) as Requester } : {}),
  };
}
