import { readdir, readFile } from 'node:fs/promises';

/**
 * How long a process's threads were ready to run but waited for a core (Linux schedstat's
 * `run_delay`, nanoseconds, per thread), so far. On a machine whose cores are shared by every
 * process of the bench, this is the part of a latency that no code of the waiting process
 * could have saved. The main thread (tid = pid) is the event loop; all threads add the libuv
 * pool, V8's helpers and worker threads.
 */
export interface RunQueueWait {
  mainThreadSeconds: number;
  allThreadsSeconds: number;
}

/** One reading of a process: its main thread's wait and each live thread's, in seconds. */
export interface RunQueueReading {
  mainThreadSeconds: number;
  byThread: ReadonlyMap<string, number>;
}

/** Undefined once the process is gone (or where /proc has no schedstat). */
export async function readRunQueue(pid: number): Promise<RunQueueReading | undefined> {
  const tids = await readdir(`/proc/${pid}/task`).catch(() => undefined);
  if (!tids) return undefined;
  const byThread = new Map<string, number>();
  for (const tid of tids) {
    const delay = await runDelayNs(`/proc/${pid}/task/${tid}/schedstat`);
    if (delay !== undefined) byThread.set(tid, delay / 1e9);
  }
  const main = byThread.get(String(pid));
  return main === undefined ? undefined : { mainThreadSeconds: main, byThread };
}

/** The second field of a schedstat line: `<run ns> <run_delay ns> <timeslices>`. */
async function runDelayNs(path: string): Promise<number | undefined> {
  const text = await readFile(path, 'utf8').catch(() => undefined);
  const delay = Number(text?.split(' ')[1]);
  return Number.isFinite(delay) ? delay : undefined;
}

/**
 * The wait between two readings. All threads: those alive at the second reading, a thread that
 * started in between from 0 (its count is all inside the interval); a thread that ended in
 * between took its count along and is missing (an undercount). A process gone by the second
 * reading counts 0.
 */
export function runQueueWaitSince(before: RunQueueReading | undefined, after: RunQueueReading | undefined): RunQueueWait {
  if (!before || !after) return { mainThreadSeconds: 0, allThreadsSeconds: 0 };
  let all = 0;
  for (const [tid, seconds] of after.byThread) {
    const earlier = before.byThread.get(tid) ?? 0;
    // A smaller count is a new thread that reused the tid.
    all += seconds >= earlier ? seconds - earlier : seconds;
  }
  return { mainThreadSeconds: Math.max(0, after.mainThreadSeconds - before.mainThreadSeconds), allThreadsSeconds: all };
}

/** The bench's processes by part (e.g. `workers` → their pids). */
export type ProcessParts = Record<string, readonly number[]>;

/** Each part's run-queue wait over an interval: its processes' waits summed. */
export interface PartRunQueueWait extends RunQueueWait {
  processes: number;
}

/** A reading of every process of `parts`, to be passed to `runQueueWaitOfParts` later. */
export async function readRunQueueWaits(parts: ProcessParts): Promise<Map<number, RunQueueReading | undefined>> {
  const pids = [...new Set(Object.values(parts).flat())];
  return new Map(await Promise.all(pids.map(async (pid) => [pid, await readRunQueue(pid)] as const)));
}

/** Each part's wait between two readings. */
export function runQueueWaitOfParts(
  parts: ProcessParts,
  before: Map<number, RunQueueReading | undefined>,
  after: Map<number, RunQueueReading | undefined>,
): Record<string, PartRunQueueWait> {
  const out: Record<string, PartRunQueueWait> = {};
  for (const [part, pids] of Object.entries(parts)) {
    const sum: PartRunQueueWait = { processes: pids.length, mainThreadSeconds: 0, allThreadsSeconds: 0 };
    for (const pid of pids) {
      const d = runQueueWaitSince(before.get(pid), after.get(pid));
      sum.mainThreadSeconds += d.mainThreadSeconds;
      sum.allThreadsSeconds += d.allThreadsSeconds;
    }
    out[part] = sum;
  }
  return out;
}

/** A part's main-thread wait as a share of a run (the mean over its processes), or undefined without processes. */
export function mainThreadShare(wait: PartRunQueueWait | undefined, runMs: number): number | undefined {
  if (!wait || wait.processes === 0) return undefined;
  return wait.mainThreadSeconds / wait.processes / (runMs / 1000);
}
