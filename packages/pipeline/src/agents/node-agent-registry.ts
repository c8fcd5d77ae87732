import type { RedisClient } from '@stowage/queue';
import { nodeAgentsKey } from '@stowage/queue';

/**
 * Which nodes run a node agent. Each agent heartbeats `registerNodeAgent` (every ttl/3, say);
 * the planner asks `nodesWithAgent` so pods on nodes without an agent get no PVB (DESIGN §3,
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

  /** Marks `node` as having a live agent for `ttlMs` from now. */
  async registerNodeAgent(node: string, ttlMs = DEFAULT_AGENT_TTL_MS): Promise<void> {
    if (!node) throw new Error('registerNodeAgent: node name is required');
    const now = this.now();
    await this.redis
      .multi()
      .zadd(this.key, now + ttlMs, node)
      .zremrangebyscore(this.key, '-inf', now)
      .exec();
  }

  /** Forgets `node` (an agent shutting down cleanly). */
  async unregisterNodeAgent(node: string): Promise<void> {
    await this.redis.zrem(this.key, node);
  }

  /** Nodes whose agent heartbeat has not expired. */
  async nodesWithAgent(): Promise<Set<string>> {
    const nodes = await this.redis.zrangebyscore(this.key, `(${this.now()}`, '+inf');
    return new Set(nodes);
  }
}
