import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * What a piece of work asked of object storage: requests by operation and object bytes each way.
 * Object storage bills by request and by byte read out, so a backup's, a restore's and a prune's
 * cost is counted where the requests are made (README "What a backup costs in requests").
 *
 * Operations, as S3 classes its requests (the same for every backend, so the numbers mean the
 * same thing on a directory):
 * - `put`: PutObject, CopyObject, and each request of a multipart upload (create, every part, complete);
 * - `get`: GetObject, whole or a range;
 * - `head`: HeadObject, HeadBucket;
 * - `list`: one ListObjectsV2 page (up to 1,000 keys);
 * - `delete`: DeleteObject, AbortMultipartUpload, one DeleteObjects batch (up to 1,000 keys).
 *
 * `bytesWritten` is object bytes sent to the store (request bodies of puts and parts),
 * `bytesRead` object bytes it sent back (bodies of gets); listings and error replies are not
 * object bytes. Every request the store answered counts, failed ones and SDK retries included
 * (they reached the server); one that never got an answer (a connection refused) does not.
 *
 * This module loads no AWS SDK: the repository counts its directory backend with it.
 */
export const STORAGE_OPERATIONS = ['put', 'get', 'head', 'list', 'delete'] as const;
export type StorageOperation = (typeof STORAGE_OPERATIONS)[number];

export interface StorageCost {
  requests: Record<StorageOperation, number>;
  bytesWritten: number;
  bytesRead: number;
}

export function emptyStorageCost(): StorageCost {
  return { requests: { put: 0, get: 0, head: 0, list: 0, delete: 0 }, bytesWritten: 0, bytesRead: 0 };
}

/** `a + b`, as a new value. */
export function addStorageCost(a: StorageCost, b: StorageCost): StorageCost {
  const sum = emptyStorageCost();
  for (const op of STORAGE_OPERATIONS) sum.requests[op] = a.requests[op] + b.requests[op];
  sum.bytesWritten = a.bytesWritten + b.bytesWritten;
  sum.bytesRead = a.bytesRead + b.bytesRead;
  return sum;
}

export function totalRequests(cost: StorageCost): number {
  return STORAGE_OPERATIONS.reduce((sum, op) => sum + cost.requests[op], 0);
}

export function isEmptyStorageCost(cost: StorageCost): boolean {
  return totalRequests(cost) === 0 && cost.bytesWritten === 0 && cost.bytesRead === 0;
}

/**
 * Reads a cost from untrusted JSON (a status written by another process): every field a
 * non-negative safe integer, anything else 0. Undefined when `raw` is not an object.
 */
export function parseStorageCost(raw: unknown): StorageCost | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const count = (v: unknown) => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : 0);
  const r = raw as { requests?: Record<string, unknown>; bytesWritten?: unknown; bytesRead?: unknown };
  const cost = emptyStorageCost();
  for (const op of STORAGE_OPERATIONS) cost.requests[op] = count(r.requests?.[op]);
  cost.bytesWritten = count(r.bytesWritten);
  cost.bytesRead = count(r.bytesRead);
  return cost;
}

/** The meters counting in the current async context, innermost last. */
const scopes = new AsyncLocalStorage<readonly StorageMeter[]>();

/**
 * Counts the storage requests of one piece of work. `run(fn)` counts every request made in fn's
 * async context (what it awaits, the promises and timers it starts), whichever store makes it;
 * meters nest (a prune run inside a job counts in both). Several processes working on one backup
 * each count their own and add their totals where the backup's state lives.
 */
export class StorageMeter {
  private cost = emptyStorageCost();
  private taken = emptyStorageCost();

  /**
   * `work`: what kind of work this meter counts (`backup`, `restore`, `prune`), the label of the
   * process's counters (storageCostByWork) for requests in its scope; the outermost labeled meter decides.
   */
  constructor(readonly work?: StorageWork) {}

  run<T>(fn: () => T): T {
    const outer = scopes.getStore() ?? [];
    return scopes.run([...outer, this], fn);
  }

  add(op: StorageOperation, bytesWritten = 0, bytesRead = 0): void {
    this.cost.requests[op]++;
    this.cost.bytesWritten += bytesWritten;
    this.cost.bytesRead += bytesRead;
  }

  /** Everything counted so far. */
  total(): StorageCost {
    return addStorageCost(this.cost, emptyStorageCost());
  }

  /** What was counted since the last take (for adding to a shared total more than once). */
  take(): StorageCost {
    const since = this.sinceTake();
    this.taken = this.total();
    return since;
  }

  /** What the next take would return, without taking it. */
  sinceTake(): StorageCost {
    const now = this.total();
    const since = emptyStorageCost();
    for (const op of STORAGE_OPERATIONS) since.requests[op] = now.requests[op] - this.taken.requests[op];
    since.bytesWritten = now.bytesWritten - this.taken.bytesWritten;
    since.bytesRead = now.bytesRead - this.taken.bytesRead;
    return since;
  }
}

/** The innermost meter counting in the current async context, if any. */
export function currentStorageMeter(): StorageMeter | undefined {
  return scopes.getStore()?.at(-1);
}

/** The kinds of work a process's storage requests are counted by; `other` is everything else (sync, the API's reads). */
export const STORAGE_WORKS = ['backup', 'restore', 'prune', 'other'] as const;
export type StorageWork = (typeof STORAGE_WORKS)[number];

/** Every request this process made (Prometheus counters of a process). */
export const processStorageMeter = new StorageMeter();
const processByWork = new Map<StorageWork, StorageMeter>(STORAGE_WORKS.map((work) => [work, new StorageMeter(work)]));

/** Every request this process made, by the kind of work it was made for (stowage_storage_* counters). */
export function storageCostByWork(): Array<{ work: StorageWork; cost: StorageCost }> {
  return STORAGE_WORKS.map((work) => ({ work, cost: processByWork.get(work)!.total() }));
}

/** Called by the backends once per request the store answered. */
export function countStorageRequest(op: StorageOperation, bytesWritten = 0, bytesRead = 0): void {
  processStorageMeter.add(op, bytesWritten, bytesRead);
  const meters = scopes.getStore();
  const work = meters?.find((m) => m.work !== undefined)?.work ?? 'other';
  processByWork.get(work)!.add(op, bytesWritten, bytesRead);
  if (meters) for (const meter of meters) meter.add(op, bytesWritten, bytesRead);
}

/** `count` requests of one kind at once (a directory listing of many keys, counted in S3 pages). */
export function countStorageRequests(op: StorageOperation, count: number): void {
  for (let i = 0; i < count; i++) countStorageRequest(op);
}

/** Requests a listing of `keys` keys makes: one page per 1,000 (one for an empty listing). */
export function listPagesFor(keys: number): number {
  return Math.max(1, Math.ceil(keys / 1000));
}
