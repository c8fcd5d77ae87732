import { QUEUE_PREFIX } from './constants.js';

/**
 * Every Redis key Stowage writes, named in one place (README "What lives where in Redis").
 *
 * Redis Cluster hashes a key by the text between its FIRST `{` and the next `}` (the hash tag),
 * and refuses a multi-key command (MULTI, Lua, MGET, a pipeline in ioredis' Cluster client
 * spanning nodes) whose keys land in different slots. Hence:
 * - BullMQ: every queue shares the hash-tagged prefix (`{stowage}`), since one flow spans
 *   queues and BullMQ's scripts touch the keys of parent and children together. All queues
 *   therefore live on one slot; that is BullMQ's constraint, not a choice.
 * - Our own state: the prefix has NO braces (`stowage`), and each run's keys carry the run's
 *   name as the tag (`stowage:bk:{<backup>}:…`), so a backup's scripts stay on one slot while
 *   different backups (and restores, schedules) spread over the shards.
 * - Indexes (listing all backups, restores, schedules, the node-agent registry) are single keys
 *   read by single-key commands; readers of many runs use one command per run, never one
 *   multi-key command.
 */

/** The state key prefix that goes with a queue prefix: `{stowage}` → `stowage`. */
export function statePrefixFor(queuePrefix: string = QUEUE_PREFIX): string {
  const bare = queuePrefix.replace(/[{}]/g, '');
  return bare.length > 0 ? bare : 'stowage';
}

/** Run kinds: `bk` backups, `rs` restores. */
export type RunKeyTag = 'bk' | 'rs';

/** A run's key: `<statePrefix>:<tag>:{<name>}:<suffix>` (tagged by the run's name). */
export function runKey(statePrefix: string, tag: RunKeyTag | string, name: string, suffix: string): string {
  return `${statePrefix}:${tag}:{${name}}:${suffix}`;
}

/** The index of runs of one kind by creation time: `<statePrefix>:backups` / `:restores`. */
export function runIndexKey(statePrefix: string, index: string): string {
  return `${statePrefix}:${index}`;
}

/** A schedule's hash (`<statePrefix>:sched:{<name>}`) and its per-schedule keys (`…:<suffix>`). */
export function scheduleKey(statePrefix: string, name: string, suffix?: string): string {
  return `${statePrefix}:sched:{${name}}${suffix ? `:${suffix}` : ''}`;
}

/** The index of schedule names. */
export function scheduleIndexKey(statePrefix: string): string {
  return `${statePrefix}:schedules`;
}

/** The node-agent registry (a sorted set scored by heartbeat expiry). */
export function nodeAgentsKey(statePrefix: string): string {
  return `${statePrefix}:agents`;
}
