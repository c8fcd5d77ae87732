import { readdir, readFile } from 'node:fs/promises';

/**
 * How long a process's threads were ready to run but waited for a core (Linux schedstat's
 * `run_delay`, nanoseconds, per thread), so far. On a machine whose cores are shared by every
 * process of the bench, this is the part of a latency that no code of the waiting process
 * could have saved. The main thread (tid = pid) is the event loop; `allThreads` adds the libuv
 * pool, V8's helpers and worker threads still alive (a thread that ended takes its count along).
 */
export interface RunQueueWait {
  mainThreadSeconds: number;
  allThreadsSeconds: number;
}

/** Undefined once the process is gone (or where /proc has no schedstat). */
export async function runQueueWait(pid: number): Promise<RunQueueWait | undefined> {
  const tids = await readdir(`/proc/${pid}/task`).catch(() => undefined);
  if (!tids) return undefined;
  let main: number | undefined;
  let all = 0;
  for (const tid of tids) {
    const delay = await runDelayNs(`/proc/${pid}/task/${tid}/schedstat`);
    if (delay === undefined) continue;
    all += delay;
    if (tid === String(pid)) main = delay;
  }
  return main === undefined ? undefined : { mainThreadSeconds: main / 1e9, allThreadsSeconds: all / 1e9 };
}

/** The second field of a schedstat line: `<run ns> <run_delay ns> <timeslices>`. */
async function runDelayNs(path: string): Promise<number | undefined> {
  const text = await readFile(path, 'utf8').catch(() => undefined);
  const delay = Number(text?.split(' ')[1]);
  return Number.isFinite(delay) ? delay : undefined;
}

/** `after − before`, field by field (a process that exited in between counts 0). */
export function runQueueWaitSince(before: RunQueueWait | undefined, after: RunQueueWait | undefined): RunQueueWait {
  if (!before || !after) return { mainThreadSeconds: 0, allThreadsSeconds: 0 };
  return {
    mainThreadSeconds: Math.max(0, after.mainThreadSeconds - before.mainThreadSeconds),
    allThreadsSeconds: Math.max(0, after.allThreadsSeconds - before.allThreadsSeconds),
  };
}

/** The bench's processes by part (e.g. `workers` → their pids). */
export type ProcessParts = Record<string, readonly number[]>;

/** Each part's run-queue wait over an interval: its processes' waits summed. */
export interface PartRunQueueWait extends RunQueueWait {
  processes: number;
}

/** A reading of every process of `parts`, to be passed to `runQueueWaitOfParts` later. */
export async function readRunQueueWaits(parts: ProcessParts): Promise<Map<number, RunQueueWait | undefined>> {
  const pids = [...new Set(Object.values(parts).flat())];
  return new Map(await Promise.all(pids.map(async (pid) => [pid, await runQueueWait(pid)] as const)));
}

/** Each part's wait between two readings. */
export function runQueueWaitOfParts(
  parts: ProcessParts,
  before: Map<number, RunQueueWait | undefined>,
  after: Map<number, RunQueueWait | undefined>,
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
