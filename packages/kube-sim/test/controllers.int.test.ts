/*
 * The simulator's cluster behaviour a restore relies on (docs/architecture.md#the-restore-job-graph), seen through the real
 * client-node over HTTP: scheduler, dynamic provisioner, kubelet (volume directories, init
 * containers, stowage-restore-wait and its done markers), CRD Established, namespace Active.
 */
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pvrCrdPath, type Simulator, startSimulator } from '../src/index.js';
import { apiExceptionBody, kubeConfigFor } from './sim-helpers.js';

const fixture = {
  objects: [
    { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1', labels: { zone: 'a', disk: 'ssd' } } },
    { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n2', labels: { zone: 'b' } } },
    { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n3', labels: { zone: 'b' } } },
    {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: 'standard', annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } },
      provisioner: 'sim.csi.stowage.dev',
      reclaimPolicy: 'Delete',
    },
    {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: 'fast' },
      provisioner: 'fast.csi.example',
      reclaimPolicy: 'Retain',
    },
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'app' } },
  ],
};

/** Polls `read` until `accept` holds (or fails after `timeoutMs`), returning the accepted value. */
async function eventually<T>(read: () => Promise<T>, accept: (value: T) => boolean, what: string, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (accept(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last value: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function podBody(name: string, spec: Partial<k8s.V1PodSpec>, annotations?: Record<string, string>): k8s.V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'app', ...(annotations ? { annotations } : {}) },
    spec: { containers: [{ name: 'main', image: 'busybox' }], ...spec },
  };
}

function claimBody(name: string, spec: Partial<k8s.V1PersistentVolumeClaimSpec> = {}): k8s.V1PersistentVolumeClaim {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, namespace: 'app' },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '2Gi' } }, ...spec },
  };
}

describe('simulated cluster controllers (client-node over HTTP)', () => {
  let sim: Simulator;
  let core: k8s.CoreV1Api;
  let kc: k8s.KubeConfig;

  beforeAll(async () => {
    sim = await startSimulator({ fixture });
    kc = kubeConfigFor(sim);
    core = kc.makeApiClient(k8s.CoreV1Api);
  });
  afterAll(async () => {
    await sim?.close();
  });

  const readPod = (name: string) => core.readNamespacedPod({ namespace: 'app', name });
  const readClaim = (name: string) => core.readNamespacedPersistentVolumeClaim({ namespace: 'app', name });

  describe('scheduler', () => {
    it('places a pod without nodeName on a node matching its nodeSelector, and starts it Running and Ready', async () => {
      const created = await core.createNamespacedPod({ namespace: 'app', body: podBody('sel-a', { nodeSelector: { zone: 'a' } }) });
      expect(created.spec?.nodeName).toBe('n1');
      expect(created.status?.phase).toBe('Running');
      expect(created.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
      for (const name of ['sel-b1', 'sel-b2', 'sel-b3', 'sel-b4']) {
        const pod = await core.createNamespacedPod({ namespace: 'app', body: podBody(name, { nodeSelector: { zone: 'b' } }) });
        expect(['n2', 'n3']).toContain(pod.spec?.nodeName);
      }
    });

    it('prefers nodes that run a node agent (set, or a Running node-agent pod on the node)', async () => {
      sim.setNodeAgents(['n3']);
      try {
        for (const name of ['agent-1', 'agent-2', 'agent-3']) {
          const pod = await core.createNamespacedPod({ namespace: 'app', body: podBody(name, {}) });
          expect(pod.spec?.nodeName).toBe('n3');
        }
        // no agent node matches: any matching node
        expect(
          (await core.createNamespacedPod({ namespace: 'app', body: podBody('agent-4', { nodeSelector: { zone: 'a' } }) })).spec?.nodeName,
        ).toBe('n1');
      } finally {
        sim.setNodeAgents([]);
      }
      await core.createNamespacedPod({
        namespace: 'app',
        body: {
          ...podBody('node-agent-n2', { nodeName: 'n2' }),
          metadata: { name: 'node-agent-n2', namespace: 'app', labels: { 'app.kubernetes.io/name': 'stowage-node-agent' } },
        },
      });
      for (const name of ['agent-5', 'agent-6']) {
        expect((await core.createNamespacedPod({ namespace: 'app', body: podBody(name, {}) })).spec?.nodeName).toBe('n2');
      }
      await core.deleteNamespacedPod({ namespace: 'app', name: 'node-agent-n2' });
    });

    it('keeps an unschedulable pod Pending, then places it when a matching node appears', async () => {
      const created = await core.createNamespacedPod({ namespace: 'app', body: podBody('gpu', { nodeSelector: { gpu: 'yes' } }) });
      expect(created.spec?.nodeName).toBeUndefined();
      expect(created.status?.phase).toBe('Pending');
      const condition = created.status?.conditions?.find((c) => c.type === 'PodScheduled');
      expect(condition).toMatchObject({ status: 'False', reason: 'Unschedulable' });
      expect(condition?.message).toMatch(/0\/3 nodes are available/);
      await core.createNode({ body: { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n4', labels: { gpu: 'yes' } } } });
      const running = await eventually(
        () => readPod('gpu'),
        (pod) => pod.status?.phase === 'Running',
        'the gpu pod to run',
      );
      expect(running.spec?.nodeName).toBe('n4');
      expect(running.status?.conditions?.find((c) => c.type === 'PodScheduled')?.status).toBe('True');
    });
  });

  describe('dynamic provisioner', () => {
    it('gives a claim with a storage class a new bound PV of that class', async () => {
      const created = await core.createNamespacedPersistentVolumeClaim({
        namespace: 'app',
        body: claimBody('fast-claim', { storageClassName: 'fast' }),
      });
      expect(created.status?.phase).not.toBe('Bound');
      const bound = await eventually(
        () => readClaim('fast-claim'),
        (c) => c.status?.phase === 'Bound',
        'fast-claim bound',
      );
      expect(bound.spec?.volumeName).toBe(`pvc-${created.metadata?.uid}`);
      expect(bound.status?.capacity).toEqual({ storage: '2Gi' });
      const pv = await core.readPersistentVolume({ name: bound.spec!.volumeName! });
      expect(pv.spec?.storageClassName).toBe('fast');
      expect(pv.spec?.persistentVolumeReclaimPolicy).toBe('Retain');
      expect(pv.spec?.csi?.driver).toBe('fast.csi.example');
      expect(pv.spec?.claimRef).toMatchObject({ namespace: 'app', name: 'fast-claim', uid: created.metadata?.uid });
      expect(pv.status?.phase).toBe('Bound');
    });

    it('uses the default class for a claim without one, and leaves a claim with storageClassName "" to static binding', async () => {
      await core.createNamespacedPersistentVolumeClaim({ namespace: 'app', body: claimBody('no-class', { storageClassName: '' }) });
      await core.createNamespacedPersistentVolumeClaim({ namespace: 'app', body: claimBody('default-claim') });
      const bound = await eventually(
        () => readClaim('default-claim'),
        (c) => c.status?.phase === 'Bound',
        'default-claim bound',
      );
      expect((await core.readPersistentVolume({ name: bound.spec!.volumeName! })).spec?.storageClassName).toBe('standard');
      // the provisioner looked at no-class first (created first) and left it alone
      const unbound = await readClaim('no-class');
      expect(unbound.spec?.volumeName).toBeUndefined();
      expect(unbound.status?.phase).not.toBe('Bound');
      // a PV that claims it binds it (static binding), no PV is provisioned
      await core.createPersistentVolume({
        body: {
          apiVersion: 'v1',
          kind: 'PersistentVolume',
          metadata: { name: 'static-pv' },
          spec: {
            capacity: { storage: '5Gi' },
            accessModes: ['ReadWriteOnce'],
            hostPath: { path: '/data' },
            claimRef: { namespace: 'app', name: 'no-class' },
          },
        },
      });
      const statically = await eventually(
        () => readClaim('no-class'),
        (c) => c.status?.phase === 'Bound',
        'no-class bound to static-pv',
      );
      expect(statically.spec?.volumeName).toBe('static-pv');
      expect(statically.status?.capacity).toEqual({ storage: '5Gi' });
    });

    it('binds a claim naming its PV once the PV exists', async () => {
      await core.createNamespacedPersistentVolumeClaim({
        namespace: 'app',
        body: claimBody('named', { volumeName: 'later-pv', storageClassName: '' }),
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect((await readClaim('named')).status?.phase).not.toBe('Bound');
      await core.createPersistentVolume({
        body: {
          apiVersion: 'v1',
          kind: 'PersistentVolume',
          metadata: { name: 'later-pv' },
          spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], hostPath: { path: '/x' } },
        },
      });
      await eventually(
        () => readClaim('named'),
        (c) => c.status?.phase === 'Bound',
        'named bound',
      );
      const pv = await core.readPersistentVolume({ name: 'later-pv' });
      expect(pv.spec?.claimRef).toMatchObject({ namespace: 'app', name: 'named' });
      expect(pv.status?.phase).toBe('Bound');
    });
  });

  describe('kubelet', () => {
    it('waits for the claim, creates the volume directories, runs stowage-restore-wait until every marker is there, removes the markers, then the next init container, then Running', async () => {
      const restoreUid = 'restore-uid-1';
      await core.createNamespacedPersistentVolumeClaim({ namespace: 'app', body: claimBody('data') });
      // the watch records every phase the pod goes through, as a restore's informer would
      const seen: { phase?: string; init?: string[] }[] = [];
      const watch = await new k8s.Watch(kc).watch(
        '/api/v1/namespaces/app/pods',
        { fieldSelector: 'metadata.name=restored' },
        (_type, pod: k8s.V1Pod) => {
          seen.push({
            ...(pod.status?.phase ? { phase: pod.status.phase } : {}),
            init: (pod.status?.initContainerStatuses ?? []).map((s) => `${s.name}:${Object.keys(s.state ?? {})[0]}`),
          });
        },
        () => undefined,
      );
      try {
        const created = await core.createNamespacedPod({
          namespace: 'app',
          body: podBody(
            'restored',
            {
              nodeSelector: { zone: 'a' },
              initContainers: [
                {
                  name: 'stowage-restore-wait',
                  image: 'stowage/node-agent',
                  command: ['node', '/app/dist/restore-wait.js'],
                  env: [{ name: 'STOWAGE_RESTORE_UID', value: restoreUid }],
                  volumeMounts: [
                    { name: 'data', mountPath: '/restores/data' },
                    { name: 'scratch', mountPath: '/restores/scratch' },
                  ],
                },
                { name: 'prep', image: 'busybox', command: ['sh', '-c', 'migrate'] },
              ],
              volumes: [
                { name: 'data', persistentVolumeClaim: { claimName: 'data' } },
                { name: 'scratch', emptyDir: {} },
                { name: 'config', configMap: { name: 'cfg' } },
              ],
            },
            { 'sim.stowage.dev/exec': JSON.stringify({ prep: { rules: [{ commandContains: 'migrate', exitCode: 0, durationMs: 150 }] } }) },
          ),
        });
        expect(created.status?.phase).toBe('Pending');
        expect(created.spec?.nodeName).toBe('n1');
        const claim = await eventually(
          () => readClaim('data'),
          (c) => c.status?.phase === 'Bound',
          'data bound',
        );
        const pvName = claim.spec!.volumeName!;
        const uid = created.metadata!.uid!;
        const dataDir = join(sim.dataRoot, 'n1', 'pods', uid, 'volumes', 'kubernetes.io~csi', pvName, 'mount');
        const scratchDir = join(sim.dataRoot, 'n1', 'pods', uid, 'volumes', 'kubernetes.io~empty-dir', 'scratch');
        await eventually(async () => existsSync(dataDir) && existsSync(scratchDir), Boolean, 'the volume directories');
        expect(
          sim
            .podVolumes('app', 'restored')
            .map((v) => v.path)
            .sort(),
        ).toEqual([dataDir, scratchDir].sort());

        await eventually(
          () => readPod('restored'),
          (pod) => pod.status?.initContainerStatuses?.[0]?.state?.running !== undefined,
          'stowage-restore-wait running',
        );
        // one volume restored: still waiting
        writeFileSync(join(dataDir, 'PG_VERSION'), '16\n');
        mkdirSync(join(dataDir, '.stowage'));
        writeFileSync(join(dataDir, '.stowage', restoreUid), '');
        await new Promise((resolve) => setTimeout(resolve, 150));
        const waiting = await readPod('restored');
        expect(waiting.status?.phase).toBe('Pending');
        expect(waiting.status?.initContainerStatuses?.[0]?.state?.running).toBeDefined();
        expect(existsSync(join(dataDir, '.stowage', restoreUid))).toBe(true);
        // someone else writes the pod meanwhile (a restore labelling it): the kubelet carries on
        await core.patchNamespacedPod(
          { namespace: 'app', name: 'restored', body: { metadata: { labels: { touched: 'yes' } } } },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
        );

        // the other one too (its .stowage holds something else as well, which stays)
        mkdirSync(join(scratchDir, '.stowage'));
        writeFileSync(join(scratchDir, '.stowage', 'other-restore'), '');
        writeFileSync(join(scratchDir, '.stowage', restoreUid), '');
        const markersDoneAt = Date.now();
        const running = await eventually(
          () => readPod('restored'),
          (pod) => pod.status?.phase === 'Running',
          'the pod to run',
        );
        expect(Date.now() - markersDoneAt).toBeGreaterThanOrEqual(150); // prep's scripted 150 ms ran after restore-wait
        expect(readdirSync(dataDir)).toEqual(['PG_VERSION']);
        expect(readdirSync(join(scratchDir, '.stowage'))).toEqual(['other-restore']);
        expect(
          running.status?.initContainerStatuses?.map((s) => [s.name, s.state?.terminated?.exitCode, s.state?.terminated?.reason]),
        ).toEqual([
          ['stowage-restore-wait', 0, 'Completed'],
          ['prep', 0, 'Completed'],
        ]);
        const [wait, prep] = running.status!.initContainerStatuses!;
        expect(new Date(prep!.state!.terminated!.startedAt!).getTime()).toBeGreaterThanOrEqual(
          new Date(wait!.state!.terminated!.finishedAt!).getTime(),
        );
        expect(running.status?.conditions?.filter((c) => c.status === 'True').map((c) => c.type)).toEqual([
          'PodScheduled',
          'Initialized',
          'ContainersReady',
          'Ready',
        ]);
        expect(running.status?.containerStatuses?.[0]).toMatchObject({ name: 'main', ready: true });
        expect(running.metadata?.labels).toEqual({ touched: 'yes' });
        expect(sim.warnings).toEqual([]);
        // watches saw the steps in order (the watch's last event may still be on its way after the GET above)
        await eventually(
          async () => seen,
          (events) => events.some((e) => e.phase === 'Running'),
          'the watch to see the pod run',
        );
        const phases = seen.map((s) => s.phase).filter((phase, i, all) => phase !== all[i - 1]);
        expect(phases).toEqual(['Pending', 'Running']);
        const initSteps = seen.map((s) => (s.init ?? []).join(',')).filter((step, i, all) => step !== all[i - 1]);
        expect(initSteps).toEqual([
          'stowage-restore-wait:waiting,prep:waiting',
          'stowage-restore-wait:running,prep:waiting',
          'stowage-restore-wait:terminated,prep:waiting',
          'stowage-restore-wait:terminated,prep:running',
          'stowage-restore-wait:terminated,prep:terminated',
        ]);
      } finally {
        watch.abort();
      }
    });

    it.each([
      ['Never', 'Failed'],
      ['Always', 'Pending'],
    ])('a failing init container with restartPolicy %s leaves the pod %s and never starts it', async (restartPolicy, phase) => {
      const name = `failing-${restartPolicy.toLowerCase()}`;
      await core.createNamespacedPod({
        namespace: 'app',
        body: podBody(
          name,
          {
            restartPolicy,
            initContainers: [
              { name: 'check', image: 'busybox', command: ['check'] },
              { name: 'never', image: 'busybox' },
            ],
          },
          {
            'sim.stowage.dev/exec': JSON.stringify({ check: { default: { exitCode: 3 } } }),
          },
        ),
      });
      const pod = await eventually(
        () => readPod(name),
        (p) => p.status?.initContainerStatuses?.[0]?.state?.terminated !== undefined,
        `${name}'s init container to end`,
      );
      await new Promise((resolve) => setTimeout(resolve, 60));
      const after = await readPod(name);
      expect(after.status?.phase).toBe(phase);
      expect(pod.status?.initContainerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 3, reason: 'Error' });
      expect(after.status?.initContainerStatuses?.[1]?.state?.waiting).toBeDefined();
    });

    it('fails stowage-restore-wait after its timeout when a marker never comes', async () => {
      await core.createNamespacedPod({
        namespace: 'app',
        body: podBody('never-restored', {
          restartPolicy: 'Never',
          initContainers: [
            {
              name: 'stowage-restore-wait',
              image: 'x',
              env: [
                { name: 'STOWAGE_RESTORE_UID', value: 'r' },
                { name: 'STOWAGE_RESTORE_WAIT_TIMEOUT_MS', value: '200' },
              ],
              volumeMounts: [{ name: 'scratch', mountPath: '/restores/scratch' }],
            },
          ],
          volumes: [{ name: 'scratch', emptyDir: {} }],
        }),
      });
      const failed = await eventually(
        () => readPod('never-restored'),
        (p) => p.status?.phase === 'Failed',
        'the pod to fail',
      );
      expect(failed.status?.initContainerStatuses?.[0]?.state?.terminated).toMatchObject({
        exitCode: 1,
        message: 'timed out waiting for the restore of volume(s) scratch',
      });
    });
  });

  it('makes a namespace created through the API Active', async () => {
    const created = await core.createNamespace({ body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'fresh' } } });
    expect(created.status?.phase).toBe('Active');
  });
});

describe('CRD Established after crdEstablishDelayMs', () => {
  it('serves custom resources only once the CRD is Established (404 before)', async () => {
    const sim = await startSimulator({ fixture, crdEstablishDelayMs: 200 });
    try {
      const kc = kubeConfigFor(sim);
      const ext = kc.makeApiClient(k8s.ApiextensionsV1Api);
      const custom = kc.makeApiClient(k8s.CustomObjectsApi);
      const crdBody = {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: 'widgets.example.com' },
        spec: {
          group: 'example.com',
          scope: 'Namespaced',
          names: { plural: 'widgets', singular: 'widget', kind: 'Widget' },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
            },
          ],
        },
      };
      const created = await fetch(`${sim.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${sim.adminToken}` },
        body: JSON.stringify(crdBody),
      });
      expect(created.status).toBe(201);
      const established = (crd: k8s.V1CustomResourceDefinition) => crd.status?.conditions?.find((c) => c.type === 'Established')?.status;
      expect(established((await created.json()) as k8s.V1CustomResourceDefinition)).toBe('False');
      const widget = { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w1', namespace: 'app' }, size: 3 };
      const early = await custom
        .createNamespacedCustomObject({ group: 'example.com', version: 'v1', namespace: 'app', plural: 'widgets', body: widget })
        .catch((error: unknown) => error);
      expect(apiExceptionBody(early).code).toBe(404);
      const ready = await eventually(
        () => ext.readCustomResourceDefinition({ name: 'widgets.example.com' }),
        (crd) => established(crd) === 'True',
        'Established',
      );
      expect(ready.status?.acceptedNames?.kind).toBe('Widget');
      const made = (await custom.createNamespacedCustomObject({
        group: 'example.com',
        version: 'v1',
        namespace: 'app',
        plural: 'widgets',
        body: widget,
      })) as { size?: number };
      expect(made.size).toBe(3);
    } finally {
      await sim.close();
    }
  });
});

describe('CRD conditions on later writes', () => {
  it("an unchanged CRD applied again keeps its resourceVersion and its conditions' transition times", async () => {
    const sim = await startSimulator({ fixture });
    try {
      const crd = {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: 'gadgets.example.com' },
        spec: {
          group: 'example.com',
          scope: 'Namespaced',
          names: { plural: 'gadgets', singular: 'gadget', kind: 'Gadget' },
          versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object' } } }],
        },
      };
      const apply = async () => {
        const res = await fetch(`${sim.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com?fieldManager=t`, {
          method: 'PATCH',
          headers: { 'Content-Type': 'application/apply-patch+yaml', Authorization: `Bearer ${sim.adminToken}` },
          body: JSON.stringify(crd),
        });
        expect(res.status).toBeLessThan(300);
        return (await res.json()) as k8s.V1CustomResourceDefinition;
      };
      const first = await apply();
      // Past the timestamps' one-second resolution, so a recomputed time would differ.
      await new Promise((r) => setTimeout(r, 1_100));
      const second = await apply();
      expect(second.metadata?.resourceVersion).toBe(first.metadata?.resourceVersion);
      expect(second.status?.conditions).toEqual(first.status?.conditions);
    } finally {
      await sim.close();
    }
  });
});

describe('stowage-restore-wait woken by its PodVolumeRestore', () => {
  it('looks for its marker when a PVR of its pod is made terminal, not only at its poll (the real program wakes on inotify)', async () => {
    // a poll that never comes within the test: the pod can only start through the wake
    const sim = await startSimulator({ fixture, extraManifests: [pvrCrdPath], restoreWaitPollMs: 3_600_000 });
    try {
      const kc = kubeConfigFor(sim);
      const core = kc.makeApiClient(k8s.CoreV1Api);
      const custom = kc.makeApiClient(k8s.CustomObjectsApi);
      const readPod = () => core.readNamespacedPod({ namespace: 'app', name: 'woken' });
      const restoreUid = 'restore-uid-wake';
      const created = await core.createNamespacedPod({
        namespace: 'app',
        body: podBody('woken', {
          initContainers: [
            {
              name: 'stowage-restore-wait',
              image: 'stowage/node-agent',
              env: [{ name: 'STOWAGE_RESTORE_UID', value: restoreUid }],
              volumeMounts: [{ name: 'scratch', mountPath: '/restores/scratch' }],
            },
          ],
          volumes: [{ name: 'scratch', emptyDir: {} }],
        }),
      });
      await eventually(readPod, (pod) => pod.status?.initContainerStatuses?.[0]?.state?.running !== undefined, 'restore-wait running');
      const where = { group: 'stowage.dev', version: 'v1alpha1', namespace: 'app', plural: 'podvolumerestores' };
      await custom.createNamespacedCustomObject({
        ...where,
        body: {
          apiVersion: 'stowage.dev/v1alpha1',
          kind: 'PodVolumeRestore',
          metadata: { name: 'woken-scratch' },
          spec: {
            pod: { namespace: 'app', name: 'woken', uid: created.metadata!.uid! },
            volume: 'scratch',
            snapshotID: 's1',
            backupStorageLocation: 'default',
            repoIdentifier: 'repository',
            sourceNamespace: 'app',
            uploaderType: 'stowage',
          },
        },
      });
      const setPhase = (phase: string) =>
        custom.patchNamespacedCustomObjectStatus(
          { ...where, name: 'woken-scratch', body: { status: { phase } } },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
        );
      // the node agent's order: the marker, then the PVR's terminal status
      const [scratch] = sim.podVolumes('app', 'woken');
      mkdirSync(join(scratch!.path, '.stowage'), { recursive: true });
      writeFileSync(join(scratch!.path, '.stowage', restoreUid), '');
      // a status write that leaves the PVR running wakes nothing: the marker waits for the poll
      await setPhase('InProgress');
      await new Promise((resolve) => setTimeout(resolve, 100)); // several kubelet ticks
      expect((await readPod()).status?.phase).toBe('Pending');
      await setPhase('Completed');
      const running = await eventually(readPod, (pod) => pod.status?.phase === 'Running', 'the pod to run after its PVR completed');
      expect(running.status?.initContainerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 0, reason: 'Completed' });
      expect(existsSync(join(scratch!.path, '.stowage'))).toBe(false);
      expect(sim.warnings).toEqual([]);
    } finally {
      await sim.close();
    }
  });
});
