import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RequestCounts, type Simulator, startSimulator } from '../src/index.js';

describe('requests in flight, as the simulator counts them', () => {
  let sim: Simulator;

  beforeAll(async () => {
    sim = await startSimulator();
  });
  afterAll(async () => {
    await sim?.close();
  });

  const asAdmin = (init: RequestInit = {}): RequestInit => ({ ...init, headers: { Authorization: `Bearer ${sim.adminToken}` } });
  const counts = async () => (await (await fetch(`${sim.url}/_sim/requests`)).json()) as RequestCounts;

  it('counts concurrent requests (held by the injected latency) but not watch streams, and resets the peak', async () => {
    sim.setFaults({ latencyMs: 300 });
    sim.resetRequests();
    const watch = new AbortController();
    const watching = fetch(`${sim.url}/api/v1/namespaces/shop/pods?watch=true`, asAdmin({ signal: watch.signal })).catch(() => undefined);
    const reads = Array.from({ length: 7 }, () => fetch(`${sim.url}/api/v1/namespaces/shop/configmaps`, asAdmin()).then((r) => r.status));
    expect(await Promise.all(reads)).toEqual(Array(7).fill(200));
    const after = await counts();
    expect(after.inFlight.peak).toBe(7);
    expect(after.inFlight.current).toBe(0);
    expect(after.watches.active).toBe(1);
    watch.abort();
    await watching;
    sim.clearFaults();
    sim.resetRequests();
    expect((await counts()).inFlight).toEqual({ current: 0, peak: 0 });
    await fetch(`${sim.url}/api/v1/namespaces/shop/configmaps`, asAdmin());
    expect((await counts()).inFlight).toEqual({ current: 0, peak: 1 });
  });

  it('counts the LISTs with a label or field selector apart (informers), within the LISTs of their resource', async () => {
    sim.resetRequests();
    const list = (query: string) => fetch(`${sim.url}/api/v1/pods${query}`, asAdmin()).then((r) => r.status);
    expect(await list('')).toBe(200);
    expect(await list('?limit=1')).toBe(200);
    expect(await list('?fieldSelector=spec.nodeName%3Dnode-1')).toBe(200);
    expect(await list('?labelSelector=app%3Dweb')).toBe(200);
    const after = await counts();
    expect(after.byResource.pods?.list).toBe(4);
    expect(after.selectorLists).toEqual({ pods: 2 });
  });
});
