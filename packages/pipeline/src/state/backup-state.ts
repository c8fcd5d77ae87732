import type { Redis } from 'ioredis';
import { BACKUP_STATE_SCRIPTS } from './scripts.js';

/**
 * The one module that reads and writes a backup's state in Redis. Every key of a backup
 * carries the backup name as a hash tag, so multi-key scripts stay on one slot on Redis
 * Cluster. Writes are safe to repeat (BullMQ is at-least-once): counters move once per
 * key, phases move by compare-and-set, records are overwritten with the same content.
 *
 * Keys (K = `<prefix>:bk:{<name>}`):
 * - `K:rec`     hash   the backup record (name, uid, spec JSON, phase, timestamps, ...)
 * - `K:cnt`     hash   counters (items, hooks, PVBs by phase, errors, warnings, blocks)
 * - `K:once`    set    counter keys already counted
 * - `K:events`  stream the append-only event stream (SSE ids are stream ids)
 * - `K:logs`    list   log lines as JSON (bounded)
 * - `K:border`  list   block ids in plan order
 * - `K:plan`    hash   blockId → block plan JSON (pods, items, hooks, volume decisions)
 * - `K:items`   hash   blockId → the block's item manifests JSON (dropped after finalize)
 * - `K:b:<id>`  hash   the block's live state (state, timestamps, failed pods, PVB names)
 * - `K:pvb:<n>` hash   one PVB's live state (block, pod, node, volume, phase, bytes, ...)
 * - `K:hooks`   list   every hook run as JSON, in order of completion
 * - `<prefix>:backups` zset of backup names by creation time (the index for listing)
 *
 * Once a backup has ended and finalize has written everything its views show to storage
 * (backup-archive.ts), only `K:rec` (with `archivedAt`) and `K:cnt` stay — the catalogue entry,
 * a few hundred bytes whatever the backup's size — and the index entry; `dropInFlightState`
 * removes the rest.
 */

type ScriptArg = string | number;
interface StateScriptCommands {
  stowageCreateBackup(key: string, ...args: ScriptArg[]): Promise<number>;
  stowageCatalogueBackup(recordKey: string, countersKey: string, ...args: ScriptArg[]): Promise<number>;
  stowageTransitionPhase(key: string, ...args: ScriptArg[]): Promise<[number, string | null]>;
  stowageCountOnce(onceKey: string, countersKey: string, ...args: ScriptArg[]): Promise<number>;
  stowageCountOnceAndLog(onceKey: string, countersKey: string, logsKey: string, ...args: ScriptArg[]): Promise<number>;
  stowagePutPlans(planKey: string, itemsKey: string, orderKey: string, ...args: ScriptArg[]): Promise<number>;
  stowageCountOnceMany(onceKey: string, countersKey: string, entries: string): Promise<number>;
  stowageRegisterPvb(pvbKey: string, setKey: string, ...args: ScriptArg[]): Promise<number>;
  stowageRequestCancel(recordKey: string, at: string, endedPhases: string): Promise<[number, string | null]>;
  stowageRegisterPvbs(numberOfKeys: number, ...keysAndArgs: string[]): Promise<string[][]>;
  stowageReadBlock(
    recordKey: string,
    planKey: string,
    blockKey: string,
    itemsKey: string,
    blockId: string,
  ): Promise<[string[], string, string[], string]>;
  stowageReadBlockTail(planKey: string, blockKey: string, blockId: string, pvbKeyPrefix: string): Promise<[string, string[], string[][]]>;
  stowageBlockStep(
    blockKey: string,
    onceKey: string,
    countersKey: string,
    eventsKey: string,
    step: string,
    maxLen: string,
  ): Promise<number>;
}

/** One step of a block (BackupState.blockStep): fields, once-counters and an event, in one round trip. */
export interface BlockStep {
  /** Fields of the block's live state to set (undefined values are left out). */
  set?: Partial<BlockStateRecord>;
  /** Counters moved once per key (see countOnceMany). */
  once?: ReadonlyArray<{ onceKey: string; field: string; by?: number }>;
  /** An event appended always, or — with `ifCounted` (index into `once`) — only when that key counted now. */
  event?: { type: string; data: Record<string, unknown>; ifCounted?: number };
}

/** What an item-block job reads first, in one round trip. */
export interface BlockContext<P = unknown, I = unknown> {
  record: BackupRecord | undefined;
  plan: P | undefined;
  block: BlockStateRecord | undefined;
  items: I | undefined;
}

/** What a block's post-hooks step reads first, in one round trip. */
export interface BlockTail<P = unknown> {
  plan: P | undefined;
  block: BlockStateRecord | undefined;
  /** The state of each PVB the block names, in its order (undefined when one has no record). */
  pvbs: Array<PvbStateRecord | undefined>;
}

/** Backup phases after which nothing changes any more. */
export const ENDED_BACKUP_PHASES = ['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled'] as const;

/** A problem worth telling the user: counted once per key into `errors`/`warnings` and logged. */
export interface BackupProblem {
  level: 'error' | 'warn';
  /** Counted once: a re-run job reporting the same problem does not count it twice. */
  onceKey: string;
  msg: string;
  /** Where: `namespace` (for the results file), `blockId`, `pod`, `pvb`, `reason`, ... */
  [field: string]: unknown;
}

export interface BackupRecord {
  name: string;
  uid: string;
  spec: unknown;
  phase: string;
  requestId?: string;
  createdAt: number;
  startedAt?: number;
  completedAt?: number;
  fsDeadlineAt?: number;
  cancelRequestedAt?: number;
  /** Set by plan when every block was added (a re-run of plan after this changes nothing). */
  planCompletedAt?: number;
  failureReason?: string;
  planSummary?: unknown;
  /**
   * Set once everything the backup's views show is in storage (backup-archive.ts): the views read
   * it from there, and Redis holds only this record and the counters.
   */
  archivedAt?: number;
  /** PVBs by phase at the end (kept with the catalogue entry, since the PVB records are dropped). */
  pvbPhases?: Record<string, number>;
}

export interface BackupEvent {
  id: string;
  type: string;
  at: number;
  data: Record<string, unknown>;
}

export interface LogLine {
  at: number;
  level: 'debug' | 'info' | 'warn' | 'error';
  msg: string;
  [field: string]: unknown;
}

export interface BlockStateRecord {
  id: string;
  state: string;
  startedAt?: number;
  itemsDoneAt?: number;
  completedAt?: number;
  failedPods?: string[];
  pvbs?: string[];
  itemsWritten?: number;
  /** Pods whose pre hooks ran through without an `onError: Fail` failure (their post hooks are owed). */
  prePhaseDonePods?: string[];
  error?: string;
  [field: string]: unknown;
}

export interface PvbStateRecord {
  name: string;
  blockId: string;
  podNamespace: string;
  podName: string;
  podUid: string;
  volume: string;
  node: string;
  phase: string;
  message?: string;
  snapshotID?: string;
  totalBytes?: number;
  bytesDone?: number;
  startTimestamp?: string;
  completionTimestamp?: string;
  timedOut?: boolean;
  [field: string]: unknown;
}

export interface HookRunRecord {
  blockId: string;
  podNamespace: string;
  podName: string;
  container: string;
  phase: 'pre' | 'post';
  source: string;
  index: number;
  command: string[];
  /**
   * exited | timeout | error | skipped | invalid; `running` while the exec is in flight;
   * `interrupted` (derived when read) when its job was cut off before the hook finished.
   */
  outcome: string;
  /** One run: its `running` entry and its final entry share it; the later one wins when read. */
  runId?: string;
  exitCode?: number;
  startedAt?: number;
  endedAt?: number;
  stdoutTail?: string;
  stderrTail?: string;
  message?: string;
  attempt?: number;
}

export interface BackupStateOptions {
  redis: Redis;
  /** Key prefix, e.g. `stowage` in production or a unique one per test. */
  prefix: string;
  now?: () => number;
  /** Bound of the event stream and log list per backup. */
  maxEvents?: number;
  maxLogLines?: number;
}

const MAX_EVENTS = 200_000;
const MAX_LOG_LINES = 100_000;

export class BackupState {
  readonly redis: Redis;
  readonly prefix: string;
  private readonly now: () => number;
  private readonly maxEvents: number;
  private readonly maxLogLines: number;

  constructor(opts: BackupStateOptions) {
    this.redis = opts.redis;
    this.prefix = opts.prefix;
    this.now = opts.now ?? Date.now;
    this.maxEvents = opts.maxEvents ?? MAX_EVENTS;
    this.maxLogLines = opts.maxLogLines ?? MAX_LOG_LINES;
    for (const [name, def] of Object.entries(BACKUP_STATE_SCRIPTS)) {
      if (!(name in this.redis)) this.redis.defineCommand(name, def);
    }
  }

  key(name: string, suffix: string): string {
    return `${this.prefix}:bk:{${name}}:${suffix}`;
  }

  private get indexKey(): string {
    return `${this.prefix}:backups`;
  }

  // ---- backup record -------------------------------------------------------------------

  /** Records a new backup; a second call with the same name changes nothing and says so. */
  async createBackup(record: BackupRecord): Promise<{ created: boolean }> {
    const fields = encodeRecord(record);
    const created = await this.cmd().stowageCreateBackup(this.key(record.name, 'rec'), ...fields);
    // Always (re)index: a crash between the two writes must not leave a record nobody lists.
    await this.redis.zadd(this.indexKey, 'NX', record.createdAt, record.name);
    if (created === 1) await this.appendEvent(record.name, 'backup.created', { phase: record.phase });
    return { created: created === 1 };
  }

  /** When the user asked to cancel (one field, not the whole record), or undefined. */
  async cancelRequestedAt(name: string): Promise<number | undefined> {
    const raw = await this.redis.hget(this.key(name, 'rec'), 'cancelRequestedAt');
    return raw === null ? undefined : Number(raw);
  }

  async getBackup(name: string): Promise<BackupRecord | undefined> {
    const raw = await this.redis.hgetall(this.key(name, 'rec'));
    if (!raw.name) return undefined;
    return decodeRecord(raw);
  }

  async updateBackup(name: string, patch: Partial<BackupRecord>): Promise<void> {
    const fields = encodeRecord(patch);
    if (fields.length > 0) await this.redis.hset(this.key(name, 'rec'), ...fields);
  }

  /**
   * Moves the backup's phase to `to` only when the current phase is one of `from`
   * (compare-and-set, so a duplicate delivery cannot move it twice or backwards).
   */
  async transitionPhase(
    name: string,
    from: readonly string[],
    to: string,
    patch: Partial<BackupRecord> = {},
  ): Promise<{ moved: boolean; phase: string | undefined }> {
    const fields = encodeRecord(patch);
    const res = (await this.cmd().stowageTransitionPhase(this.key(name, 'rec'), to, JSON.stringify(from), ...fields)) as [
      number,
      string | null,
    ];
    const moved = res[0] === 1;
    if (moved) await this.appendEvent(name, 'backup.phase', { from: res[1], to });
    return { moved, phase: moved ? to : (res[1] ?? undefined) };
  }

  /**
   * Records that the user asked to cancel. Returns `requested: true` only the first time and only
   * while the backup has not ended; the pipeline reads `cancelRequestedAt` and winds down.
   */
  async requestCancel(name: string): Promise<{ requested: boolean; phase: string | undefined }> {
    const at = this.now();
    const res = (await this.cmd().stowageRequestCancel(this.key(name, 'rec'), String(at), JSON.stringify(ENDED_BACKUP_PHASES))) as [
      number,
      string | null,
    ];
    const requested = res[0] === 1;
    if (requested) await this.appendEvent(name, 'backup.cancel-requested', { at });
    return { requested, phase: res[1] ?? undefined };
  }

  async listBackups(opts: { limit: number; cursor?: string; phase?: string }): Promise<{ items: BackupRecord[]; nextCursor?: string }> {
    // Cursor = the offset into the index, newest first; filtering by phase reads on until the page fills.
    let offset = opts.cursor ? Number.parseInt(opts.cursor, 10) : 0;
    if (!Number.isFinite(offset) || offset < 0) offset = 0;
    const items: BackupRecord[] = [];
    const chunk = Math.max(opts.limit, 50);
    for (;;) {
      const names = await this.redis.zrevrange(this.indexKey, offset, offset + chunk - 1);
      if (names.length === 0) return { items };
      const pipe = this.redis.pipeline();
      for (const n of names) pipe.hgetall(this.key(n, 'rec'));
      const rows = (await pipe.exec()) ?? [];
      for (let i = 0; i < names.length; i++) {
        offset++;
        const raw = rows[i]?.[1] as Record<string, string> | undefined;
        if (!raw?.name) continue;
        const rec = decodeRecord(raw);
        if (opts.phase && rec.phase !== opts.phase) continue;
        items.push(rec);
        if (items.length === opts.limit) {
          const more = (await this.redis.zcard(this.indexKey)) > offset;
          return more ? { items, nextCursor: String(offset) } : { items };
        }
      }
    }
  }

  /**
   * Adds a backup found in storage (backup sync) with its counters, unless a backup of that name
   * is recorded already. `added`: whether it was added now; `known`: a record of that name exists
   * that is not a catalogue entry (a running backup; nothing is changed then, and it is not indexed).
   */
  async catalogueBackup(
    record: BackupRecord,
    counters: Readonly<Record<string, number>>,
  ): Promise<{ added: boolean; known?: 'other-record' }> {
    const fields = encodeRecord(record);
    const counterFields = Object.entries(counters).flatMap(([k, v]) => [k, String(v)]);
    const added = await this.cmd().stowageCatalogueBackup(
      this.key(record.name, 'rec'),
      this.key(record.name, 'cnt'),
      fields.length / 2,
      ...fields,
      ...counterFields,
    );
    if (added === 0) return { added: false, known: 'other-record' };
    // Indexed also when the entry existed: a crash between the script and this ZADD must not leave it unlisted.
    await this.redis.zadd(this.indexKey, 'NX', record.createdAt, record.name);
    return { added: added === 1 };
  }

  /** Every backup name in the catalogue (the index), oldest first. */
  async allBackupNames(): Promise<string[]> {
    return await this.redis.zrange(this.indexKey, 0, -1);
  }

  /**
   * Drops everything of an ended backup but its record and counters (the catalogue entry), once
   * storage holds what its views show. Safe to repeat, and after a crash midway: the block order
   * and the PVB set, which name the other keys, go last.
   */
  async dropInFlightState(name: string): Promise<void> {
    const [blockIds, pvbNames] = await Promise.all([this.redis.lrange(this.key(name, 'border'), 0, -1), this.allPvbNames(name)]);
    const keys = [...blockIds.map((id) => this.key(name, `b:${id}`)), ...pvbNames.map((p) => this.key(name, `pvb:${p}`))];
    for (let i = 0; i < keys.length; i += 500) await this.redis.unlink(...keys.slice(i, i + 500));
    await this.redis.unlink(...['once', 'events', 'logs', 'plan', 'items', 'hooks', 'border', 'pvbset'].map((s) => this.key(name, s)));
  }

  /** Removes every key of the backup and its index entry. */
  async deleteBackup(name: string): Promise<void> {
    const [blockIds, pvbNames] = await Promise.all([this.redis.lrange(this.key(name, 'border'), 0, -1), this.allPvbNames(name)]);
    const keys = [
      ...['rec', 'cnt', 'once', 'events', 'logs', 'border', 'plan', 'items', 'hooks', 'pvbset'].map((s) => this.key(name, s)),
      ...blockIds.map((id) => this.key(name, `b:${id}`)),
      ...pvbNames.map((p) => this.key(name, `pvb:${p}`)),
    ];
    for (let i = 0; i < keys.length; i += 500) await this.redis.del(...keys.slice(i, i + 500));
    await this.redis.zrem(this.indexKey, name);
  }

  // ---- counters ------------------------------------------------------------------------

  /** Adds `by` to counter `field` unless `onceKey` was counted before. Returns whether it counted. */
  async countOnce(name: string, onceKey: string, field: string, by = 1): Promise<boolean> {
    const res = (await this.cmd().stowageCountOnce(this.key(name, 'once'), this.key(name, 'cnt'), onceKey, field, by)) as number;
    return res === 1;
  }

  /** countOnce, and `line` logged when it counted now (one round trip, both or neither). */
  async countOnceAndLog(name: string, onceKey: string, field: string, line: Omit<LogLine, 'at'> & { at?: number }): Promise<boolean> {
    const full = { at: this.now(), ...line };
    const res = await this.cmd().stowageCountOnceAndLog(
      this.key(name, 'once'),
      this.key(name, 'cnt'),
      this.key(name, 'logs'),
      onceKey,
      field,
      1,
      JSON.stringify(full),
      this.maxLogLines,
    );
    return res === 1;
  }

  /** Counts many keys once each in one round trip; returns how many counted now. */
  async countOnceMany(name: string, entries: ReadonlyArray<{ onceKey: string; field: string; by?: number }>): Promise<number> {
    if (entries.length === 0) return 0;
    const payload = JSON.stringify(entries.map((e) => [e.onceKey, e.field, e.by ?? 1]));
    return (await this.cmd().stowageCountOnceMany(this.key(name, 'once'), this.key(name, 'cnt'), payload)) as number;
  }

  /**
   * Records an error or a warning: counted once per `onceKey` into `errors`/`warnings`, and
   * logged (the results file and `backup logs` read the log). Returns whether it was new.
   */
  async recordProblem(name: string, problem: BackupProblem): Promise<boolean> {
    const { onceKey, level, ...line } = problem;
    const field = level === 'error' ? 'errors' : 'warnings';
    return this.countOnceAndLog(name, `${field}:${onceKey}`, field, { level, ...line });
  }

  /** Sets a counter to a value (for totals set by the planner). */
  async setCounter(name: string, field: string, value: number): Promise<void> {
    await this.redis.hset(this.key(name, 'cnt'), field, value);
  }

  async counters(name: string): Promise<Record<string, number>> {
    const raw = await this.redis.hgetall(this.key(name, 'cnt'));
    const out: Record<string, number> = {};
    for (const [k, v] of Object.entries(raw)) out[k] = Number(v);
    return out;
  }

  // ---- events and logs -----------------------------------------------------------------

  async appendEvent(name: string, type: string, data: Record<string, unknown>): Promise<string> {
    const at = this.now();
    const id = await this.redis.xadd(
      this.key(name, 'events'),
      'MAXLEN',
      '~',
      String(this.maxEvents),
      '*',
      'type',
      type,
      'at',
      String(at),
      'data',
      JSON.stringify(data),
    );
    return id ?? '';
  }

  /** Events after `afterId` (exclusive; `0` = from the start). With `blockMs`, waits for new ones. */
  async readEvents(name: string, afterId: string, opts: { count?: number; blockMs?: number; client?: Redis } = {}): Promise<BackupEvent[]> {
    const client = opts.client ?? this.redis;
    const count = String(opts.count ?? 500);
    const key = this.key(name, 'events');
    const res =
      opts.blockMs !== undefined
        ? await client.xread('COUNT', count, 'BLOCK', String(opts.blockMs), 'STREAMS', key, afterId)
        : await client.xread('COUNT', count, 'STREAMS', key, afterId);
    if (!res) return [];
    const entries = res[0]?.[1] ?? [];
    return entries.map(([id, flat]) => decodeEvent(id, flat));
  }

  async log(name: string, line: Omit<LogLine, 'at'> & { at?: number }): Promise<void> {
    const key = this.key(name, 'logs');
    const full = { at: this.now(), ...line };
    await this.redis.multi().rpush(key, JSON.stringify(full)).ltrim(key, -this.maxLogLines, -1).exec();
  }

  /** Appends several log lines in one round trip (the plan's skips, a batch at a time). */
  async logMany(name: string, lines: ReadonlyArray<Omit<LogLine, 'at'> & { at?: number }>): Promise<void> {
    if (lines.length === 0) return;
    const key = this.key(name, 'logs');
    const at = this.now();
    await this.redis
      .multi()
      .rpush(key, ...lines.map((line) => JSON.stringify({ at, ...line })))
      .ltrim(key, -this.maxLogLines, -1)
      .exec();
  }

  async readLogs(name: string, start = 0, stop = -1): Promise<LogLine[]> {
    const rows = await this.redis.lrange(this.key(name, 'logs'), start, stop);
    return rows.map((r) => JSON.parse(r) as LogLine);
  }

  // ---- plan ----------------------------------------------------------------------------

  /** Stores a batch of block plans (and their item manifests) in plan order. Idempotent per block. */
  async putBlockPlans(name: string, blocks: ReadonlyArray<{ id: string; plan: unknown; items: unknown }>): Promise<void> {
    if (blocks.length === 0) return;
    const planArgs: string[] = [];
    const itemArgs: string[] = [];
    const ids: string[] = [];
    for (const b of blocks) {
      planArgs.push(b.id, JSON.stringify(b.plan));
      itemArgs.push(b.id, JSON.stringify(b.items));
      ids.push(b.id);
    }
    await this.cmd().stowagePutPlans(
      this.key(name, 'plan'),
      this.key(name, 'items'),
      this.key(name, 'border'),
      JSON.stringify(ids),
      ...planArgs,
      ...itemArgs,
    );
  }

  /** The plans of several blocks (one HMGET), in the order asked. */
  async getBlockPlans<T = unknown>(name: string, blockIds: readonly string[]): Promise<Array<T | undefined>> {
    if (blockIds.length === 0) return [];
    const rows = await this.redis.hmget(this.key(name, 'plan'), ...blockIds);
    return rows.map((raw) => (raw ? (JSON.parse(raw) as T) : undefined));
  }

  async getBlockPlan<T = unknown>(name: string, blockId: string): Promise<T | undefined> {
    const raw = await this.redis.hget(this.key(name, 'plan'), blockId);
    return raw ? (JSON.parse(raw) as T) : undefined;
  }

  async getBlockItems<T = unknown>(name: string, blockId: string): Promise<T | undefined> {
    const raw = await this.redis.hget(this.key(name, 'items'), blockId);
    return raw ? (JSON.parse(raw) as T) : undefined;
  }

  /** Drops the stored item manifests once they are in storage (the plan and state stay). */
  async dropItems(name: string): Promise<void> {
    await this.redis.unlink(this.key(name, 'items'));
  }

  async blockCount(name: string): Promise<number> {
    return await this.redis.llen(this.key(name, 'border'));
  }

  async blockIds(name: string, start = 0, stop = -1): Promise<string[]> {
    return await this.redis.lrange(this.key(name, 'border'), start, stop);
  }

  // ---- blocks --------------------------------------------------------------------------

  /** Sets fields of a block's live state (a hash, so concurrent writers of other fields never clash). */
  async updateBlock(name: string, blockId: string, patch: Partial<BlockStateRecord>): Promise<void> {
    await this.redis.hset(this.key(name, `b:${blockId}`), ...encodeJsonHash({ id: blockId, ...patch }));
  }

  /**
   * Sets block fields, counts once-keys and appends an event in one script (one round trip, and
   * atomic: the event is written exactly when its key counted). Returns how many keys counted now.
   */
  async blockStep(name: string, blockId: string, step: BlockStep): Promise<number> {
    const set = step.set ? encodeJsonHash({ id: blockId, ...step.set }) : [];
    const once = (step.once ?? []).map((e) => [e.onceKey, e.field, e.by ?? 1]);
    const event = step.event
      ? { type: step.event.type, at: this.now(), data: JSON.stringify(step.event.data), ifCounted: (step.event.ifCounted ?? -1) + 1 }
      : undefined;
    // cjson turns an empty table into an object: send absent lists as absent.
    const payload = JSON.stringify({
      ...(set.length > 0 ? { set } : {}),
      ...(once.length > 0 ? { once } : {}),
      ...(event ? { event } : {}),
    });
    return (await this.cmd().stowageBlockStep(
      this.key(name, `b:${blockId}`),
      this.key(name, 'once'),
      this.key(name, 'cnt'),
      this.key(name, 'events'),
      payload,
      String(this.maxEvents),
    )) as number;
  }

  /** The backup record, a block's plan, its live state and its item manifests, in one round trip. */
  async readBlockContext<P = unknown, I = unknown>(name: string, blockId: string): Promise<BlockContext<P, I>> {
    const [recFlat, plan, blockFlat, items] = await this.cmd().stowageReadBlock(
      this.key(name, 'rec'),
      this.key(name, 'plan'),
      this.key(name, `b:${blockId}`),
      this.key(name, 'items'),
      blockId,
    );
    const rec = flatToObject(recFlat);
    const block = flatToObject(blockFlat);
    return {
      record: rec?.name ? decodeRecord(rec) : undefined,
      plan: plan ? (JSON.parse(plan) as P) : undefined,
      block: block?.id ? decodeJsonHash<BlockStateRecord>(block) : undefined,
      items: items ? (JSON.parse(items) as I) : undefined,
    };
  }

  /** A block's plan, its live state and the state of every PVB it names, in one round trip. */
  async readBlockTail<P = unknown>(name: string, blockId: string): Promise<BlockTail<P>> {
    const [plan, blockFlat, pvbFlats] = await this.cmd().stowageReadBlockTail(
      this.key(name, 'plan'),
      this.key(name, `b:${blockId}`),
      blockId,
      this.key(name, 'pvb:'),
    );
    const block = flatToObject(blockFlat);
    return {
      plan: plan ? (JSON.parse(plan) as P) : undefined,
      block: block?.id ? decodeJsonHash<BlockStateRecord>(block) : undefined,
      pvbs: pvbFlats.map((flat) => {
        const raw = flatToObject(flat);
        return raw?.name ? decodeJsonHash<PvbStateRecord>(raw) : undefined;
      }),
    };
  }

  async getBlock(name: string, blockId: string): Promise<BlockStateRecord | undefined> {
    const raw = await this.redis.hgetall(this.key(name, `b:${blockId}`));
    return raw.id ? decodeJsonHash<BlockStateRecord>(raw) : undefined;
  }

  async getBlocks(name: string, blockIds: readonly string[]): Promise<Array<BlockStateRecord | undefined>> {
    if (blockIds.length === 0) return [];
    const pipe = this.redis.pipeline();
    for (const id of blockIds) pipe.hgetall(this.key(name, `b:${id}`));
    const rows = (await pipe.exec()) ?? [];
    return rows.map((r) => {
      const raw = r[1] as Record<string, string> | undefined;
      return raw?.id ? decodeJsonHash<BlockStateRecord>(raw) : undefined;
    });
  }

  // ---- PVBs ----------------------------------------------------------------------------

  /** Records or updates a PVB's state. The first write registers it in the backup's PVB set. */
  async updatePvb(name: string, pvbName: string, patch: Partial<PvbStateRecord>): Promise<void> {
    const fields = encodeJsonHash({ name: pvbName, ...patch });
    await this.redis
      .multi()
      .hset(this.key(name, `pvb:${pvbName}`), ...fields)
      .sadd(this.key(name, 'pvbset'), pvbName)
      .exec();
  }

  /**
   * Registers a PVB as pending before it is created (a fast PVB must never finish unregistered).
   * A PVB known already keeps its state, so a re-run block cannot reset a finished PVB.
   */
  async registerPvb(name: string, pvbName: string, record: Omit<PvbStateRecord, 'name'>): Promise<{ registered: boolean }> {
    const fields = encodeJsonHash({ name: pvbName, ...record });
    const res = await this.cmd().stowageRegisterPvb(this.key(name, `pvb:${pvbName}`), this.key(name, 'pvbset'), pvbName, ...fields);
    return { registered: res === 1 };
  }

  /**
   * registerPvb for several PVBs and the block fields that name them, in one round trip (one
   * script: a PVB named by the block is always registered). Returns each PVB's state as it is
   * now — the pending record, or what a PVB known already has reached — by PVB name.
   */
  async registerPvbs(
    name: string,
    blockId: string,
    pvbs: ReadonlyArray<{ pvbName: string; record: Omit<PvbStateRecord, 'name'> }>,
    blockPatch: Partial<BlockStateRecord>,
  ): Promise<Map<string, PvbStateRecord | undefined>> {
    const entries: string[][] = [];
    for (const { pvbName, record } of pvbs) {
      entries.push([pvbName, ...encodeJsonHash({ name: pvbName, ...record })]);
    }
    const blockFields = encodeJsonHash({ id: blockId, ...blockPatch });
    const payload = JSON.stringify({ ...(entries.length > 0 ? { pvbs: entries } : {}), block: blockFields });
    const rows = await this.cmd().stowageRegisterPvbs(
      2 + pvbs.length,
      this.key(name, 'pvbset'),
      this.key(name, `b:${blockId}`),
      ...pvbs.map((p) => this.key(name, `pvb:${p.pvbName}`)),
      payload,
    );
    const out = new Map<string, PvbStateRecord | undefined>();
    pvbs.forEach(({ pvbName }, i) => {
      const raw = flatToObject(rows[i] ?? []);
      out.set(pvbName, raw.name ? decodeJsonHash<PvbStateRecord>(raw) : undefined);
    });
    return out;
  }

  async getPvb(name: string, pvbName: string): Promise<PvbStateRecord | undefined> {
    const raw = await this.redis.hgetall(this.key(name, `pvb:${pvbName}`));
    return raw.name ? decodeJsonHash<PvbStateRecord>(raw) : undefined;
  }

  async getPvbs(name: string, pvbNames: readonly string[]): Promise<Array<PvbStateRecord | undefined>> {
    if (pvbNames.length === 0) return [];
    const pipe = this.redis.pipeline();
    for (const p of pvbNames) pipe.hgetall(this.key(name, `pvb:${p}`));
    const rows = (await pipe.exec()) ?? [];
    return rows.map((r) => {
      const raw = r[1] as Record<string, string> | undefined;
      return raw?.name ? decodeJsonHash<PvbStateRecord>(raw) : undefined;
    });
  }

  async allPvbNames(name: string): Promise<string[]> {
    return (await this.redis.smembers(this.key(name, 'pvbset'))).sort();
  }

  // ---- hook runs -----------------------------------------------------------------------

  async recordHookRun(name: string, run: HookRunRecord): Promise<void> {
    await this.redis.rpush(this.key(name, 'hooks'), JSON.stringify(run));
  }

  /**
   * Every hook run in start order, one entry per run (its final entry replaces its `running` one).
   * A run still `running` when the same hook was started again later was cut off — its worker died
   * or lost the job — and reads as `interrupted`: at-least-once, and the log shows both runs.
   */
  async hookRuns(name: string): Promise<HookRunRecord[]> {
    const rows = await this.redis.lrange(this.key(name, 'hooks'), 0, -1);
    const runs: HookRunRecord[] = [];
    const slotOfRun = new Map<string, number>();
    for (const row of rows) {
      const run = JSON.parse(row) as HookRunRecord;
      const slot = run.runId !== undefined ? slotOfRun.get(run.runId) : undefined;
      if (slot !== undefined) runs[slot] = run;
      else {
        if (run.runId !== undefined) slotOfRun.set(run.runId, runs.length);
        runs.push(run);
      }
    }
    const hookKey = (r: HookRunRecord) => `${r.blockId}|${r.podNamespace}/${r.podName}|${r.phase}|${r.index}`;
    const startedAgain = new Set<string>();
    for (let i = runs.length - 1; i >= 0; i--) {
      const run = runs[i]!;
      const key = hookKey(run);
      if (run.outcome === 'running' && startedAgain.has(key)) runs[i] = interruptedRun(run, 'its job was run again');
      startedAgain.add(key);
    }
    return runs;
  }

  // ---------------------------------------------------------------------------------------

  // ioredis adds the commands defined with defineCommand at run time.
  private cmd(): Redis & StateScriptCommands {
    return this.redis as Redis & StateScriptCommands;
  }
}

const JSON_RECORD_FIELDS = new Set(['spec', 'planSummary', 'pvbPhases']);
const NUMBER_RECORD_FIELDS = new Set([
  'createdAt',
  'startedAt',
  'completedAt',
  'fsDeadlineAt',
  'cancelRequestedAt',
  'planCompletedAt',
  'archivedAt',
]);

function encodeRecord(rec: Partial<BackupRecord>): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(rec)) {
    if (v === undefined) continue;
    out.push(k, JSON_RECORD_FIELDS.has(k) ? JSON.stringify(v) : String(v));
  }
  return out;
}

function decodeRecord(raw: Record<string, string>): BackupRecord {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw)) {
    if (JSON_RECORD_FIELDS.has(k)) out[k] = JSON.parse(v);
    else if (NUMBER_RECORD_FIELDS.has(k)) out[k] = Number(v);
    else out[k] = v;
  }
  return out as unknown as BackupRecord;
}

function flatToObject(flat: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i] as string] = flat[i + 1] as string;
  return out;
}

/** Hash fields `[k1, json1, k2, json2, …]` of a record's defined values (decodeJsonHash reads them back). */
function encodeJsonHash(record: Readonly<Record<string, unknown>>): string[] {
  const fields: string[] = [];
  for (const [k, v] of Object.entries(record)) if (v !== undefined) fields.push(k, JSON.stringify(v));
  return fields;
}

function decodeJsonHash<T>(raw: Record<string, string>): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw)) {
    try {
      out[k] = JSON.parse(v);
    } catch {
      out[k] = v;
    }
  }
  return out as T;
}

function decodeEvent(id: string, flat: string[]): BackupEvent {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i] as string] = flat[i + 1] as string;
  return { id, type: f.type ?? 'unknown', at: Number(f.at ?? 0), data: f.data ? (JSON.parse(f.data) as Record<string, unknown>) : {} };
}

/** A `running` hook run that will never report: its job was cut off before the exec finished. */
export function interruptedRun(run: HookRunRecord, why: string): HookRunRecord {
  return { ...run, outcome: 'interrupted', message: `cut off before it finished (${why}; the worker stopped or lost the job)` };
}
