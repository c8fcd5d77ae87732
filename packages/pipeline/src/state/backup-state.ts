import { ENDED_BACKUP_PHASES } from '@stowage/core';
import { PipelineError, PipelineErrorCode } from '../errors.js';
import { BlockPlanEncoder, decodeStoredBlock, dictionaryIdOf, PlanFormatError } from './plan-codec.js';
import {
  decodeJsonHash,
  encodeJsonHash,
  flatToObject,
  type HookRunRecord,
  interruptedRun,
  type LogLine,
  lateCountRefused,
  type RunEvent,
  type RunProblem,
  type RunRecord,
  RunState,
  type RunStateOptions,
} from './run-state.js';

export { type HookRunRecord, interruptedRun, type LogLine };

/**
 * The one module that reads and writes a backup's state in Redis: the run state shared with
 * restores (RunState: record, counters, events, logs, hook runs) plus blocks, plans and PVBs.
 *
 * Keys (K = `<prefix>:bk:{<name>}`):
 * - `K:rec`     hash   the backup record (name, uid, spec JSON, phase, timestamps, ...)
 * - `K:cnt`     hash   counters (items, hooks, PVBs by phase, errors, warnings, blocks)
 * - `K:once`    set    counter keys already counted
 * - `K:events`  stream the append-only event stream (SSE ids are stream ids)
 * - `K:logs`    list   log lines as JSON (bounded)
 * - `K:border`  list   block ids in plan order
 * - `K:plan`    hash   blockId → the block's plan (pods, items, hooks, volume decisions) and its
 *                      item manifests, compressed (plan-codec.ts)
 * - `K:dict`    hash   dictionary id → a dictionary the plan values are compressed with
 * - `K:shape`   string byte i: the shape of block i of `K:border`, `s` (solo: one item-block job)
 *                      or `p` (post-hooks ← item-block); written with the plans, so the dispatch
 *                      window adds blocks without decoding their plans (a zero byte, or none:
 *                      unknown, e.g. planned by an older version; its plan is decoded then)
 * - `K:items`   hash   blockId → item manifests JSON, only of backups planned before plan-codec.ts
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

/** A block's shape in `K:shape`: one item-block job (solo), or the post-hooks ← item-block pair. */
export const SHAPE_SOLO = 's';
export const SHAPE_PAIR = 'p';

interface StateScriptCommands {
  stowagePutPlans(
    planKey: string,
    orderKey: string,
    dictKey: string,
    shapeKey: string,
    ...args: Array<ScriptArg | Buffer>
  ): Promise<number>;
  stowageRegisterPvb(pvbKey: string, setKey: string, ...args: ScriptArg[]): Promise<number>;
  stowageRegisterPvbs(numberOfKeys: number, ...keysAndArgs: string[]): Promise<string[][]>;
  stowageReadBlockBuffer(
    recordKey: string,
    planKey: string,
    blockKey: string,
    itemsKey: string,
    blockId: string,
  ): Promise<[Array<Buffer | null>, Buffer, Buffer[], Buffer]>;
  stowageReadBlockTailBuffer(
    planKey: string,
    blockKey: string,
    blockId: string,
    pvbKeyPrefix: string,
  ): Promise<[Buffer, Buffer[], Buffer[][]]>;
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
  /** The fields of the backup record a block needs (undefined: no record). */
  record: Pick<BackupRecord, 'cancelRequestedAt' | 'fsDeadlineAt'> | undefined;
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

/** A problem worth telling the user: counted once per key into `errors`/`warnings` and logged. */
export type BackupProblem = RunProblem;
export type BackupEvent = RunEvent;

export interface BackupRecord extends RunRecord {
  fsDeadlineAt?: number;
  /** Set by plan when every block was added (a re-run of plan after this changes nothing). */
  planCompletedAt?: number;
  planSummary?: unknown;
  /** PVBs by phase at the end (kept with the catalogue entry, since the PVB records are dropped). */
  pvbPhases?: Record<string, number>;
  /** What the backup-level hooks did, per phase, with every run (hooks/backup-hooks.ts). */
  backupHooks?: unknown;
  /** The backup's own labels and annotations (Velero's metadata), as submitted; absent when none. */
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
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

export type BackupStateOptions = RunStateOptions;

const BACKUP_RUN_KIND = {
  tag: 'bk',
  index: 'backups',
  eventPrefix: 'backup',
  endedPhases: ENDED_BACKUP_PHASES,
  jsonFields: new Set(['spec', 'planSummary', 'pvbPhases', 'backupHooks', 'labels', 'annotations', 'requester']),
  numberFields: new Set(['createdAt', 'startedAt', 'completedAt', 'fsDeadlineAt', 'cancelRequestedAt', 'planCompletedAt', 'archivedAt']),
};

export class BackupState extends RunState<BackupRecord> {
  constructor(opts: BackupStateOptions) {
    super(opts, BACKUP_RUN_KIND);
  }

  // ---- backup record (the run's, under the backup's names) -------------------------------

  /** Records a new backup; a second call with the same name changes nothing and says so. */
  createBackup(record: BackupRecord): Promise<{ created: boolean }> {
    return this.createRun(record);
  }

  getBackup(name: string): Promise<BackupRecord | undefined> {
    return this.getRun(name);
  }

  updateBackup(name: string, patch: Partial<BackupRecord>): Promise<void> {
    return this.updateRun(name, patch);
  }

  listBackups(opts: { limit: number; cursor?: string; phase?: string }): Promise<{ items: BackupRecord[]; nextCursor?: string }> {
    return this.listRuns(opts);
  }

  /** Adds a finished backup found in storage (backup sync) with its counters: RunState.catalogueRun. */
  catalogueBackup(record: BackupRecord, counters: Readonly<Record<string, number>>): Promise<{ added: boolean; known?: 'other-record' }> {
    return this.catalogueRun(record, counters);
  }

  /** Every backup name in the catalogue (the index), oldest first. */
  allBackupNames(): Promise<string[]> {
    return this.allRunNames();
  }

  /** The backup's own in-flight keys (RunState.dropInFlightState): blocks and PVBs, named by the block order and the PVB set. */
  protected override async inFlightKeys(name: string): Promise<{ listed: string[]; suffixes: string[] }> {
    const [blockIds, pvbNames] = await Promise.all([this.redis.lrange(this.key(name, 'border'), 0, -1), this.allPvbNames(name)]);
    return {
      listed: [...blockIds.map((id) => this.key(name, `b:${id}`)), ...pvbNames.map((p) => this.key(name, `pvb:${p}`))],
      suffixes: ['plan', 'items', 'dict', 'shape', 'border', 'pvbset', 'win', 'wclaim'],
    };
  }

  /** Removes every key of the backup and its index entry. */
  deleteBackup(name: string): Promise<void> {
    return this.deleteRun(name);
  }

  // ---- plan ----------------------------------------------------------------------------

  /**
   * Stores a batch of block plans with their item manifests, in plan order, compressed
   * (plan-codec.ts), and each block's shape when given (`solo`: no post-hooks job; see `K:shape`).
   * Idempotent per block: a block stored before keeps its plan, manifests and shape.
   * One plan run passes one `encoder`, so its batches share what it learned.
   */
  async putBlockPlans(
    name: string,
    blocks: ReadonlyArray<{ id: string; plan: unknown; items: unknown; solo?: boolean }>,
    encoder: BlockPlanEncoder = new BlockPlanEncoder(),
  ): Promise<void> {
    if (blocks.length === 0) return;
    const { values, dictionary } = await encoder.encodeBatch(blocks);
    if (dictionary) rememberDictionary(dictionary.id, dictionary.bytes);
    // One character per block, or none (a shape is never guessed: unknown means decode the plan).
    const shapes = blocks.every((b) => b.solo !== undefined) ? blocks.map((b) => (b.solo ? SHAPE_SOLO : SHAPE_PAIR)).join('') : '';
    await this.cmd<StateScriptCommands>().stowagePutPlans(
      this.key(name, 'plan'),
      this.key(name, 'border'),
      this.key(name, 'dict'),
      this.key(name, 'shape'),
      JSON.stringify(blocks.map((b) => b.id)),
      shapes,
      ...values,
      ...(dictionary ? [dictionary.id, dictionary.bytes] : []),
    );
  }

  /** The plans of several blocks (one HMGET), in the order asked. */
  async getBlockPlans<T = unknown>(name: string, blockIds: readonly string[]): Promise<Array<T | undefined>> {
    if (blockIds.length === 0) return [];
    return await this.decodePlans<T>(name, await this.redis.hmgetBuffer(this.key(name, 'plan'), ...blockIds));
  }

  async getBlockPlan<T = unknown>(name: string, blockId: string): Promise<T | undefined> {
    return (await this.getBlockPlans<T>(name, [blockId]))[0];
  }

  async getBlockItems<T = unknown>(name: string, blockId: string): Promise<T | undefined> {
    const stored = await this.decodeStored<unknown, T>(name, await this.redis.hgetBuffer(this.key(name, 'plan'), blockId));
    if (!stored?.legacy) return stored?.items;
    const raw = await this.redis.hget(this.key(name, 'items'), blockId);
    return raw ? (JSON.parse(raw) as T) : undefined;
  }

  /** Plans from stored values (K:plan fields, as read by a script or HMGET), undefined where missing. */
  async decodePlans<T = unknown>(name: string, values: ReadonlyArray<Buffer | null | undefined>): Promise<Array<T | undefined>> {
    await this.loadDictionaries(name, values);
    return await Promise.all(values.map(async (v) => (await this.decodeStored<T, unknown>(name, v))?.plan));
  }

  /** A stored K:plan value decoded (an empty or missing value is undefined). */
  private async decodeStored<P, I>(
    name: string,
    value: Buffer | null | undefined,
  ): Promise<{ plan: P; items: I | undefined; legacy: boolean } | undefined> {
    if (!value || value.length === 0) return undefined;
    const dictionaryId = dictionaryIdOf(value);
    if (dictionaryId !== undefined && !knownDictionaries.has(dictionaryId)) await this.loadDictionaries(name, [value]);
    try {
      return decodeStoredBlock<P, I>(value, dictionaryId !== undefined ? knownDictionaries.get(dictionaryId) : undefined);
    } catch (err) {
      if (err instanceof PlanFormatError) {
        throw new PipelineError(PipelineErrorCode.planUnreadable, `backup ${name}: ${err.message}`, { cause: err });
      }
      throw err;
    }
  }

  /** Fetches (one HMGET) the dictionaries the values need that this process has not seen. */
  private async loadDictionaries(name: string, values: ReadonlyArray<Buffer | null | undefined>): Promise<void> {
    const missing = new Set<string>();
    for (const v of values) {
      const id = v && v.length > 0 ? dictionaryIdOf(v) : undefined;
      if (id !== undefined && !knownDictionaries.has(id)) missing.add(id);
    }
    if (missing.size === 0) return;
    const ids = [...missing];
    const found = await this.redis.hmgetBuffer(this.key(name, 'dict'), ...ids);
    ids.forEach((id, i) => {
      const bytes = found[i];
      if (bytes) rememberDictionary(id, bytes);
    });
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
    const { keys, args } = this.blockStepCall(name, blockId, step);
    return (await this.cmd<StateScriptCommands>()
      .stowageBlockStep(...keys, ...args)
      .catch(lateCountRefused(name))) as number;
  }

  /** The keys and arguments of blockStep's script (BLOCK_STEP_LUA), for scripts that run it with more. */
  blockStepCall(name: string, blockId: string, step: BlockStep): { keys: [string, string, string, string]; args: [string, string] } {
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
    return {
      keys: [this.key(name, `b:${blockId}`), this.key(name, 'once'), this.key(name, 'cnt'), this.key(name, 'events')],
      args: [payload, String(this.maxEvents)],
    };
  }

  /** What a block needs of the backup record, its plan, its live state and its item manifests, in one round trip. */
  async readBlockContext<P = unknown, I = unknown>(name: string, blockId: string): Promise<BlockContext<P, I>> {
    const [recFlat, planValue, blockFlat, legacyItems] = await this.cmd<StateScriptCommands>().stowageReadBlockBuffer(
      this.key(name, 'rec'),
      this.key(name, 'plan'),
      this.key(name, `b:${blockId}`),
      this.key(name, 'items'),
      blockId,
    );
    const [recName, cancelRequestedAt, fsDeadlineAt] = recFlat;
    const block = flatToObject(blockFlat.map(String));
    const stored = await this.decodeStored<P, I>(name, planValue);
    return {
      record: recName
        ? {
            ...(cancelRequestedAt ? { cancelRequestedAt: Number(cancelRequestedAt.toString()) } : {}),
            ...(fsDeadlineAt ? { fsDeadlineAt: Number(fsDeadlineAt.toString()) } : {}),
          }
        : undefined,
      plan: stored?.plan,
      block: block?.id ? decodeJsonHash<BlockStateRecord>(block) : undefined,
      items: stored?.legacy ? (legacyItems.length > 0 ? (JSON.parse(legacyItems.toString('utf8')) as I) : undefined) : stored?.items,
    };
  }

  /** A block's plan, its live state and the state of every PVB it names, in one round trip. */
  async readBlockTail<P = unknown>(name: string, blockId: string): Promise<BlockTail<P>> {
    const [planValue, blockFlat, pvbFlats] = await this.cmd<StateScriptCommands>().stowageReadBlockTailBuffer(
      this.key(name, 'plan'),
      this.key(name, `b:${blockId}`),
      blockId,
      this.key(name, 'pvb:'),
    );
    const block = flatToObject(blockFlat.map(String));
    return {
      plan: (await this.decodeStored<P, unknown>(name, planValue))?.plan,
      block: block?.id ? decodeJsonHash<BlockStateRecord>(block) : undefined,
      pvbs: pvbFlats.map((flat) => {
        const raw = flatToObject(flat.map(String));
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

  /** Records or updates a PVB's state (RunState.updateVolumeOp; `registered`: the caller read its record). */
  updatePvb(name: string, pvbName: string, patch: Partial<PvbStateRecord>, opts: { registered?: boolean } = {}): Promise<void> {
    return this.updateVolumeOp(name, 'pvb', pvbName, patch, opts.registered === true);
  }

  /**
   * Registers a PVB as pending before it is created (a fast PVB must never finish unregistered).
   * A PVB known already keeps its state, so a re-run block cannot reset a finished PVB.
   */
  async registerPvb(name: string, pvbName: string, record: Omit<PvbStateRecord, 'name'>): Promise<{ registered: boolean }> {
    const fields = encodeJsonHash({ name: pvbName, ...record });
    const res = await this.cmd<StateScriptCommands>().stowageRegisterPvb(
      this.key(name, `pvb:${pvbName}`),
      this.key(name, 'pvbset'),
      pvbName,
      ...fields,
    );
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
    const rows = await this.cmd<StateScriptCommands>().stowageRegisterPvbs(
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

  getPvb(name: string, pvbName: string): Promise<PvbStateRecord | undefined> {
    return this.getVolumeOp<PvbStateRecord>(name, 'pvb', pvbName);
  }

  getPvbs(name: string, pvbNames: readonly string[]): Promise<Array<PvbStateRecord | undefined>> {
    return this.getVolumeOps<PvbStateRecord>(name, 'pvb', pvbNames);
  }

  allPvbNames(name: string): Promise<string[]> {
    return this.allVolumeOpNames(name, 'pvb');
  }
}

/**
 * Plan dictionaries this process has read or written, by id. An id is a hash of the bytes, so an
 * entry is right for every backup; bounded (oldest out first), as each is up to 24 KiB.
 */
const knownDictionaries = new Map<string, Buffer>();
const KNOWN_DICTIONARIES_MAX = 64;

function rememberDictionary(id: string, bytes: Buffer): void {
  knownDictionaries.delete(id);
  knownDictionaries.set(id, bytes);
  if (knownDictionaries.size > KNOWN_DICTIONARIES_MAX) {
    const oldest = knownDictionaries.keys().next().value;
    if (oldest !== undefined) knownDictionaries.delete(oldest);
  }
}
