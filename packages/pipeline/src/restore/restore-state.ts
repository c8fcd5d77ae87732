import { ENDED_RESTORE_PHASES } from '@stowage/core';
import type { RedisClient } from '@stowage/queue';
import { lateCountRefused, type RunEvent, type RunRecord, RunState, type RunStateOptions } from '../state/run-state.js';
import type { PlannedRestoreItem, RestorePodPlan, RestoreTierPlan } from './restore-plan-types.js';

/**
 * A restore's state in Redis: the run state it shares with backups (record, CAS phases,
 * counters, events, logs, hook runs) plus its tiers, item batches, per-pod plans, per-item
 * results and PVR records.
 *
 * Keys (K = `<prefix>:rs:{<name>}`), besides RunState's:
 * - `K:tiers`    hash  tier index → tier plan JSON (group-resources, wait, batches, items)
 * - `K:batches`  hash  `<tier>.<batch>` → the batch's items JSON (transformed objects; dropped at finalize)
 * - `K:pods`     hash  `<target ns>/<pod>` → the pod's volumes to restore and its post-restore hooks
 * - `K:results`  hash  item key → `{outcome, reason?, at}` (the first final outcome of each item)
 * - `K:pvr:<n>`  hash  one PVR's live state; `K:pvrset` set of PVR names
 * - `<prefix>:restores` zset of restore names by creation time
 *
 * Once a restore has ended and restore-finalize has archived it to storage (restore-storage.ts),
 * only `K:rec` (with `archivedAt`) and `K:cnt` stay — the catalogue entry the listing, the metrics
 * and restore sync read — with the index entry; `dropInFlightState` removes the rest, as for backups.
 */

export interface RestoreRecord extends RunRecord {
  backupName: string;
  /** When volume restores stop being waited for (itemOperationTimeout from the start), epoch ms. */
  deadlineAt?: number;
  planCompletedAt?: number;
  /** Number of tiers the plan made. */
  tiers?: number;
  planSummary?: unknown;
}

export type ItemOutcome = 'created' | 'updated' | 'exists-skipped' | 'failed';

export interface ItemResult {
  outcome: ItemOutcome;
  /** Why it failed, or what differed for an existing object left alone. */
  reason?: string | undefined;
  at: number;
}

export interface PvrStateRecord {
  name: string;
  podNamespace: string;
  podName: string;
  podUid: string;
  volume: string;
  snapshotID: string;
  phase: string;
  node?: string;
  message?: string;
  totalBytes?: number;
  bytesDone?: number;
  startTimestamp?: string;
  completionTimestamp?: string;
  timedOut?: boolean;
  [field: string]: unknown;
}

const RESTORE_RUN_KIND = {
  tag: 'rs',
  index: 'restores',
  eventPrefix: 'restore',
  endedPhases: ENDED_RESTORE_PHASES,
  jsonFields: new Set(['spec', 'planSummary', 'requester']),
  numberFields: new Set([
    'createdAt',
    'startedAt',
    'completedAt',
    'cancelRequestedAt',
    'planCompletedAt',
    'deadlineAt',
    'tiers',
    'archivedAt',
  ]),
};

/** Counter of each item outcome (`progress.itemsRestored` counts all but failed). */
export const ITEM_OUTCOME_COUNTERS: Readonly<Record<ItemOutcome, string>> = {
  created: 'itemsCreated',
  updated: 'itemsUpdated',
  'exists-skipped': 'itemsSkipped',
  failed: 'itemsFailed',
};

/** The most a restore plan's write puts in one Redis transaction (values, approximately in bytes). */
export const PLAN_WRITE_BYTES = 1024 * 1024;

export class RestoreState extends RunState<RestoreRecord> {
  constructor(opts: RunStateOptions) {
    super(opts, RESTORE_RUN_KIND);
  }

  createRestore(record: RestoreRecord): Promise<{ created: boolean }> {
    return this.createRun(record);
  }

  getRestore(name: string): Promise<RestoreRecord | undefined> {
    return this.getRun(name);
  }

  listRestores(opts: { limit: number; cursor?: string; phase?: string }): Promise<{ items: RestoreRecord[]; nextCursor?: string }> {
    return this.listRuns(opts);
  }

  /** The restore's own in-flight keys (RunState.dropInFlightState): PVRs, named by the PVR set. */
  protected override async inFlightKeys(name: string): Promise<{ listed: string[]; suffixes: string[] }> {
    const pvrNames = await this.allPvrNames(name);
    return {
      listed: pvrNames.map((p) => this.key(name, `pvr:${p}`)),
      suffixes: ['tiers', 'batches', 'pods', 'results', 'pvrset'],
    };
  }

  /** Adds a finished restore found in storage (restore sync) with its counters: RunState.catalogueRun. */
  catalogueRestore(record: RestoreRecord, counters: Readonly<Record<string, number>>): Promise<{ added: boolean; known?: 'other-record' }> {
    return this.catalogueRun(record, counters);
  }

  /** Removes every key of the restore and its index entry. */
  deleteRestore(name: string): Promise<void> {
    return this.deleteRun(name);
  }

  // ---- plan ----------------------------------------------------------------------------

  /**
   * Stores a restore's plan in transactions of at most PLAN_WRITE_BYTES of values each, tiers last
   * (nothing reads the plan before planCompletedAt; a re-run of the plan writes the same fields).
   * One MULTI for a 300k-item plan was hundreds of MB in one transaction into a `noeviction` Redis:
   * Redis buffered all of it at once (issue #45).
   */
  async putPlan(
    name: string,
    plan: {
      tiers: readonly RestoreTierPlan[];
      batches: ReadonlyMap<string, readonly PlannedRestoreItem[]>;
      pods: readonly RestorePodPlan[];
    },
  ): Promise<{ transactions: number }> {
    const writer = this.planWriter(name);
    for (const [id, items] of plan.batches) await writer.batch(id, items);
    for (const pod of plan.pods) await writer.pod(pod);
    for (const tier of plan.tiers) await writer.tier(tier);
    await writer.flush();
    return { transactions: writer.transactions };
  }

  /** A writer of the restore's plan, part by part as the plan is made (the restore plan's process streams it). */
  planWriter(name: string): RestorePlanWriter {
    return new RestorePlanWriter(this.redis, {
      batches: this.key(name, 'batches'),
      pods: this.key(name, 'pods'),
      tiers: this.key(name, 'tiers'),
    });
  }

  async getTier(name: string, tier: number): Promise<RestoreTierPlan | undefined> {
    const raw = await this.redis.hget(this.key(name, 'tiers'), String(tier));
    return raw ? (JSON.parse(raw) as RestoreTierPlan) : undefined;
  }

  async getTiers(name: string): Promise<RestoreTierPlan[]> {
    const raw = await this.redis.hgetall(this.key(name, 'tiers'));
    return Object.values(raw)
      .map((v) => JSON.parse(v) as RestoreTierPlan)
      .sort((a, b) => a.index - b.index);
  }

  async getBatch(name: string, tier: number, batch: number): Promise<PlannedRestoreItem[] | undefined> {
    const raw = await this.redis.hget(this.key(name, 'batches'), `${tier}.${batch}`);
    return raw ? (JSON.parse(raw) as PlannedRestoreItem[]) : undefined;
  }

  async dropBatches(name: string): Promise<void> {
    await this.redis.unlink(this.key(name, 'batches'));
  }

  async getPodPlan(name: string, namespace: string, pod: string): Promise<RestorePodPlan | undefined> {
    const raw = await this.redis.hget(this.key(name, 'pods'), `${namespace}/${pod}`);
    return raw ? (JSON.parse(raw) as RestorePodPlan) : undefined;
  }

  async getPodPlans(name: string): Promise<RestorePodPlan[]> {
    const raw = await this.redis.hgetall(this.key(name, 'pods'));
    return Object.values(raw).map((v) => JSON.parse(v) as RestorePodPlan);
  }

  // ---- item results --------------------------------------------------------------------

  /** The results already recorded for these item keys (a re-run batch skips them). */
  async itemResultsOf(name: string, keys: readonly string[]): Promise<Array<ItemResult | undefined>> {
    if (keys.length === 0) return [];
    const rows = await this.redis.hmget(this.key(name, 'results'), ...keys);
    return rows.map((r) => (r ? (JSON.parse(r) as ItemResult) : undefined));
  }

  /**
   * Records each item's outcome once (the first final outcome wins: HSETNX) and counts it once
   * per key: `items<Outcome>`, and `itemsRestored` unless it failed. One MULTI (atomic): a job
   * killed here leaves either both the results and their counts or neither — a re-run batch
   * passes over items with a result, so a result without its count would never be counted.
   */
  async recordItemResults(name: string, results: ReadonlyArray<{ key: string; result: ItemResult }>): Promise<void> {
    if (results.length === 0) return;
    const once = results.flatMap(({ key, result }) => [
      [`item:${key}`, ITEM_OUTCOME_COUNTERS[result.outcome], 1],
      ...(result.outcome === 'failed' ? [] : [[`item-restored:${key}`, 'itemsRestored', 1]]),
    ]);
    const multi = this.redis.multi() as ReturnType<RedisClient['multi']> & {
      stowageCountOnceMany(onceKey: string, countersKey: string, entries: string): unknown;
    };
    for (const { key, result } of results) multi.hsetnx(this.key(name, 'results'), key, JSON.stringify(result));
    multi.stowageCountOnceMany(this.key(name, 'once'), this.key(name, 'cnt'), JSON.stringify(once));
    const replies = (await multi.exec()) ?? [];
    const failed = replies.find(([err]) => err);
    if (failed) lateCountRefused(name)(failed[0]);
  }

  /** Every item result, by key (for `GET /v1/restores/:name/items` and the results file). */
  async itemResults(name: string): Promise<Record<string, ItemResult>> {
    const raw = await this.redis.hgetall(this.key(name, 'results'));
    const out: Record<string, ItemResult> = {};
    for (const [k, v] of Object.entries(raw)) out[k] = JSON.parse(v) as ItemResult;
    return out;
  }

  // ---- PVRs ----------------------------------------------------------------------------

  /** Records or updates a PVR's state (RunState.updateVolumeOp; `registered`: the caller read its record). */
  updatePvr(name: string, pvrName: string, patch: Partial<PvrStateRecord>, opts: { registered?: boolean } = {}): Promise<void> {
    return this.updateVolumeOp(name, 'pvr', pvrName, patch, opts.registered === true);
  }

  /** Registers a PVR before it is created, unless known already (a re-run keeps its phase). */
  async registerPvr(name: string, record: PvrStateRecord): Promise<void> {
    const key = this.key(name, `pvr:${record.name}`);
    const multi = this.redis.multi().sadd(this.key(name, 'pvrset'), record.name);
    for (const [field, value] of Object.entries(record)) if (value !== undefined) multi.hsetnx(key, field, JSON.stringify(value));
    await multi.exec();
  }

  getPvr(name: string, pvrName: string): Promise<PvrStateRecord | undefined> {
    return this.getVolumeOp<PvrStateRecord>(name, 'pvr', pvrName);
  }

  getPvrs(name: string, pvrNames: readonly string[]): Promise<Array<PvrStateRecord | undefined>> {
    return this.getVolumeOps<PvrStateRecord>(name, 'pvr', pvrNames);
  }

  allPvrNames(name: string): Promise<string[]> {
    return this.allVolumeOpNames(name, 'pvr');
  }
}

export type { RedisClient, RunEvent as RestoreEvent };

/** Writes a plan's fields into Redis in transactions of at most PLAN_WRITE_BYTES of values each; `flush` sends the last one. */
export class RestorePlanWriter {
  private multi: ReturnType<RedisClient['multi']>;
  private bytes = 0;
  transactions = 0;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: { batches: string; pods: string; tiers: string },
  ) {
    this.multi = redis.multi();
  }

  batch(id: string, items: readonly PlannedRestoreItem[]): Promise<void> {
    return this.batchJson(id, JSON.stringify(items));
  }

  /** A batch already serialized (the plan's process sends it so). */
  batchJson(id: string, itemsJson: string): Promise<void> {
    return this.put(this.keys.batches, id, itemsJson);
  }

  pod(pod: RestorePodPlan): Promise<void> {
    return this.put(this.keys.pods, `${pod.namespace}/${pod.name}`, JSON.stringify(pod));
  }

  tier(tier: RestoreTierPlan): Promise<void> {
    return this.put(this.keys.tiers, String(tier.index), JSON.stringify(tier));
  }

  async flush(): Promise<void> {
    if (this.bytes === 0) return;
    const multi = this.multi;
    this.multi = this.redis.multi();
    this.bytes = 0;
    await multi.exec();
    this.transactions++;
  }

  private async put(key: string, field: string, value: string): Promise<void> {
    if (this.bytes > 0 && this.bytes + value.length > PLAN_WRITE_BYTES) await this.flush();
    this.multi.hset(key, field, value);
    this.bytes += value.length + field.length;
  }
}
