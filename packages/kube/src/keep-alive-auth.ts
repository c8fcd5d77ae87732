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
  /** The shared agents, oldest first, each with the options it was made for. */
  private readonly agents: Array<{ isHttps: boolean; options: Record<string, unknown>; agent: http.Agent }> = [];

  constructor(private readonly kubeConfig: KubeConfig) {}

  getName(): string {
    return 'kubeconfig-keep-alive';
  }

  async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await this.kubeConfig.applySecurityAuthentication(context);
    const shared = this.sharedAgentFor(context.getAgent());
    if (shared) context.setAgent(shared);
  }

  /**
   * The shared keep-alive agent standing in for a per-request agent client-node built (for API
   * calls, and for exec WebSockets through `KubeConfig.applyToHTTPSOptions`), so an exec's upgrade
   * can go over an idle connection already open to the API server. Undefined for anything else (no
   * agent, a proxy agent).
   * Found by comparing options (a few Buffers, byte for byte), not by hashing them: this runs on
   * every API call, and a SHA-256 per call cost more than the comparison.
   */
  sharedAgentFor(fresh: unknown): http.Agent | undefined {
    if (typeof fresh !== 'object' || fresh === null) return undefined;
    // Exactly client-node's plain agents: a subclass (a proxy agent) keeps its own behaviour.
    const isHttps = Object.getPrototypeOf(fresh) === https.Agent.prototype;
    const isHttp = Object.getPrototypeOf(fresh) === http.Agent.prototype;
    if (!isHttps && !isHttp) return undefined;
    const options = (fresh as { options?: Record<string, unknown> }).options ?? {};
    const picked: Record<string, unknown> = {};
    for (const key of AGENT_OPTION_KEYS) if (options[key] !== undefined) picked[key] = options[key];
    const known = this.agents.find((entry) => entry.isHttps === isHttps && sameAgentOptions(entry.options, picked));
    if (known) return known.agent;
    const agentOptions = { ...picked, keepAlive: true, timeout: KEEP_ALIVE_IDLE_MS };
    const agent = isHttps ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
    if (this.agents.length >= MAX_AGENTS) this.agents.shift()?.agent.destroy();
    this.agents.push({ isHttps, options: picked, agent });
    return agent;
  }
}

function sameAgentOptions(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  return AGENT_OPTION_KEYS.every((key) => sameOptionValue(a[key], b[key]));
}

/** Equal option values: the same string or flag, Buffers with the same bytes, arrays of such. */
function sameOptionValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((value, i) => sameOptionValue(value, b[i]));
  return false;
}
