/** Pure numbers behind the report: percentiles, the node-agent bound, Redis command counts. */

export interface Distribution {
  count: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
  mean: number | null;
}

/**
 * Nearest-rank percentile (the smallest value with at least p% of the values at or below it),
 * so p99 of 100 values is the 99th, and p100 is the max. `null` for no values.
 */
export function percentile(values: readonly number[], p: number): number | null {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile: p must be within 0..100, got ${p}`);
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1] ?? null;
}

export function distribution(values: readonly number[]): Distribution {
  if (values.length === 0) return { count: 0, p50: null, p99: null, max: null, mean: null };
  let sum = 0;
  let max = Number.NEGATIVE_INFINITY;
  for (const v of values) {
    sum += v;
    if (v > max) max = v;
  }
  return { count: values.length, p50: percentile(values, 50), p99: percentile(values, 99), max, mean: sum / values.length };
}

/** Each node's earliest item by `startOf` (e.g. its first PVB copy). */
export function earliestPerNode<T extends { node: string }>(items: readonly T[], startOf: (item: T) => number): Map<string, T> {
  const first = new Map<string, T>();
  for (const item of items) {
    const seen = first.get(item.node);
    if (!seen || startOf(item) < startOf(seen)) first.set(item.node, item);
  }
  return first;
}

export interface NodeAgentBound {
  /** Σ per-PVB copy time (completionTimestamp − startTimestamp), ms. */
  totalPvbWorkMs: number;
  /** N·K: copies that can run at once across the cluster. */
  copySlots: number;
  /** totalPvbWorkMs ÷ copySlots: no schedule can finish the copies sooner. */
  lowerBoundMs: number;
  /** The busiest node's work ÷ K: also a bound (a node cannot borrow another's slots). */
  busiestNodeBoundMs: number;
  /** The larger of the two. */
  boundMs: number;
}

/**
 * The node-agent lower bound of a run from the measured copy times: total PVB work spread
 * perfectly over N nodes × K slots, and — since PVBs are pinned to their pod's node — the
 * busiest node's work over its K slots. With work spread evenly the two agree.
 */
export function nodeAgentBound(
  pvbs: ReadonlyArray<{ node: string; copyMs: number }>,
  nodes: number,
  loadConcurrency: number,
): NodeAgentBound {
  if (!(Number.isInteger(nodes) && nodes > 0)) throw new RangeError(`nodes must be a positive integer, got ${nodes}`);
  if (!(Number.isInteger(loadConcurrency) && loadConcurrency > 0))
    throw new RangeError(`loadConcurrency must be a positive integer, got ${loadConcurrency}`);
  const perNode = new Map<string, number>();
  let total = 0;
  for (const p of pvbs) {
    total += p.copyMs;
    perNode.set(p.node, (perNode.get(p.node) ?? 0) + p.copyMs);
  }
  const copySlots = nodes * loadConcurrency;
  const lowerBoundMs = total / copySlots;
  const busiestNodeBoundMs = Math.max(0, ...perNode.values()) / loadConcurrency;
  return { totalPvbWorkMs: total, copySlots, lowerBoundMs, busiestNodeBoundMs, boundMs: Math.max(lowerBoundMs, busiestNodeBoundMs) };
}

/** `INFO commandstats` → calls per command: the platform's parser (the pipeline's Redis-commands test counts with it too). */
export { parseCommandStats } from '@stowage/platform';

/** Calls per command made between two `parseCommandStats` snapshots (commands with no calls left out). */
export function commandStatsDelta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [cmd, calls] of Object.entries(after)) {
    const d = calls - (before[cmd] ?? 0);
    if (d > 0) out[cmd] = d;
  }
  return out;
}

export function sum(values: Iterable<number>): number {
  let s = 0;
  for (const v of values) s += v;
  return s;
}

/** One line of Redis MONITOR: the command and its arguments, and who sent it (`lua` inside a script). */
export interface MonitoredCommand {
  args: readonly string[];
  source: string;
}

/** Commands attributed to one origin: `calls` sent by clients, `commands` counted as INFO commandstats does (a script's own calls included). */
export interface OriginCount {
  calls: number;
  commands: number;
}

/**
 * Redis commands by origin, from MONITOR lines in order: a script call (`evalsha`, named by
 * `scriptNames` from its SHA1, else `evalsha:<first 8 hex>`) owns the `lua` lines that follow it
 * (MONITOR shows a script before the commands it runs); any other command is its own origin.
 */
export function commandsByOrigin(lines: Iterable<MonitoredCommand>, scriptNames: ReadonlyMap<string, string>): Record<string, OriginCount> {
  const out: Record<string, OriginCount> = {};
  let current: OriginCount | undefined;
  for (const { args, source } of lines) {
    if (source === 'lua') {
      if (current) current.commands++;
      continue;
    }
    const cmd = (args[0] ?? '').toLowerCase();
    const sha = (args[1] ?? '').toLowerCase();
    const origin =
      cmd === 'evalsha' || cmd === 'evalsha_ro' ? (scriptNames.get(sha) ?? `evalsha:${sha.slice(0, 8)}`) : cmd === 'eval' ? 'eval' : cmd;
    current = out[origin] ??= { calls: 0, commands: 0 };
    current.calls++;
    current.commands++;
  }
  return out;
}
