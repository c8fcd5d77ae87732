import { readFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { pvbCrdPath, type Simulator, startSimulator } from '../src/index.js';
import { apiExceptionBody, execTransport, kubeConfigFor, waitFor } from './sim-helpers.js';

const G = { group: 'stowage.dev', version: 'v1alpha1', namespace: 'stowage', plural: 'podvolumebackups' };

function pvb(name: string, labels: Record<string, string> = {}) {
  return {
    apiVersion: 'stowage.dev/v1alpha1',
    kind: 'PodVolumeBackup',
    metadata: { name, namespace: 'stowage', labels },
    spec: { node: 'node-a', pod: { namespace: 'shop', name: 'postgres-0', uid: 'u-1' }, volume: 'data', backupStorageLocation: 'default' },
  };
}

describe('client-node 1.4.0 against the simulator', () => {
  let sim: Simulator;
  let kc: k8s.KubeConfig;
  let core: k8s.CoreV1Api;
  let custom: k8s.CustomObjectsApi;

  beforeAll(async () => {
    // The demo fixture is loaded without the CRD so the test can register it through the API.
    sim = await startSimulator({ materializeVolumes: 'none', fixture: { objects: parseDemoWithoutCrd() } });
    kc = kubeConfigFor(sim);
    core = kc.makeApiClient(k8s.CoreV1Api);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
  });
  afterAll(async () => {
    await sim?.close();
  });

  it('lists pods with label and field selectors', async () => {
    const web = await core.listNamespacedPod({ namespace: 'shop', labelSelector: 'app=web' });
    expect(web.items.map((p) => p.metadata?.name).sort()).toEqual(['web-7d4b9c8f6-2xk9p', 'web-7d4b9c8f6-8hq4t', 'web-7d4b9c8f6-zr5mw']);
    const notWeb = await core.listPodForAllNamespaces({ labelSelector: 'app notin (web,cache),role' });
    expect(notWeb.items.map((p) => p.metadata?.name).sort()).toEqual(['thumbnailer', 'uploader']);
    const withoutRole = await core.listPodForAllNamespaces({ labelSelector: '!role,app in (media,postgres)' });
    expect(withoutRole.items.map((p) => p.metadata?.name)).toEqual(['postgres-0']);
    const onNodeC = await core.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=node-c,status.phase=Running' });
    expect(onNodeC.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`).sort()).toEqual([
      'media/thumbnailer',
      'shop/reporter',
      'shop/web-7d4b9c8f6-zr5mw',
    ]);
    const byName = await core.listNamespacedPod({ namespace: 'shop', fieldSelector: 'metadata.name==cache' });
    expect(byName.items).toHaveLength(1);
    expect(byName.items[0]?.status?.phase).toBe('Running');
  });

  it('paginates with limit and an opaque continue token in stable order', async () => {
    const all = await core.listPodForAllNamespaces();
    const names: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await core.listPodForAllNamespaces({ limit: 3, _continue: token });
      pages++;
      expect(page.items.length).toBeLessThanOrEqual(3);
      names.push(...page.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`));
      token = page.metadata?._continue;
    } while (token && pages < 10);
    expect(pages).toBe(Math.ceil(all.items.length / 3));
    expect(names).toEqual(all.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`));
    expect(new Set(names).size).toBe(all.items.length);
  });

  it('registers the PVB CRD, then serves its custom resources with status, merge and JSON patch', async () => {
    // Registered over plain HTTP: client-node's typed ApiextensionsV1Api serialiser drops `enum` from schemas.
    const registered = await fetch(`${sim.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${sim.adminToken}` },
      body: JSON.stringify(parse(readFileSync(pvbCrdPath, 'utf8'))),
    });
    expect(registered.status).toBe(201);
    const ext = kc.makeApiClient(k8s.ApiextensionsV1Api);
    const crd = await ext.readCustomResourceDefinition({ name: 'podvolumebackups.stowage.dev' });
    expect(crd.status?.conditions?.find((c) => c.type === 'Established')?.status).toBe('True');
    const resources = await custom.getAPIResources({ group: 'stowage.dev', version: 'v1alpha1' });
    expect(resources.resources.map((r) => r.name)).toEqual(['podvolumebackups', 'podvolumebackups/status']);
    const groups = await kc.makeApiClient(k8s.ApisApi).getAPIVersions();
    expect(groups.groups.map((g) => g.name)).toContain('stowage.dev');

    const created = (await custom.createNamespacedCustomObject({
      ...G,
      body: { ...pvb('b1-x', { 'stowage.dev/backup-name': 'b1' }), status: { phase: 'Completed' } },
    })) as k8s.KubernetesObject & {
      status?: { phase?: string };
    };
    expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.status).toBeUndefined(); // status is a subresource: create ignores it
    const generated = (await custom.createNamespacedCustomObject({
      ...G,
      body: { ...pvb(''), metadata: { generateName: 'b1-', namespace: 'stowage' } },
    })) as k8s.KubernetesObject;
    expect(generated.metadata?.name).toMatch(/^b1-[a-z0-9]{5}$/);

    const merged = (await custom.patchNamespacedCustomObject(
      { ...G, name: 'b1-x', body: { metadata: { labels: { extra: 'yes' } }, status: { phase: 'Failed' } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    )) as k8s.KubernetesObject & { status?: unknown };
    expect(merged.metadata?.labels).toEqual({ 'stowage.dev/backup-name': 'b1', extra: 'yes' });
    expect(merged.status).toBeUndefined();
    expect(Number(merged.metadata?.resourceVersion)).toBeGreaterThan(Number(created.metadata?.resourceVersion));

    await custom.patchNamespacedCustomObjectStatus({
      ...G,
      name: 'b1-x',
      body: [{ op: 'add', path: '/status', value: { phase: 'InProgress', progress: { bytesDone: 5 } } }],
    });
    const withStatus = (await custom.getNamespacedCustomObjectStatus({ ...G, name: 'b1-x' })) as {
      status: { phase: string };
      spec: { volume: string };
    };
    expect(withStatus.status.phase).toBe('InProgress');
    const jsonPatched = (await custom.patchNamespacedCustomObject({
      ...G,
      name: 'b1-x',
      body: [{ op: 'replace', path: '/spec/volume', value: 'other' }],
    })) as {
      spec: { volume: string };
      status: { phase: string };
      metadata: { generation: number };
    };
    expect(jsonPatched.spec.volume).toBe('other');
    expect(jsonPatched.status.phase).toBe('InProgress');
    expect(jsonPatched.metadata.generation).toBe(2);

    const listed = await custom.listNamespacedCustomObject({ ...G, labelSelector: 'stowage.dev/backup-name=b1' });
    expect(listed.items.map((i: k8s.KubernetesObject) => i.metadata?.name)).toEqual(['b1-x']);

    const invalidStatus = await custom
      .patchNamespacedCustomObjectStatus(
        { ...G, name: 'b1-x', body: { status: { phase: 'Bogus' } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      )
      .catch((e: unknown) => e);
    expect((invalidStatus as { code: number }).code).toBe(422);
    expect(apiExceptionBody(invalidStatus).details?.causes?.[0]?.field).toBe('status.phase');

    await custom.deleteNamespacedCustomObject({ ...G, name: 'b1-x' });
    const gone = await custom.getNamespacedCustomObject({ ...G, name: 'b1-x' }).catch((e: unknown) => e);
    expect((gone as { code: number }).code).toBe(404);
    expect(apiExceptionBody(gone).reason).toBe('NotFound');
  });

  it('resumes a watch from a resourceVersion and sees only later events', async () => {
    await core.createNamespacedConfigMap({ namespace: 'shop', body: { metadata: { name: 'w-before' }, data: { a: '1' } } });
    const mark = (await core.listNamespacedConfigMap({ namespace: 'shop' })).metadata!.resourceVersion!;
    await core.createNamespacedConfigMap({ namespace: 'shop', body: { metadata: { name: 'w-after' }, data: { a: '1' } } });
    await core.patchNamespacedConfigMap(
      { namespace: 'shop', name: 'w-before', body: { data: { a: '2' } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    const events: string[] = [];
    const watch = new k8s.Watch(kc);
    const controller = await watch.watch(
      '/api/v1/namespaces/shop/configmaps',
      { resourceVersion: mark },
      (type, obj: k8s.V1ConfigMap) => events.push(`${type} ${obj.metadata?.name}`),
      () => {},
    );
    await waitFor(() => events.length >= 2, 5000, 'replayed events');
    await core.deleteNamespacedConfigMap({ namespace: 'shop', name: 'w-after' });
    await waitFor(() => events.length >= 3, 5000, 'live delete');
    controller.abort();
    expect(events).toEqual(['ADDED w-after', 'MODIFIED w-before', 'DELETED w-after']);
  });

  it('answers a watch from a compacted resourceVersion with a 410 Expired ERROR event', async () => {
    const small = await startSimulator({ materializeVolumes: 'none', historyLimit: 3, fixture: { objects: [] } });
    try {
      const skc = kubeConfigFor(small);
      const score = skc.makeApiClient(k8s.CoreV1Api);
      const first = await score.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'c0' } } });
      for (let i = 1; i <= 5; i++) await score.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: `c${i}` } } });
      const received: { type: string; code?: number; reason?: string }[] = [];
      let doneWith: unknown = 'not yet';
      await new k8s.Watch(skc).watch(
        '/api/v1/namespaces/default/configmaps',
        { resourceVersion: first.metadata!.resourceVersion },
        (type, obj: { code?: number; reason?: string }) => received.push({ type, code: obj.code, reason: obj.reason }),
        (err) => {
          doneWith = err;
        },
      );
      await waitFor(() => doneWith !== 'not yet', 5000, 'watch end');
      expect(received).toEqual([{ type: 'ERROR', code: 410, reason: 'Expired' }]);
    } finally {
      await small.close();
    }
  });

  it('keeps a makeInformer cache in step with adds, updates and deletes', async () => {
    const path = '/api/v1/namespaces/media/configmaps';
    const informer = k8s.makeInformer<k8s.V1ConfigMap>(kc, path, () => core.listNamespacedConfigMap({ namespace: 'media' }));
    const seen: string[] = [];
    informer.on('add', (o) => seen.push(`add ${o.metadata?.name}`));
    informer.on('update', (o) => seen.push(`update ${o.metadata?.name} ${o.data?.k}`));
    informer.on('delete', (o) => seen.push(`delete ${o.metadata?.name}`));
    await informer.start();
    try {
      await waitFor(() => seen.includes('add media-settings'), 5000, 'initial list');
      await core.createNamespacedConfigMap({ namespace: 'media', body: { metadata: { name: 'inf' }, data: { k: '1' } } });
      await waitFor(() => seen.includes('add inf'), 5000, 'add');
      await core.replaceNamespacedConfigMap({
        namespace: 'media',
        name: 'inf',
        body: { ...(await core.readNamespacedConfigMap({ namespace: 'media', name: 'inf' })), data: { k: '2' } },
      });
      await waitFor(() => seen.includes('update inf 2'), 5000, 'update');
      await core.deleteNamespacedConfigMap({ namespace: 'media', name: 'inf' });
      await waitFor(() => seen.includes('delete inf'), 5000, 'delete');
      expect(informer.list().map((o) => o.metadata?.name)).toEqual(['media-settings']);
    } finally {
      await informer.stop();
    }
  });

  it('runs scripted exec with a status callback for zero and non-zero exits, and logs each exec', async () => {
    const exec = new k8s.Exec(kc, execTransport(kc));
    const run = (pod: string, container: string, command: string[]) =>
      new Promise<{ status: k8s.V1Status; stdout: string; stderr: string }>((resolve, reject) => {
        const out = new PassThrough();
        const err = new PassThrough();
        let stdout = '';
        let stderr = '';
        out.on('data', (d: Buffer) => {
          stdout += d.toString();
        });
        err.on('data', (d: Buffer) => {
          stderr += d.toString();
        });
        const timer = setTimeout(() => reject(new Error('exec timed out')), 5000);
        exec
          .exec('shop', pod, container, command, out, err, null, false, (status) => {
            clearTimeout(timer);
            // Give the socket a moment to deliver output written before the status frame.
            setImmediate(() => resolve({ status, stdout, stderr }));
          })
          .catch(reject);
      });
    const freeze = await run('postgres-0', 'postgres', ['/bin/sh', '-c', 'psql -c CHECKPOINT && fsfreeze -f /var/lib/postgresql/data']);
    expect(freeze.status.status).toBe('Success');
    expect(freeze.stdout).toBe('CHECKPOINT\n');

    sim.setExecBehaviour('shop', 'cache', {
      redis: { rules: [{ commandPrefix: ['redis-cli'], exitCode: 3, stderr: 'boom\n', durationMs: 30 }] },
    });
    const failed = await run('cache', 'redis', ['redis-cli', 'BGSAVE']);
    expect(failed.status.status).toBe('Failure');
    expect(failed.status.reason).toBe('NonZeroExitCode');
    expect(failed.status.details?.causes).toEqual([{ reason: 'ExitCode', message: '3' }]);
    expect(failed.stderr).toBe('boom\n');

    const log = sim.execLog();
    expect(log.map((r) => [r.pod, r.exitCode, r.aborted])).toEqual([
      ['postgres-0', 0, false],
      ['cache', 3, false],
    ]);
    const freezeRecord = log[0]!;
    expect(freezeRecord.command[2]).toContain('fsfreeze -f');
    const tookMs = Date.parse(freezeRecord.endedAt!) - Date.parse(freezeRecord.startedAt);
    expect(tookMs).toBeGreaterThanOrEqual(195); // scripted 200 ms freeze
    expect(freezeRecord.startedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const unknownContainer = await exec.exec('shop', 'cache', 'nope', ['true'], null, null, null, false).catch((e: unknown) => e);
    expect(String(unknownContainer)).toMatch(/400/);
    // A refused exec is logged too, saying why; nothing ran.
    expect(sim.execLog({ pod: 'cache' }).at(-1)).toMatchObject({
      container: 'nope',
      command: ['true'],
      exitCode: null,
      aborted: false,
      refused: 'container nope is not valid for pod cache',
    });

    const core = kc.makeApiClient(k8s.CoreV1Api);
    const setPhase = async (phase: string) => {
      const current = await core.readNamespacedPod({ namespace: 'shop', name: 'cache' });
      await core.replaceNamespacedPodStatus({
        namespace: 'shop',
        name: 'cache',
        body: { ...current, status: { ...current.status, phase } },
      });
    };
    await setPhase('Pending');
    try {
      const notRunning = await exec.exec('shop', 'cache', 'redis', ['redis-cli', 'SAVE'], null, null, null, false).catch((e: unknown) => e);
      expect(String(notRunning)).toMatch(/400/);
      expect(sim.execLog({ pod: 'cache' }).at(-1)).toMatchObject({
        container: 'redis',
        command: ['redis-cli', 'SAVE'],
        exitCode: null,
        refused: 'unable to upgrade connection: pod cache is not running (phase Pending)',
      });
    } finally {
      await setPhase('Running');
    }
  });

  it('records an exec whose client disconnects mid-command as aborted', async () => {
    sim.setExecBehaviour('shop', 'cache', { '*': { default: { durationMs: 5000 } } });
    const ws = await new k8s.Exec(kc, execTransport(kc)).exec('shop', 'cache', 'redis', ['sleep', '5'], null, null, null, false);
    await waitFor(() => sim.execLog({ pod: 'cache' }).some((r) => r.command[0] === 'sleep'), 2000, 'exec start');
    ws.close();
    await waitFor(() => sim.execLog({ pod: 'cache' }).some((r) => r.command[0] === 'sleep' && r.endedAt !== null), 3000, 'abort recorded');
    const record = sim.execLog({ pod: 'cache' }).find((r) => r.command[0] === 'sleep')!;
    expect(record.aborted).toBe(true);
    expect(record.exitCode).toBeNull();
  });

  it('holds an exec with a `hold` outcome until the control API releases it, then ends with its outcome', async () => {
    sim.setExecBehaviour('shop', 'cache', { redis: { rules: [{ commandPrefix: ['hold'], hold: true, exitCode: 4 }] } });
    try {
      let status: k8s.V1Status | undefined;
      await new k8s.Exec(kc, execTransport(kc)).exec('shop', 'cache', 'redis', ['hold', 'me'], null, null, null, false, (s) => {
        status = s;
      });
      const running = () => sim.execLog({ pod: 'cache' }).find((r) => r.command[0] === 'hold');
      await waitFor(() => running() !== undefined, 2000, 'exec start');
      // Nothing else to wait for: a held exec has no timer. The other pod's release leaves it held.
      expect(sim.releaseExecs('shop', 'postgres-0')).toBe(0);
      expect(running()?.endedAt).toBeNull();
      const res = await fetch(`${sim.url}/_sim/pods/shop/cache/exec/release`, { method: 'POST' });
      expect(await res.json()).toEqual({ released: 1 });
      await waitFor(() => status !== undefined, 3000, 'exec end');
      expect(status?.details?.causes).toEqual([{ reason: 'ExitCode', message: '4' }]);
      expect(running()).toMatchObject({ exitCode: 4, aborted: false });
      expect(sim.releaseExecs('shop', 'cache')).toBe(0);
    } finally {
      sim.setExecBehaviour('shop', 'cache', undefined);
    }
  });
});

function parseDemoWithoutCrd(): unknown[] {
  const text = readFileSync(new URL('../fixtures/demo.yaml', import.meta.url), 'utf8');
  return parseAllDocuments(text)
    .map((d) => d.toJS() as { kind?: string })
    .filter((o) => o && o.kind !== 'SimFixture');
}
