/**
 * `INFO commandstats` → calls per command (`cmdstat_evalsha:calls=12,...` → `{ evalsha: 12 }`).
 * Commands a script runs are counted too (the bench and the Redis-commands test both count so).
 */
export function parseCommandStats(info: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of info.split(/\r?\n/)) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (m?.[1] && m[2]) out[m[1]] = Number(m[2]);
  }
  return out;
}
