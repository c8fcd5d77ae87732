import { randomUUID } from 'node:crypto';
import { currentStorageMeter, isEmptyStorageCost, STORAGE_OPERATIONS, type StorageCost } from '@stowage/storage';

/**
 * What a backup or restore asked of object storage, kept in its run counters (`K:cnt`, which stay
 * with the catalogue entry): requests by operation and object bytes each way. Every process that
 * works on the run adds what its own request meter counted: the jobs (workers.ts), finalize's
 * archive writes (RunState.archiveAndDrop) and each PVB/PVR (its status.storage, written by the
 * node agent). Requests no job or volume operation makes (sync, the API's reads) are nobody's.
 */
export const STORAGE_COUNTER = {
  put: 'storagePut',
  get: 'storageGet',
  head: 'storageHead',
  list: 'storageList',
  delete: 'storageDelete',
  bytesWritten: 'storageBytesWritten',
  bytesRead: 'storageBytesRead',
} as const;

/** Counter entries adding `cost` once under `onceKey` (countOnceMany); none for an empty cost. */
export function storageCountEntries(onceKey: string, cost: StorageCost): Array<{ onceKey: string; field: string; by: number }> {
  if (isEmptyStorageCost(cost)) return [];
  const entries: Array<{ onceKey: string; field: string; by: number }> = [];
  const add = (what: keyof typeof STORAGE_COUNTER, by: number) => {
    if (by > 0) entries.push({ onceKey: `${onceKey}:${what}`, field: STORAGE_COUNTER[what], by });
  };
  for (const op of STORAGE_OPERATIONS) add(op, cost.requests[op]);
  add('bytesWritten', cost.bytesWritten);
  add('bytesRead', cost.bytesRead);
  return entries;
}

/** The run's storage cost from its counters. */
export function storageCostFromCounters(counters: Readonly<Record<string, number>>): StorageCost {
  const n = (field: string) => {
    const v = counters[field];
    return v !== undefined && Number.isSafeInteger(v) && v > 0 ? v : 0;
  };
  return {
    requests: {
      put: n(STORAGE_COUNTER.put),
      get: n(STORAGE_COUNTER.get),
      head: n(STORAGE_COUNTER.head),
      list: n(STORAGE_COUNTER.list),
      delete: n(STORAGE_COUNTER.delete),
    },
    bytesWritten: n(STORAGE_COUNTER.bytesWritten),
    bytesRead: n(STORAGE_COUNTER.bytesRead),
  };
}

/**
 * Entries for what the current meter (the job's) counted since it was last taken: each take is a
 * measurement of its own, so it gets a key of its own (a re-run job made its requests again).
 */
export function takeCurrentStorageCost(): Array<{ onceKey: string; field: string; by: number }> {
  const meter = currentStorageMeter();
  return meter ? storageCountEntries(`storage:${randomUUID()}`, meter.take()) : [];
}

/**
 * The run's counters as they stand once finalize has put its archive's last objects, the bodies
 * `encode(counters)` returns, in order: `counters` (what Redis holds), what the current job's meter
 * counted and has not added yet (the archive's other writes), and those puts themselves — one PUT
 * each, of bodies that state their own size (encoded again until the size they state is theirs;
 * with `lastIsJson`, the last body may end in spaces to get there).
 * Archived with these, a run's storage figures are those its live counters reach once finalize
 * counts its own requests (RunState.archiveAndDrop). Outside a meter nothing is counted, so
 * nothing is added.
 */
export async function countersWithOwnPuts(
  counters: Readonly<Record<string, number>>,
  encode: (counters: Record<string, number>) => Buffer[] | Promise<Buffer[]>,
  options: { lastIsJson?: boolean } = {},
): Promise<{ counters: Record<string, number>; bodies: Buffer[] }> {
  const meter = currentStorageMeter();
  if (!meter) {
    const plain = { ...counters };
    return { counters: plain, bodies: await encode(plain) };
  }
  const pending = meter.sinceTake();
  const add = (into: Record<string, number>, field: string, by: number) => {
    if (by > 0) into[field] = (into[field] ?? 0) + by;
  };
  const base: Record<string, number> = { ...counters };
  for (const op of STORAGE_OPERATIONS) add(base, STORAGE_COUNTER[op], pending.requests[op]);
  add(base, STORAGE_COUNTER.bytesRead, pending.bytesRead);
  let puts = 0;
  let own = 0;
  let last: { counters: Record<string, number>; bodies: Buffer[] } | undefined;
  // Plain JSON settles in a step or two: its size changes only when a number gains a digit. A
  // compressed body's size can move either way as a number changes, so the sizes may swing between
  // two values forever: then a last body that is JSON takes trailing spaces up to the size stated.
  for (let attempt = 0; attempt < 16; attempt++) {
    const candidate = { ...base };
    add(candidate, STORAGE_COUNTER.put, puts);
    add(candidate, STORAGE_COUNTER.bytesWritten, pending.bytesWritten + own);
    const bodies = await encode(candidate);
    last = { counters: candidate, bodies };
    const size = bodies.reduce((sum, b) => sum + b.length, 0);
    if (size === own && bodies.length === puts) break;
    if (options.lastIsJson && bodies.length === puts && size < own) {
      const padded = Buffer.concat([bodies.at(-1)!, Buffer.alloc(own - size, ' ')]);
      last = { counters: candidate, bodies: [...bodies.slice(0, -1), padded] };
      break;
    }
    own = size;
    puts = bodies.length;
  }
  return last!;
}
