import type { RedisClient } from '@stowage/queue';
import { JobName } from '@stowage/queue';
import type { Queue } from 'bullmq';

/**
 * The volume repository as backup deletion needs it. `@stowage/repository`'s `Repository` fits
 * (`forget`, `prune`); the hosting process opens it with the repository key and binds the grace
 * period. Without one, deleting a backup leaves its repository snapshots (as before).
 */
export interface RepositoryGc {
  /** Deletes the snapshots carrying all these tags (`{backup: name}`); idempotent. */
  forget(tags: Readonly<Record<string, string>>): Promise<string[]>;
  /** One prune run (README of @stowage/repository, "Prune"); fails with REPO_PRUNE_LOCKED while another runs. */
  prune(): Promise<PruneRunSummary>;
  /** The prune grace period: retired data is deleted by the first run this long after it was retired. */
  readonly graceMs: number;
}

/** What the metrics show of a prune run (a subset of @stowage/repository's PruneSummary). */
export interface PruneRunSummary {
  readonly snapshots: number;
  readonly liveChunks: number;
  readonly packsRewritten: number;
  readonly packsRetired: number;
  readonly packsDeleted: number;
  readonly bytesRetired: number;
  readonly bytesDeleted: number;
  readonly bytesWritten: number;
  readonly bytesFreed: number;
  readonly chunksRescued: number;
  readonly batchesPending: number;
  readonly durationMs: number;
}

export const PRUNE_SUMMARY_FIELDS = [
  'snapshots',
  'liveChunks',
  'packsRewritten',
  'packsRetired',
  'packsDeleted',
  'bytesRetired',
  'bytesDeleted',
  'bytesWritten',
  'bytesFreed',
  'chunksRescued',
  'batchesPending',
  'durationMs',
] as const satisfies readonly (keyof PruneRunSummary)[];

/**
 * A prune job per minute at most: deletions within a minute share one (the fixed job id makes a
 * repeated add a no-op while it waits), and the run that retires data asks for the run after its
 * grace period the same way. Two runs never overlap on one repository: the repository's own
 * prune lock refuses the second (REPO_PRUNE_LOCKED), and its job is retried later.
 */
export function pruneJobId(atMs: number): string {
  return `prune-repository-${Math.ceil(atMs / 60_000)}`;
}

export async function requestPrune(queue: Queue, now: number, atMs = now): Promise<void> {
  await queue.add(
    JobName.pruneRepository,
    {},
    {
      jobId: pruneJobId(atMs),
      delay: Math.max(0, atMs - now),
      attempts: 20,
      backoff: { type: 'exponential', delay: 30_000 },
      removeOnComplete: true,
      removeOnFail: 100,
    },
  );
}

export interface PruneStatus {
  lastRunAt?: number;
  lastSuccessAt?: number;
  lastError?: string;
  /** Runs finished since the status was created, and bytes they freed in total. */
  runs: number;
  bytesFreedTotal: number;
  last?: PruneRunSummary;
}

/** The last prune's outcome in Redis, so every api replica's /metrics reports it (stowage_repository_prune_*). */
export class PruneStatusStore {
  private readonly key: string;
  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.key = `${prefix}:repository:prune`;
  }

  async recordSuccess(summary: PruneRunSummary, at: number): Promise<void> {
    const fields: Record<string, string | number> = { lastRunAt: at, lastSuccessAt: at, lastError: '' };
    for (const name of PRUNE_SUMMARY_FIELDS) fields[`last.${name}`] = summary[name];
    await this.redis
      .multi()
      .hset(this.key, fields)
      .hincrby(this.key, 'runs', 1)
      .hincrby(this.key, 'bytesFreedTotal', Math.max(0, summary.bytesFreed))
      .exec();
  }

  async recordFailure(message: string, at: number): Promise<void> {
    await this.redis.hset(this.key, { lastRunAt: at, lastError: message });
  }

  async read(): Promise<PruneStatus> {
    const raw = await this.redis.hgetall(this.key);
    const num = (name: string) => (raw[name] === undefined || raw[name] === '' ? undefined : Number(raw[name]));
    const status: PruneStatus = { runs: num('runs') ?? 0, bytesFreedTotal: num('bytesFreedTotal') ?? 0 };
    if (num('lastRunAt') !== undefined) status.lastRunAt = num('lastRunAt')!;
    if (num('lastSuccessAt') !== undefined) status.lastSuccessAt = num('lastSuccessAt')!;
    if (raw.lastError) status.lastError = raw.lastError;
    if (raw['last.durationMs'] !== undefined) {
      const last: Record<string, number> = {};
      for (const name of PRUNE_SUMMARY_FIELDS) last[name] = num(`last.${name}`) ?? 0;
      status.last = last as unknown as PruneRunSummary;
    }
    return status;
  }
}
