import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateCluster, type Simulator, startSimulator } from '../src/index.js';
import { kubeConfigFor, waitFor } from './sim-helpers.js';

const sha = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

describe('faults, control API and the demo fixture on disk', () => {
  let sim: Simulator;
  let core: k8s.CoreV1Api;
  let kc: k8s.KubeConfig;

  beforeAll(async () => {
    sim = await startSimulator();
    kc = kubeConfigFor(sim);
    core = kc.makeApiClient(k8s.CoreV1Api);
  });
  afterAll(async () => {
    await sim?.close();
  });

  it('errorRate 1 answers 429 with Retry-After, then 500, then 503; /_sim is never faulted', async () => {
    const put = await fetch(`${sim.url}/_sim/faults`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ errorRate: 1, retryAfterSeconds: 2, appliesTo: { resources: ['pods'] } }),
    });
    expect(put.status).toBe(200);
    const answers: { status: number; retryAfter: string | null; reason: string }[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${sim.url}/api/v1/namespaces/shop/pods`, { headers: { Authorization: `Bearer ${sim.adminToken}` } });
      answers.push({
        status: res.status,
        retryAfter: res.headers.get('retry-after'),
        reason: ((await res.json()) as { reason: string }).reason,
      });
    }
    expect(answers).toEqual([
      { status: 429, retryAfter: '2', reason: 'TooManyRequests' },
      { status: 500, retryAfter: null, reason: 'InternalError' },
      { status: 503, retryAfter: null, reason: 'ServiceUnavailable' },
    ]);
    // Other resources are outside appliesTo; the control API is never faulted.
    expect(
      (await fetch(`${sim.url}/api/v1/namespaces/shop/configmaps`, { headers: { Authorization: `Bearer ${sim.adminToken}` } })).status,
    ).toBe(200);
    const counts = (await (await fetch(`${sim.url}/_sim/requests`)).json()) as {
      faulted: Record<string, number>;
      byResource: Record<string, Record<string, number>>;
    };
    expect(counts.faulted).toEqual({ '429': 1, '500': 1, '503': 1 });
    expect(counts.byResource.pods?.list).toBe(3);
    const error = await core.readNamespacedPod({ namespace: 'shop', name: 'cache' }).catch((e: unknown) => e);
    expect((error as { code: number }).code).toBe(429);
    expect((await fetch(`${sim.url}/_sim/faults`, { method: 'DELETE' })).status).toBe(200);
    expect((await core.readNamespacedPod({ namespace: 'shop', name: 'cache' })).metadata?.name).toBe('cache');
  });

  it('rejects a bad fault config with a clear error', async () => {
    const res = await fetch(`${sim.url}/_sim/faults`, { method: 'PUT', body: JSON.stringify({ errorRate: 2, statuses: [418] }) });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('CONTROL_BAD_REQUEST');
    expect(body.error.message).toMatch(/errorRate.*statuses/);
  });

  it('latency delays matching requests', async () => {
    sim.setFaults({ latencyMs: 300, appliesTo: { verbs: ['get'] } });
    try {
      const started = performance.now();
      await core.readNamespacedPod({ namespace: 'shop', name: 'cache' });
      expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    } finally {
      sim.clearFaults();
    }
  });

  it('dropped watches end open streams', async () => {
    let ended = 0;
    await new k8s.Watch(kc).watch(
      '/api/v1/namespaces/shop/pods',
      {},
      () => {},
      () => {
        ended++;
      },
    );
    await waitFor(() => sim.requests().watches.active === 1, 3000, 'watch open');
    sim.setFaults({ dropWatchesEveryMs: 100 });
    try {
      await waitFor(() => ended === 1, 3000, 'watch dropped');
      expect(sim.requests().watches.active).toBe(0);
    } finally {
      sim.clearFaults();
    }
  });

  it('changes pod phase and exec behaviour through the control API, and records execs by pod', async () => {
    const phase = await fetch(`${sim.url}/_sim/pods/shop/cache/phase`, { method: 'POST', body: JSON.stringify({ phase: 'Succeeded' }) });
    expect(phase.status).toBe(200);
    expect((await core.readNamespacedPod({ namespace: 'shop', name: 'cache' })).status?.phase).toBe('Succeeded');
    const missing = await fetch(`${sim.url}/_sim/pods/shop/nope/phase`, { method: 'POST', body: JSON.stringify({ phase: 'Running' }) });
    expect(missing.status).toBe(404);
    const badExec = await fetch(`${sim.url}/_sim/pods/shop/cache/exec`, {
      method: 'PUT',
      body: JSON.stringify({ redis: { rules: [{ exitCode: 'x' }] } }),
    });
    expect(badExec.status).toBe(400);
    const okExec = await fetch(`${sim.url}/_sim/pods/shop/cache/exec`, {
      method: 'PUT',
      body: JSON.stringify({ redis: { default: { exitCode: 7 } } }),
    });
    expect(okExec.status).toBe(200);
    const log = await fetch(`${sim.url}/_sim/exec-log?pod=postgres-0`);
    expect(((await log.json()) as { items: unknown[] }).items).toEqual([]);
  });

  it('lays volume data out like a kubelet, with deterministic bytes, and shares the RWX claim between pods', async () => {
    const pg = await core.readNamespacedPod({ namespace: 'shop', name: 'postgres-0' });
    const claim = await core.readNamespacedPersistentVolumeClaim({ namespace: 'shop', name: 'data-postgres-0' });
    const pvName = claim.spec!.volumeName!;
    expect(claim.status?.phase).toBe('Bound');
    expect((await core.readPersistentVolume({ name: pvName })).spec?.claimRef?.name).toBe('data-postgres-0');
    const pgDir = join(sim.dataRoot, 'node-a', 'pods', pg.metadata!.uid!, 'volumes', 'kubernetes.io~csi', pvName, 'mount');
    expect(readFileSync(join(pgDir, 'PG_VERSION'), 'utf8')).toBe('16\n');
    expect(statSync(join(pgDir, 'base/16384/7')).size).toBe(262144);
    expect(sim.podVolumes('shop', 'postgres-0').map((v) => v.path)).toEqual([pgDir]);

    const cache = await core.readNamespacedPod({ namespace: 'shop', name: 'cache' });
    const cacheDir = join(sim.dataRoot, 'node-b', 'pods', cache.metadata!.uid!, 'volumes', 'kubernetes.io~empty-dir', 'redis-data');
    expect(readFileSync(join(cacheDir, 'appendonly.aof'), 'utf8')).toMatch(/^2026-01-01T\S+ (INFO|DEBUG|WARN|ERROR) /);

    const [uploader, thumbnailer] = await Promise.all(
      ['uploader', 'thumbnailer'].map((name) => Promise.resolve(sim.podVolumes('media', name)[0]!)),
    );
    expect(uploader!.pvName).toBe(thumbnailer!.pvName);
    expect(uploader!.path).not.toBe(thumbnailer!.path);
    expect(sha(join(uploader!.path, 'images/photo-3.jpg'))).toBe(sha(join(thumbnailer!.path, 'images/photo-3.jpg')));
    expect(sha(join(uploader!.path, 'images/photo-3.jpg'))).not.toBe(sha(join(uploader!.path, 'images/photo-4.jpg')));
    // hostPath/configMap volumes get no data; the opted-out emptyDir still exists (opting out is the backup's business).
    expect(sim.podVolumes('shop', 'reporter').map((v) => v.volume)).toEqual(['reports', 'scratch']);
  });

  it('reset returns to the fixture with the same uids', async () => {
    const before = await core.readNamespacedPod({ namespace: 'shop', name: 'postgres-0' });
    await core.deleteNamespacedPod({ namespace: 'shop', name: 'postgres-0' });
    const reset = await fetch(`${sim.url}/_sim/reset`, { method: 'POST' });
    expect(reset.status).toBe(200);
    const after = await core.readNamespacedPod({ namespace: 'shop', name: 'postgres-0' });
    expect(after.metadata?.uid).toBe(before.metadata?.uid);
    expect(Number(after.metadata?.resourceVersion)).toBeGreaterThan(Number(before.metadata?.resourceVersion));
    expect((await core.readNamespacedPod({ namespace: 'shop', name: 'cache' })).status?.phase).toBe('Running');
    expect(sim.requests().total).toBe(2); // the two reads since the reset
  });
});

describe('fixtures and generated clusters', () => {
  it('loads a pod with a missing PVC with a warning, and rejects an unknown kind with a clear error', async () => {
    const sim = await startSimulator({
      fixture: {
        objects: [
          {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: { name: 'p', namespace: 'x' },
            spec: { nodeName: 'n1', containers: [{ name: 'c' }], volumes: [{ name: 'd', persistentVolumeClaim: { claimName: 'gone' } }] },
          },
        ],
      },
    });
    try {
      expect(sim.warnings.join('\n')).toMatch(/persistentVolumeClaim gone does not exist/);
      expect(sim.podVolumes('x', 'p')).toEqual([]);
    } finally {
      await sim.close();
    }
    await expect(
      startSimulator({ fixture: { objects: [{ apiVersion: 'example.com/v1', kind: 'Thing', metadata: { name: 't' } }] } }),
    ).rejects.toThrow(/no resource serves example.com\/v1 Thing/);
  });

  it('generates a large cluster that pages quickly and writes files only when asked', async () => {
    const fixture = generateCluster({
      namespaces: 20,
      podsPerNamespace: 100,
      volumesPerPod: 1,
      bytesPerVolume: 0,
      nodes: 5,
      preHook: true,
      postHook: true,
    });
    const big = await startSimulator({ fixture });
    try {
      const core = kubeConfigFor(big).makeApiClient(k8s.CoreV1Api);
      const page = await core.listPodForAllNamespaces({ limit: 500 });
      expect(page.items).toHaveLength(500);
      expect(page.metadata?.remainingItemCount).toBe(1500);
      // With a selector the API server does not know what is left, and says nothing.
      const selected = await core.listPodForAllNamespaces({ limit: 500, labelSelector: 'stowage.dev/bench=true' });
      expect(selected.items).toHaveLength(500);
      expect(selected.metadata?._continue).toBeTruthy();
      expect(selected.metadata?.remainingItemCount).toBeUndefined();
      const onNode = await core.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=node-3' });
      expect(onNode.items).toHaveLength(400);
      expect(page.items[0]?.metadata?.annotations?.['pre.hook.backup.velero.io/command']).toContain('fsfreeze');
      expect(statSync(big.dataRoot, { throwIfNoEntry: false })).toBeUndefined();
    } finally {
      await big.close();
    }
    const small = await startSimulator({
      fixture: generateCluster({
        namespaces: 1,
        podsPerNamespace: 2,
        volumesPerPod: 2,
        bytesPerVolume: 10_000,
        filesPerVolume: 3,
        nodes: 2,
      }),
    });
    try {
      const volume = small.podVolumes('bench-0', 'app-1')[1]!;
      expect(volume.path).toContain(join('node-1', 'pods'));
      const sizes = ['file-0.bin', 'file-1.bin', 'file-2.bin', 'remainder.bin'].map((f) => statSync(join(volume.path, 'data', f)).size);
      expect(sizes).toEqual([3333, 3333, 3333, 1]);
    } finally {
      await small.close();
    }
  });
});
