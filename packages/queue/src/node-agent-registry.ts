import type { RedisClient } from './connections.js';
import { nodeAgentsKey } from './redis-keys.js';

/**
 * Which nodes run a node agent. Each agent heartbeats `registerNodeAgent` (every ttl/3, say);
 * the planner asks `nodesWithAgent` so pods on nodes without an agent get no PVB (docs/architecture.md#the-node-agent,
 * "pods on nodes without a node agent" is a recorded skip). A sorted set scored by expiry time
 * gives every member its own TTL in one key.
 */
export interface NodeAgentRegistryOptions {
  redis: RedisClient;
  /** The backup state prefix (not the queue prefix): the key is `<prefix>:agents`. */
  prefix: string;
  now?: () => number;
}

export const DEFAULT_AGENT_TTL_MS = 30_000;

export class NodeAgentRegistry {
  private readonly redis: RedisClient;
  private readonly key: string;
  private readonly now: () => number;

  constructor(opts: NodeAgentRegistryOptions) {
    this.redis = opts.redis;
    this.key = nodeAgentsKey(opts.prefix);
    this.now = opts.now ?? Date.now;
  }

  /**
   * Marks `node` as having a live agent for `ttlMs` from now. One command: every agent beats every
   * ttl/3, so the expired members are dropped by the reader (once per plan), not by each beat.
   */
  async registerNodeAgent(node: string, ttlMs = DEFAULT_AGENT_TTL_MS): Promise<void> {
    if (!node) throw new Error('registerNodeAgent: node name is required');
    await this.redis.zadd(this.key, this.now() + ttlMs, node);
  }

  /** Forgets `node` (an agent shutting down cleanly). */
  async unregisterNodeAgent(node: string): Promise<void> {
    await this.redis.zrem(this.key, node);
  }

  /** Nodes whose agent heartbeat has not expired (the expired ones are dropped: nodes come and go). */
  async nodesWithAgent(): Promise<Set<string>> {
    const now = this.now();
    const replies = await this.redis.pipeline().zremrangebyscore(this.key, '-inf', now).zrangebyscore(this.key, `(${now}`, '+inf').exec();
    const [dropped, live] = replies ?? [];
    const err = dropped?.[0] ?? live?.[0];
    if (err) throw err;
    return new Set(live?.[1] as string[]);
  }
}
