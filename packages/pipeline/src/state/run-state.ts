import type { Requester } from '@stowage/core';
import type { RedisClient } from '@stowage/queue';
import { runIndexKey, runKey } from '@stowage/queue';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { BACKUP_STATE_SCRIPTS } from './scripts.js';
import { takeCurrentStorageCost } from './storage-cost.js';

/**
 * The state of one run — a backup or a restore — in Redis: its record (CAS phases, cancel
 * request), once-counters, problems, the event stream (SSE), the log and the hook runs. One
 * implementation for both kinds; BackupState and RestoreState add what only they have. Every
 * key of a run carries the run's name as a hash tag, so multi-key scripts stay on one slot on
 * Redis Cluster. Writes are safe to repeat (BullMQ is at-least-once): counters move once per
 * key, phases move by compare-and-set, records are overwritten with the same content.
 *
 * Keys (K = `<prefix>:<tag>:{<name>}`, tag `bk` for backups, `rs` for restores):
 * - `K:rec`     hash   the record (name, uid, spec JSON, phase, timestamps, ...)
 * - `K:cnt`     hash   counters
 * - `K:once`    set    counter keys already counted
 * - `K:events`  stream the append-only event stream (SSE ids are stream ids)
 * - `K:logs`    list   log lines as JSON (bounded)
 * - `K:hooks`   list   every hook run as JSON, in order of completion
 * - `<prefix>:<index>` zset of run names by creation time (the index for listing)
 */

type ScriptArg = string | number;
export interface RunScriptCommands {
  stowageCreateBackup(key: string, ...args: ScriptArg[]): Promise<number>;
  stowageTransitionPhase(key: string, ...args: ScriptArg[]): Promise<[number, string | null]>;
  stowageCountOnce(onceKey: string, countersKey: string, ...args: ScriptArg[]): Promise<number>;
  stowageCountOnceAndLog(onceKey: string, countersKey: string, logsKey: string, ...args: ScriptArg[]): Promise<number>;
  stowageCountOnceMany(onceKey: string, countersKey: string, entries: string): Promise<number>;
  stowageRequestCancel(recordKey: string, at: string, endedPhases: string): Promise<[number, string | null]>;
  stowageCatalogueRun(recordKey: string, countersKey: string, ...args: ScriptArg[]): Promise<number>;
}

/** Fields every run record has. */
export interface RunRecord {
  name: string;
  uid: string;
  spec: unknown;
  phase: string;
  requestId?: string;
  createdAt: number;
  startedAt?: number;
  completedAt?: number;
  cancelRequestedAt?: number;
  failureReason?: string;
  /**
   * Set once everything the run's views show is in storage: the views read it from there, and
   * Redis needs only this record and the counters (the catalogue entry).
   */
  archivedAt?: number;
  /** The namespace of a namespaced run (a Backup or Restore acting on that namespace only); absent: cluster-scoped. */
  namespace?: string;
  /**
   * Whose rights Stowage checks before using its own for this run (a spec hook's exec, a restore
   * into a mapped namespace): core's Requester. Absent: recorded before requesters existed (Stowage's own).
   */
  requester?: Requester;
}

/** A problem worth telling the user: counted once per key into `errors`/`warnings` and logged. */
export interface RunProblem {
  level: 'error' | 'warn';
  /** Counted once: a re-run job reporting the same problem does not count it twice. */
  onceKey: string;
  msg: string;
  /** Where: `namespace` (for the results file), `blockId`, `pod`, `pvb`, `reason`, ... */
  [field: string]: unknown;
}

export interface RunEvent {
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

export interface HookRunRecord {
  /** Where the hook ran: the block (backups) or the restored pod's hook job (restores). */
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
  /** A hook with retries: which try this run was (1-based) of how many it may take. */
  try?: number;
  tries?: number;
  /** The spec hook's name (backup-level hooks: their name). */
  hookName?: string;
}

/** What kind of run a RunState keeps: its key tag, index, event prefix and record encoding. */
export interface RunKind {
  /** Key tag: `bk`, `rs`. */
  tag: string;
  /** The listing index's key suffix: `backups`, `restores`. */
  index: string;
  /** Prefix of the lifecycle events: `backup` → `backup.created`, `backup.phase`, ... */
  eventPrefix: string;
  /** Phases after which nothing changes (a cancel is refused). */
  endedPhases: readonly string[];
  /** Record fields stored as JSON, and as numbers. */
  jsonFields: ReadonlySet<string>;
  numberFields: ReadonlySet<string>;
}

export interface RunStateOptions {
  redis: RedisClient;
  /** Key prefix, e.g. `stowage` in production or a unique one per test. */
  prefix: string;
  now?: () => number;
  /** Bound of the event stream and log list per run. */
  maxEvents?: number;
  maxLogLines?: number;
}

const MAX_EVENTS = 200_000;
const MAX_LOG_LINES = 100_000;
/** Keys every run has that only a running run needs (the record `rec` and counters `cnt` stay). */
const RUN_IN_FLIGHT_SUFFIXES = ['once', 'events', 'logs', 'hooks'] as const;
/**
 * What the once-set (`once`) becomes when finalize drops a run's live state: a string, so every
 * later count (SADD first, HINCRBY only when it added) fails with WRONGTYPE and leaves the
 * counters as archived — a stalled duplicate of a finished job may still be running (its lock
 * expired, another worker finished the job) and would otherwise count again into the catalogue entry.
 */
const ONCE_DROPPED = 'archived';

/**
 * A count refused by the dropped once-set (ONCE_DROPPED), said as such; any other error as it is.
 * For every script that counts once-keys of a run.
 */
export function lateCountRefused(runName: string): (err: unknown) => never {
  return (err) => {
    if (/WRONGTYPE/.test(String((err as Error)?.message))) {
      throw new UnrecoverablePipelineError(
        PipelineErrorCode.runArchived,
        `run ${runName} is archived and its live state dropped: a late count (a stalled duplicate of a finished job) is refused`,
        { cause: err },
      );
    }
    throw err;
  };
}

export class RunState<R extends RunRecord> {
  readonly redis: RedisClient;
  readonly prefix: string;
  protected readonly now: () => number;
  protected readonly maxEvents: number;
  protected readonly maxLogLines: number;

  constructor(
    opts: RunStateOptions,
    protected readonly runKind: RunKind,
  ) {
    this.redis = opts.redis;
    this.prefix = opts.prefix;
    this.now = opts.now ?? Date.now;
    this.maxEvents = opts.maxEvents ?? MAX_EVENTS;
    this.maxLogLines = opts.maxLogLines ?? MAX_LOG_LINES;
    for (const [name, def] of Object.entries(BACKUP_STATE_SCRIPTS)) {
      if (!(name in this.redis)) this.redis.defineCommand(name, def);
    }
  }

  /** The event prefix (`backup`, `restore`). */
  get kind(): string {
    return this.runKind.eventPrefix;
  }

  private get endedPhases(): readonly string[] {
    return this.runKind.endedPhases;
  }

  key(name: string, suffix: string): string {
    return runKey(this.prefix, this.runKind.tag, name, suffix);
  }

  protected get indexKey(): string {
    return runIndexKey(this.prefix, this.runKind.index);
  }

  // ---- the record ----------------------------------------------------------------------

  /** Records a new run; a second call with the same name changes nothing and says so. */
  async createRun(record: R): Promise<{ created: boolean }> {
    const fields = this.encodeRecord(record);
    const created = await this.cmd().stowageCreateBackup(this.key(record.name, 'rec'), ...fields);
    // Always (re)index: a crash between the two writes must not leave a record nobody lists.
    await this.redis.zadd(this.indexKey, 'NX', record.createdAt, record.name);
    if (created === 1) await this.appendEvent(record.name, `${this.kind}.created`, { phase: record.phase });
    return { created: created === 1 };
  }

  /** When the user asked to cancel (one field, not the whole record), or undefined. */
  async cancelRequestedAt(name: string): Promise<number | undefined> {
    const raw = await this.redis.hget(this.key(name, 'rec'), 'cancelRequestedAt');
    return raw === null ? undefined : Number(raw);
  }

  async getRun(name: string): Promise<R | undefined> {
    const raw = await this.redis.hgetall(this.key(name, 'rec'));
    if (!raw.name) return undefined;
    return this.decodeRecord(raw);
  }

  async updateRun(name: string, patch: Partial<R>): Promise<void> {
    const fields = this.encodeRecord(patch);
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
    patch: Partial<R> = {},
  ): Promise<{ moved: boolean; phase: string | undefined }> {
    const fields = this.encodeRecord(patch);
    const res = (await this.cmd().stowageTransitionPhase(this.key(name, 'rec'), to, JSON.stringify(from), ...fields)) as [
      number,
      string | null,
    ];
    const moved = res[0] === 1;
    if (moved) await this.appendEvent(name, `${this.kind}.phase`, { from: res[1], to });
    return { moved, phase: moved ? to : (res[1] ?? undefined) };
  }

  /**
   * Records that the user asked to cancel. Returns `requested: true` only the first time and only
   * while the backup has not ended; the pipeline reads `cancelRequestedAt` and winds down.
   */
  async requestCancel(name: string): Promise<{ requested: boolean; phase: string | undefined }> {
    const at = this.now();
    const res = (await this.cmd().stowageRequestCancel(this.key(name, 'rec'), String(at), JSON.stringify(this.endedPhases))) as [
      number,
      string | null,
    ];
    const requested = res[0] === 1;
    if (requested) await this.appendEvent(name, `${this.kind}.cancel-requested`, { at });
    return { requested, phase: res[1] ?? undefined };
  }

  /**
   * A page of runs, newest first. The cursor names the run listed last (`<createdAt>.<name>`, its
   * place in the index), not an offset: runs are added at the top and removed anywhere while a
   * listing reads on (filtering by phase reads until the page fills) or a client pages, and an
   * offset would then shift — list a run twice, or skip one. From a place, each run is listed once.
   */
  async listRuns(opts: { limit: number; cursor?: string; phase?: string }): Promise<{ items: R[]; nextCursor?: string }> {
    let after = opts.cursor ? decodeListCursor(opts.cursor) : undefined;
    const items: R[] = [];
    const chunk = Math.max(opts.limit, 50);
    for (;;) {
      const entries = await this.indexAfter(after, chunk);
      // One command per run, not one pipeline: on Redis Cluster runs live on different shards.
      const rows = await Promise.all(entries.map((e) => this.redis.hgetall(this.key(e.name, 'rec'))));
      for (let i = 0; i < entries.length; i++) {
        const place = entries[i] as IndexPlace;
        after = place;
        const raw = rows[i];
        if (!raw?.name) continue;
        const rec = this.decodeRecord(raw);
        if (opts.phase && rec.phase !== opts.phase) continue;
        items.push(rec);
        if (items.length === opts.limit) {
          const more = (await this.indexAfter(place, 1)).length > 0;
          return more ? { items, nextCursor: encodeListCursor(place) } : { items };
        }
      }
      if (entries.length < chunk) return { items };
    }
  }

  /** Up to `count` index entries after `after` (newest first: by score, then name, both descending, as ZREVRANGE orders them). */
  private async indexAfter(after: IndexPlace | undefined, count: number): Promise<IndexPlace[]> {
    if (!after) return placesOf(await this.redis.zrevrange(this.indexKey, 0, count - 1, 'WITHSCORES'));
    // Runs created in the same millisecond: those whose name sorts before it (Redis compares bytes; names are ASCII).
    const ties = (await this.redis.zrangebyscore(this.indexKey, after.score, after.score))
      .filter((name) => name < after.name)
      .reverse()
      .slice(0, count)
      .map((name) => ({ score: after.score, name }));
    if (ties.length === count) return ties;
    const older = await this.redis.zrevrangebyscore(
      this.indexKey,
      `(${after.score}`,
      '-inf',
      'WITHSCORES',
      'LIMIT',
      0,
      count - ties.length,
    );
    return [...ties, ...placesOf(older)];
  }

  /**
   * Adds a finished run found in storage (sync) with its counters, unless a run of that name is
   * recorded already. `added`: whether it was added now; `known`: a record of that name exists that
   * is not a catalogue entry (a running one; nothing is changed then, and it is not indexed).
   */
  async catalogueRun(record: R, counters: Readonly<Record<string, number>>): Promise<{ added: boolean; known?: 'other-record' }> {
    const fields = this.encodeRecord(record);
    const counterFields = Object.entries(counters).flatMap(([k, v]) => [k, String(v)]);
    const added = await this.cmd().stowageCatalogueRun(
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

  /** Every run name in the index, oldest first. */
  async allRunNames(): Promise<string[]> {
    return await this.redis.zrange(this.indexKey, 0, -1);
  }

  /**
   * The keys of the run's in-flight state beyond the ones every run has: `listed` keys, named by
   * one of the run's own keys (a block's or a volume operation's), and fixed key `suffixes` —
   * among them the keys that name the listed ones. None by default; BackupState and RestoreState say theirs.
   */
  protected async inFlightKeys(_name: string): Promise<{ listed: string[]; suffixes: string[] }> {
    return { listed: [], suffixes: [] };
  }

  /**
   * Drops everything of an ended run but its record and counters (the catalogue entry, with the
   * index entry), once storage holds what its views show (finalize, after `archivedAt`); the
   * once-set becomes a short string that refuses later counts (ONCE_DROPPED). Safe to repeat, and
   * after a crash midway: the listed keys go first, the keys that name them last.
   */
  async dropInFlightState(name: string): Promise<void> {
    const { listed, suffixes } = await this.inFlightKeys(name);
    for (let i = 0; i < listed.length; i += 500) await this.redis.unlink(...listed.slice(i, i + 500));
    // One transaction, so no count slips in between the once-set's drop and its string; UNLINK
    // frees a large set off Redis' main thread.
    const once = this.key(name, 'once');
    const dropped = [...RUN_IN_FLIGHT_SUFFIXES, ...suffixes].map((s) => this.key(name, s));
    const replies =
      (await this.redis
        .multi()
        .unlink(...dropped)
        .set(once, ONCE_DROPPED)
        .exec()) ?? [];
    const failed = replies.find(([err]) => err);
    if (failed) throw failed[0];
  }

  /**
   * The end of every run's finalize, backups and restores alike: `archive` writes what the ended
   * run's views show to storage (its final marker last) and returns what the record gains besides
   * `archivedAt` — or undefined when another run of the same finalize archived it meanwhile. Then
   * the record is marked archived, and only then is the in-flight state dropped. A record marked
   * archived already (a re-run, or one cut off before its drop) is not archived again: only dropped.
   */
  async archiveAndDrop(record: R, archive: () => Promise<Partial<R> | undefined>, now: () => number): Promise<void> {
    if (record.archivedAt === undefined) {
      const patch = await archive();
      // What finalize asked of storage up to here (its archive writes, the final marker last)
      // counts now: once the live state is dropped, no count is taken.
      if (patch) await this.countOnceMany(record.name, takeCurrentStorageCost());
      if (patch) await this.updateRun(record.name, { ...patch, archivedAt: now() });
      // No patch: another run archived it, so archivedAt is set and dropping here is safe too.
    }
    await this.dropInFlightState(record.name);
  }

  /** Removes every key of the run (in-flight state, record, counters) and its index entry. */
  protected async deleteRun(name: string): Promise<void> {
    const { listed, suffixes } = await this.inFlightKeys(name);
    const keys = [...listed, ...['rec', 'cnt', ...RUN_IN_FLIGHT_SUFFIXES, ...suffixes].map((s) => this.key(name, s))];
    for (let i = 0; i < keys.length; i += 500) await this.redis.del(...keys.slice(i, i + 500));
    await this.redis.zrem(this.indexKey, name);
  }

  // ---- volume operations (PVBs, PVRs) ------------------------------------------------------

  /**
   * Records or updates a volume operation's state (`<kind>:<op>` hash, listed in the `<kind>set`
   * set). A caller that read the operation's record (`registered`: its registration wrote the set
   * entry) sets the fields alone: one HSET instead of MULTI, HSET, SADD, EXEC (building an ioredis
   * MULTI copies every script BullMQ defined on the connection; a watch job's last run does this).
   */
  protected async updateVolumeOp(
    name: string,
    kind: 'pvb' | 'pvr',
    opName: string,
    patch: Readonly<Record<string, unknown>>,
    registered: boolean,
  ): Promise<void> {
    const fields = encodeJsonHash({ name: opName, ...patch });
    const key = this.key(name, `${kind}:${opName}`);
    if (registered) {
      await this.redis.hset(key, ...fields);
      return;
    }
    await this.redis
      .multi()
      .hset(key, ...fields)
      .sadd(this.key(name, `${kind}set`), opName)
      .exec();
  }

  // ---- counters ------------------------------------------------------------------------

  /** Adds `by` to counter `field` unless `onceKey` was counted before. Returns whether it counted. */
  async countOnce(name: string, onceKey: string, field: string, by = 1): Promise<boolean> {
    const res = (await this.cmd()
      .stowageCountOnce(this.key(name, 'once'), this.key(name, 'cnt'), onceKey, field, by)
      .catch(lateCountRefused(name))) as number;
    return res === 1;
  }

  /** countOnce, and `line` logged when it counted now (one round trip, both or neither). */
  async countOnceAndLog(name: string, onceKey: string, field: string, line: Omit<LogLine, 'at'> & { at?: number }): Promise<boolean> {
    const full = { at: this.now(), ...line };
    const res = await this.cmd()
      .stowageCountOnceAndLog(
        this.key(name, 'once'),
        this.key(name, 'cnt'),
        this.key(name, 'logs'),
        onceKey,
        field,
        1,
        JSON.stringify(full),
        this.maxLogLines,
      )
      .catch(lateCountRefused(name));
    return res === 1;
  }

  /** Counts many keys once each in one round trip; returns how many counted now. */
  async countOnceMany(name: string, entries: ReadonlyArray<{ onceKey: string; field: string; by?: number }>): Promise<number> {
    if (entries.length === 0) return 0;
    const payload = JSON.stringify(entries.map((e) => [e.onceKey, e.field, e.by ?? 1]));
    return (await this.cmd()
      .stowageCountOnceMany(this.key(name, 'once'), this.key(name, 'cnt'), payload)
      .catch(lateCountRefused(name))) as number;
  }

  /**
   * Records an error or a warning: counted once per `onceKey` into `errors`/`warnings`, and
   * logged (the results file and `backup logs` read the log). Returns whether it was new.
   */
  async recordProblem(name: string, problem: RunProblem): Promise<boolean> {
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
  async readEvents(
    name: string,
    afterId: string,
    opts: { count?: number; blockMs?: number; client?: RedisClient } = {},
  ): Promise<RunEvent[]> {
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
    // Sent back to back on one connection, no MULTI: the trim only bounds the list, so a line
    // pushed without its trim (a crash in between) is harmless; the next line's trim catches up.
    await Promise.all([this.redis.rpush(key, JSON.stringify(full)), this.redis.ltrim(key, -this.maxLogLines, -1)]);
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

  // ---- volume operations (a backup's PVBs, a restore's PVRs) ------------------------------

  /** One volume operation's live record (`K:<kind>:<op>` hash of JSON fields), or undefined. */
  protected async getVolumeOp<T>(name: string, kind: 'pvb' | 'pvr', opName: string): Promise<T | undefined> {
    const raw = await this.redis.hgetall(this.key(name, `${kind}:${opName}`));
    return raw.name ? decodeJsonHash<T>(raw) : undefined;
  }

  /** Several volume operations' records in one round trip, in the order asked. */
  protected async getVolumeOps<T>(name: string, kind: 'pvb' | 'pvr', opNames: readonly string[]): Promise<Array<T | undefined>> {
    if (opNames.length === 0) return [];
    const pipe = this.redis.pipeline();
    for (const op of opNames) pipe.hgetall(this.key(name, `${kind}:${op}`));
    const rows = (await pipe.exec()) ?? [];
    return rows.map((r) => {
      const raw = r[1] as Record<string, string> | undefined;
      return raw?.name ? decodeJsonHash<T>(raw) : undefined;
    });
  }

  /** Every volume operation the run registered (`K:<kind>set`), sorted. */
  protected async allVolumeOpNames(name: string, kind: 'pvb' | 'pvr'): Promise<string[]> {
    return (await this.redis.smembers(this.key(name, `${kind}set`))).sort();
  }

  // ioredis adds the commands defined with defineCommand at run time.
  protected cmd<C = RunScriptCommands>(): RedisClient & C {
    return this.redis as RedisClient & C;
  }

  protected encodeRecord(rec: Partial<R>): string[] {
    const out: string[] = [];
    for (const [k, v] of Object.entries(rec)) {
      if (v === undefined) continue;
      out.push(k, this.runKind.jsonFields.has(k) ? JSON.stringify(v) : String(v));
    }
    return out;
  }

  protected decodeRecord(raw: Record<string, string>): R {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(raw)) {
      if (this.runKind.jsonFields.has(k)) out[k] = JSON.parse(v);
      else if (this.runKind.numberFields.has(k)) out[k] = Number(v);
      else out[k] = v;
    }
    return out as unknown as R;
  }
}

export function flatToObject(flat: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i] as string] = flat[i + 1] as string;
  return out;
}

/** Hash fields `[k1, json1, k2, json2, …]` of a record's defined values (decodeJsonHash reads them back). */
export function encodeJsonHash(record: Readonly<Record<string, unknown>>): string[] {
  const fields: string[] = [];
  for (const [k, v] of Object.entries(record)) if (v !== undefined) fields.push(k, JSON.stringify(v));
  return fields;
}

export function decodeJsonHash<T>(raw: Record<string, string>): T {
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

function decodeEvent(id: string, flat: string[]): RunEvent {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i] as string] = flat[i + 1] as string;
  return { id, type: f.type ?? 'unknown', at: Number(f.at ?? 0), data: f.data ? (JSON.parse(f.data) as Record<string, unknown>) : {} };
}

/** A `running` hook run that will never report: its job was cut off before the exec finished. */
export function interruptedRun(run: HookRunRecord, why: string): HookRunRecord {
  return { ...run, outcome: 'interrupted', message: `cut off before it finished (${why}; the worker stopped or lost the job)` };
}

/** A run's place in the index: its score (createdAt) and name. */
interface IndexPlace {
  score: number;
  name: string;
}

function placesOf(withScores: string[]): IndexPlace[] {
  const out: IndexPlace[] = [];
  for (let i = 0; i + 1 < withScores.length; i += 2) out.push({ name: withScores[i] as string, score: Number(withScores[i + 1]) });
  return out;
}

/** `<score>.<name>`: the run a page ended with (run names are DNS-1123 names, without spaces). */
function encodeListCursor(place: IndexPlace): string {
  return `${place.score}.${place.name}`;
}

/** The place a cursor names; one that names none lists from the top. */
function decodeListCursor(cursor: string): IndexPlace | undefined {
  const m = /^(\d{1,15})\.(.+)$/.exec(cursor);
  return m ? { score: Number(m[1]), name: m[2] as string } : undefined;
}
