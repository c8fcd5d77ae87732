/*
 * Service addresses as the API server hands them out, seen through client-node over HTTP: a
 * clusterIP and nodePorts for a Service created without them, a 422 naming the field for one that
 * asks for an address another Service holds, and an update that leaves them out keeps them.
 */
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../src/index.js';
import { apiExceptionBody, kubeConfigFor } from './sim-helpers.js';

const fixture = {
  objects: [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'app' } },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'loaded', namespace: 'app' },
      spec: { type: 'NodePort', clusterIP: '10.96.0.42', ports: [{ port: 80, nodePort: 30080 }] },
    },
  ],
};

const service = (name: string, spec: k8s.V1ServiceSpec): k8s.V1Service => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: 'app' },
  spec,
});

describe('simulated Service address allocation', () => {
  let sim: Simulator;
  let core: k8s.CoreV1Api;

  beforeAll(async () => {
    sim = await startSimulator({ fixture });
    core = kubeConfigFor(sim).makeApiClient(k8s.CoreV1Api);
  });
  afterAll(async () => {
    await sim?.close();
  });

  it('gives a Service without addresses a free clusterIP and free nodePorts; a headless one none', async () => {
    const web = await core.createNamespacedService({
      namespace: 'app',
      body: service('web', { type: 'NodePort', ports: [{ port: 80 }, { port: 443 }] }),
    });
    expect(web.spec?.clusterIP).toMatch(/^10\.96\.\d+\.\d+$/);
    expect(web.spec?.clusterIP).not.toBe('10.96.0.42');
    expect(web.spec?.clusterIPs).toEqual([web.spec?.clusterIP]);
    const nodePorts = web.spec?.ports?.map((p) => p.nodePort) ?? [];
    expect(new Set(nodePorts).size).toBe(2);
    for (const p of nodePorts) expect(p).toBeGreaterThanOrEqual(30000);
    expect(nodePorts).not.toContain(30080);

    const plain = await core.createNamespacedService({ namespace: 'app', body: service('plain', { ports: [{ port: 80 }] }) });
    expect(plain.spec?.ports?.[0]?.nodePort).toBeUndefined();
    const headless = await core.createNamespacedService({
      namespace: 'app',
      body: service('headless', { clusterIP: 'None', ports: [{ port: 80 }] }),
    });
    expect(headless.spec?.clusterIP).toBe('None');
  });

  it('refuses a clusterIP or nodePort another Service holds with a 422 naming the field; a free one is kept', async () => {
    const taken = await core
      .createNamespacedService({
        namespace: 'app',
        body: service('copy', { type: 'NodePort', clusterIP: '10.96.0.42', ports: [{ port: 80, nodePort: 30080 }] }),
      })
      .catch((e: unknown) => e);
    const body = apiExceptionBody(taken);
    expect(body.code).toBe(422);
    expect(body.details?.causes?.map((c) => c.field)).toEqual(['spec.clusterIPs', 'spec.ports[0].nodePort']);
    expect(body.message).toContain('provided port is already allocated');

    const free = await core.createNamespacedService({
      namespace: 'app',
      body: service('chosen', { type: 'NodePort', clusterIP: '10.96.7.7', ports: [{ port: 80, nodePort: 31999 }] }),
    });
    expect(free.spec?.clusterIP).toBe('10.96.7.7');
    expect(free.spec?.ports?.[0]?.nodePort).toBe(31999);
  });

  it('an update that leaves the addresses out keeps them', async () => {
    const current = await core.readNamespacedService({ namespace: 'app', name: 'chosen' });
    const replaced = await core.replaceNamespacedService({
      namespace: 'app',
      name: 'chosen',
      body: {
        ...service('chosen', { type: 'NodePort', ports: [{ port: 80 }] }),
        metadata: { ...current.metadata, labels: { edited: 'yes' } },
      },
    });
    expect(replaced.spec?.clusterIP).toBe('10.96.7.7');
    expect(replaced.spec?.ports?.[0]?.nodePort).toBe(31999);
    expect(replaced.metadata?.labels).toEqual({ edited: 'yes' });
  });
});
