import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { KubeConfig, RequestContext, SecurityAuthentication } from '@kubernetes/client-node';

/**
 * Idle keep-alive sockets are closed after this long, below the 5 s idle timeout of Node's HTTP
 * servers (the simulator) so a request rarely picks a socket the server is closing. The API
 * server keeps idle connections far longer.
 */
export const KEEP_ALIVE_IDLE_MS = 4_000;

/** Distinct TLS setups kept at once (a rotated client certificate is a new one). */
const MAX_AGENTS = 8;

/** The agent options client-node derives from the kubeconfig (what decides the connection, not the headers). */
const AGENT_OPTION_KEYS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const;

/**
 * client-node 1.4 builds a new `http(s).Agent` for every request (KubeConfig.applySecurityAuthentication),
 * so every API call opened a new connection: a TCP handshake each against the simulator, and a TLS
 * handshake each against a real API server. This applies the kubeconfig's auth as before, then
 * swaps that per-request agent for one keep-alive agent per distinct set of agent options, so
 * connections are reused. Headers (tokens, also refreshed ones) are still set per request; a
 * changed CA or client certificate gets an agent of its own. Proxy agents are left as they are.
 */
export class KeepAliveAuthentication implements SecurityAuthentication {
  private readonly agents = new Map<string, http.Agent>();

  constructor(private readonly kubeConfig: KubeConfig) {}

  getName(): string {
    return 'kubeconfig-keep-alive';
  }

  async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await this.kubeConfig.applySecurityAuthentication(context);
    const fresh = context.getAgent();
    const shared = fresh ? this.sharedAgentFor(fresh) : undefined;
    if (shared) context.setAgent(shared);
  }

  /**
   * The shared keep-alive agent standing in for a per-request agent client-node built (for API
   * calls, and for exec WebSockets through `KubeConfig.applyToHTTPSOptions`), so an exec's upgrade
   * can go over an idle connection already open to the API server. Undefined for any other agent.
   */
  sharedAgentFor(fresh: unknown): http.Agent | undefined {
    // Exactly client-node's plain agents: a subclass (a proxy agent) keeps its own behaviour.
    const isHttps = Object.getPrototypeOf(fresh) === https.Agent.prototype;
    const isHttp = Object.getPrototypeOf(fresh) === http.Agent.prototype;
    if (!isHttps && !isHttp) return undefined;
    const options = (fresh as { options?: Record<string, unknown> }).options ?? {};
    const picked: Record<string, unknown> = {};
    for (const key of AGENT_OPTION_KEYS) if (options[key] !== undefined) picked[key] = options[key];
    const id = `${isHttps ? 'https' : 'http'}:${fingerprint(picked)}`;
    let agent = this.agents.get(id);
    if (!agent) {
      const agentOptions = { ...picked, keepAlive: true, timeout: KEEP_ALIVE_IDLE_MS };
      agent = isHttps ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
      if (this.agents.size >= MAX_AGENTS) {
        const [oldestId, oldest] = this.agents.entries().next().value as [string, http.Agent];
        this.agents.delete(oldestId);
        oldest.destroy();
      }
      this.agents.set(id, agent);
    }
    return agent;
  }
}

/** A stable digest of agent options (Buffers and strings, possibly in arrays). */
function fingerprint(options: Record<string, unknown>): string {
  const hash = createHash('sha256');
  for (const key of Object.keys(options).sort()) {
    hash.update(`${key}\0`);
    const values = Array.isArray(options[key]) ? (options[key] as unknown[]) : [options[key]];
    for (const value of values) {
      if (Buffer.isBuffer(value)) hash.update(value);
      else hash.update(String(value));
      hash.update('\0');
    }
  }
  return hash.digest('hex');
}
