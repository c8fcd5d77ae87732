import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKubeClients, createPvbClient, execInPod, type KubeClients, listNodes } from '../src/index.js';
import { pvbCrdFile, smallCluster } from './sim-fixture.js';

let sim: Simulator;
let kube: KubeClients;

beforeAll(async () => {
  sim = await startSimulator({ fixture: smallCluster(), extraManifests: [pvbCrdFile] });
  kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
});

afterAll(async () => {
  await sim?.close();
});

describe('connections to the API server', () => {
  it('are reused across calls (client-node alone opens one per request)', async () => {
    const pvbs = createPvbClient(kube, { namespace: 'stowage' });
    sim.resetRequests();
    for (let i = 0; i < 30; i++) {
      const name = `keepalive-${i}`;
      await pvbs.createPvb({
        metadata: { name, labels: { 'stowage.dev/node': 'node-a' } },
        spec: {
          node: 'node-a',
          pod: { namespace: 'apps', name: 'db', uid: 'u' },
          volume: 'data',
          backupStorageLocation: 'default',
          tags: {},
        },
      });
      expect((await pvbs.getPvb(name))?.metadata.name).toBe(name);
      await listNodes(kube);
      await kube.requestJson({ path: '/api/v1/namespaces' });
    }
    const counts = sim.requests();
    expect(counts.total).toBe(120);
    expect(counts.connections).toBeLessThanOrEqual(2);
  });

  it('several calls at once use several connections, then keep them', async () => {
    sim.resetRequests();
    for (let round = 0; round < 5; round++) await Promise.all(Array.from({ length: 8 }, () => listNodes(kube)));
    const counts = sim.requests();
    expect(counts.total).toBe(40);
    expect(counts.connections).toBeGreaterThan(1);
    expect(counts.connections).toBeLessThanOrEqual(8);
  });

  it('an exec goes over an idle kept-alive connection, which then leaves the pool for good', async () => {
    await listNodes(kube); // at least one idle connection in the pool
    sim.resetRequests();
    const result = await execInPod(kube, {
      namespace: 'apps',
      pod: 'db',
      container: 'main',
      command: ['pg_ctl', 'check'],
      timeoutMs: 5000,
    });
    expect(result).toMatchObject({ outcome: 'exited', exitCode: 0 });
    expect(sim.requests().connections).toBe(0);
    // The upgraded connection was the exec's: later calls are served, on a connection of their own.
    sim.resetRequests();
    await Promise.all(Array.from({ length: 4 }, () => listNodes(kube)));
    await listNodes(kube);
    expect(sim.requests().total).toBe(5);
  });
});
