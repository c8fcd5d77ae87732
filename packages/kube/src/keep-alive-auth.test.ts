import http from 'node:http';
import https from 'node:https';
import { HttpMethod, KubeConfig, RequestContext } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { KeepAliveAuthentication } from './keep-alive-auth.js';

function kubeConfig(server: string, opts: { caData?: string; skipTLSVerify?: boolean; token?: string } = {}): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: opts.skipTLSVerify ?? false, ...(opts.caData ? { caData: opts.caData } : {}) }],
    users: [{ name: 'u', token: opts.token ?? 'token-1' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}

async function applied(auth: KeepAliveAuthentication, url: string): Promise<RequestContext> {
  const context = new RequestContext(url, HttpMethod.GET);
  await auth.applySecurityAuthentication(context);
  return context;
}

describe('KeepAliveAuthentication', () => {
  it('gives every request the same keep-alive agent and still sets the credentials per request', async () => {
    const kc = kubeConfig('https://api.example:6443', { caData: Buffer.from('ca-one').toString('base64') });
    const auth = new KeepAliveAuthentication(kc);
    const first = await applied(auth, 'https://api.example:6443/api');
    const second = await applied(auth, 'https://api.example:6443/api/v1/pods');
    const agent = first.getAgent() as https.Agent;
    expect(agent).toBeInstanceOf(https.Agent);
    expect(second.getAgent()).toBe(agent);
    expect((agent as unknown as { keepAlive: boolean }).keepAlive).toBe(true);
    expect(agent.options.ca).toEqual(Buffer.from('ca-one'));
    expect(second.getHeaders().Authorization).toBe('Bearer token-1');

    // A rotated token is a header: same connections. A new CA is a new agent.
    kc.users[0] = { ...kc.users[0]!, token: 'token-2' };
    const afterToken = await applied(auth, 'https://api.example:6443/api');
    expect(afterToken.getAgent()).toBe(agent);
    expect(afterToken.getHeaders().Authorization).toBe('Bearer token-2');
    kc.clusters[0] = { ...kc.clusters[0]!, caData: Buffer.from('ca-two').toString('base64') };
    const afterCa = await applied(auth, 'https://api.example:6443/api');
    expect(afterCa.getAgent()).not.toBe(agent);
    expect((afterCa.getAgent() as https.Agent).options.ca).toEqual(Buffer.from('ca-two'));
  });

  it('matches options by value: the same bytes in a new Buffer share an agent, another client certificate does not', () => {
    const auth = new KeepAliveAuthentication(kubeConfig('https://api.example:6443'));
    const fresh = (cert: string) => new https.Agent({ ca: [Buffer.from('ca')], cert: Buffer.from(cert), key: Buffer.from('key') });
    const first = auth.sharedAgentFor(fresh('cert-one'));
    expect(first).toBeInstanceOf(https.Agent);
    expect(auth.sharedAgentFor(fresh('cert-one'))).toBe(first);
    const rotated = auth.sharedAgentFor(fresh('cert-two'));
    expect(rotated).not.toBe(first);
    expect((rotated as https.Agent).options.cert).toEqual(Buffer.from('cert-two'));
    // A proxy agent (a subclass) keeps its own behaviour.
    class ProxyAgent extends https.Agent {}
    expect(auth.sharedAgentFor(new ProxyAgent())).toBeUndefined();
    expect(auth.sharedAgentFor(undefined)).toBeUndefined();
  });

  it('keeps a plain HTTP agent for an insecure http:// server (the simulator)', async () => {
    const auth = new KeepAliveAuthentication(kubeConfig('http://127.0.0.1:1', { skipTLSVerify: true }));
    const a = await applied(auth, 'http://127.0.0.1:1/api');
    const b = await applied(auth, 'http://127.0.0.1:1/apis');
    expect(Object.getPrototypeOf(a.getAgent())).toBe(http.Agent.prototype);
    expect(b.getAgent()).toBe(a.getAgent());
  });
});
