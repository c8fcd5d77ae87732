import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type BackedUpItem,
  type RestoreObject,
  type RestoreSpec,
  restoreDiff,
  selectRestoreItems,
  splitGroupResource,
} from '../packages/core/src/index.js';
import { pvrLabels } from '../packages/kube/src/index.js';
import { DEFAULT_RESTORE_WAIT_IMAGE } from '../packages/platform/src/index.js';
import { backupLayout, FileSystemStorage, readBackupTarball, readGzipJson } from '../packages/storage/src/index.js';
import { type DescribedEntry, describeTree } from '../packages/testing/src/index.js';
import { apiClient, REPO_ROOT, type ServiceProcess, type Stack, startStack, waitFor } from './reliability/support/stack.js';

/*
 * The round trip of the demo cluster through real processes (the api, a worker and three node
 * agents as OS processes, the simulator with its scheduler, kubelet and provisioner): back up
 * shop and media, delete both namespaces (and the volumes their claims held), restore — every
 * object equals its original up to the documented transforms (core's restoreDiff), every restored
 * volume holds the backed-up files byte for byte (checksum, mode, mtime), and every post-restore
 * hook ran after its pod's PodVolumeRestores completed.
 */

const DEMO_FIXTURE = join(REPO_ROOT, 'packages/kube-sim/fixtures/demo.yaml');
const NODES = ['node-a', 'node-b', 'node-c'];
const NAMESPACES = ['shop', 'media'];
const HOOK = ['/bin/sh', '-c', 'echo restored > /tmp/restored'];

type Tree = Record<string, DescribedEntry>;
const withoutMarkers = (tree: Tree): Tree =>
  Object.fromEntries(Object.entries(tree).filter(([p]) => p !== '.stowage' && !p.startsWith('.stowage/')));

describe('restore of the demo cluster through real processes', () => {
  let stack: Stack;
  let api: ServiceProcess;
  let client: ReturnType<typeof apiClient>;
  /** `<ns>/<pod>/<volume>` → the files as backed up. */
  const originalTrees = new Map<string, Tree>();

  beforeAll(async () => {
    stack = await startStack({ fixture: DEMO_FIXTURE, withCrd: false });
    stack.sim.setNodeAgents(NODES);
    api = await stack.spawn('api', 'api');
    await stack.spawnWorkers('worker-1');
    for (const node of NODES) await stack.spawn('node-agent', `agent-${node}`, stack.agentEnv(node));
    for (const node of NODES) await stack.agents.registerNodeAgent(node, 30 * 60_000);
    client = apiClient(stack, () => api);
  }, 180_000);

  afterAll(async () => {
    await stack?.close();
  });

  it('back up, delete the namespaces, restore: objects, volume bytes and hook order', async () => {
    // What the backup will hold, as the app sees it.
    for (const ns of NAMESPACES) {
      const pods = (await stack.kube.requestJson<{ items: RestoreObject[] }>({ path: `/api/v1/namespaces/${ns}/pods` })).items;
      for (const pod of pods) {
        for (const volume of stack.sim.podVolumes(ns, pod.metadata.name)) {
          originalTrees.set(`${ns}/${pod.metadata.name}/${volume.volume}`, await describeTree(volume.path));
        }
      }
    }
    await client.submit('bk-demo', { includedNamespaces: NAMESPACES, defaultVolumesToFsBackup: true });
    const backup = await waitFor(
      'backup bk-demo to end',
      async () => {
        const b = await client.get('bk-demo');
        return ['Completed', 'PartiallyFailed', 'Failed'].includes(String(b.phase)) ? b : undefined;
      },
      180_000,
      250,
    );
    expect(backup.phase).toBe('Completed');
    const storage = new FileSystemStorage(stack.storageDir);
    const backedUp: BackedUpItem[] = [];
    for await (const item of readBackupTarball(storage, 'bk-demo')) {
      backedUp.push({
        ...splitGroupResource(item.groupResource),
        namespace: item.namespace,
        name: item.name,
        object: item.object as RestoreObject,
      });
    }

    // A namespace deleted takes its claims with it, and their volumes (reclaim policy Delete).
    const claims = (
      await stack.kube.requestJson<{ items: Array<{ spec: { volumeName?: string } }> }>({ path: '/api/v1/persistentvolumeclaims' })
    ).items;
    for (const ns of NAMESPACES) await stack.kube.core.deleteNamespace({ name: ns });
    for (const claim of claims) {
      if (claim.spec.volumeName) await stack.kube.core.deletePersistentVolume({ name: claim.spec.volumeName }).catch(() => undefined);
    }
    for (const ns of NAMESPACES) {
      await waitFor(
        `${ns} gone`,
        async () => ((await stack.kube.core.readNamespace({ name: ns }).catch(() => undefined)) ? undefined : true),
        30_000,
        100,
      );
    }

    const spec = {
      backupName: 'bk-demo',
      includedNamespaces: NAMESPACES,
      hooks: {
        resources: [{ name: 'mark-restored', includedNamespaces: NAMESPACES, postHooks: [{ exec: { command: HOOK, onError: 'Fail' } }] }],
      },
    };
    const created = await client.call('POST', '/v1/restores', { name: 'rs-demo', spec });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const restore = await waitFor(
      'restore rs-demo to end',
      async () => {
        const r = (await client.call('GET', '/v1/restores/rs-demo')).body;
        return ['Completed', 'PartiallyFailed', 'Failed', 'Canceled'].includes(String(r.phase)) ? r : undefined;
      },
      240_000,
      250,
    );
    if (restore.phase !== 'Completed') {
      const logs = await fetch(`http://127.0.0.1:${api.port}/v1/restores/rs-demo/logs`, {
        headers: { authorization: `Bearer ${stack.token}` },
      });
      throw new Error(`restore ended ${restore.phase}:\n${await logs.text()}\n${JSON.stringify(restore, null, 1)}`);
    }

    // Objects: every restored one equals its original up to the documented transforms (the
    // diff's context is the plan the restore made: core's selection over the same backup).
    const restoreSpec = restore.spec as RestoreSpec;
    const storedPvbs = ((await readGzipJson(storage, backupLayout('bk-demo').podVolumeBackups)) ?? []) as Array<{
      spec: { pod: { namespace: string; name: string }; volume: string };
      status?: { phase?: string; snapshotID?: string };
    }>;
    const selection = selectRestoreItems(
      backedUp,
      restoreSpec,
      storedPvbs.map((p) => ({
        podNamespace: p.spec.pod.namespace,
        podName: p.spec.pod.name,
        volume: p.spec.volume,
        phase: p.status?.phase ?? 'New',
        ...(p.status?.snapshotID ? { snapshotID: p.status.snapshotID } : {}),
      })),
    );
    expect(selection.items.length).toBe((restore.progress as { totalItems: number }).totalItems);
    const context = {
      backupName: 'bk-demo',
      restoreName: 'rs-demo',
      restoreUid: String(restore.uid),
      spec: restoreSpec,
      volumes: selection.volumes,
      restoreWait: { image: DEFAULT_RESTORE_WAIT_IMAGE, command: ['node', '/app/dist/restore-wait.js'] },
    };
    for (const item of selection.items) {
      const base = item.group === '' ? `/api/${item.object.apiVersion}` : `/apis/${item.object.apiVersion}`;
      const path = `${base}${item.targetNamespace ? `/namespaces/${item.targetNamespace}` : ''}/${item.resource}/${item.targetName}`;
      const restored = await stack.kube.requestJson<RestoreObject>({ path });
      expect(restoreDiff(item.object, restored, context), path).toEqual([]);
    }
    const pvrs = restore.pvrs as Array<{ name: string; pod: string; volume: string; phase: string; completionTimestamp?: string }>;
    expect(pvrs.length).toBeGreaterThan(0);
    expect(pvrs.every((p) => p.phase === 'Completed')).toBe(true);

    // Volume data: every restored volume holds exactly the backed-up files.
    for (const pvr of pvrs) {
      const [ns, podName] = pvr.pod.split('/') as [string, string];
      const dir = stack.sim.podVolumes(ns, podName).find((v) => v.volume === pvr.volume)?.path;
      expect(dir, `${pvr.pod} ${pvr.volume} has a volume directory`).toBeDefined();
      const original = originalTrees.get(`${pvr.pod}/${pvr.volume}`);
      expect(original, `${pvr.pod} ${pvr.volume} was backed up`).toBeDefined();
      expect(withoutMarkers(await describeTree(dir as string))).toEqual(original);
    }

    // Hooks: each ran after its pod's PVRs completed.
    const runs = restore.hookRuns as Array<{ pod: string; outcome: string; exitCode?: number; startedAt?: string }>;
    expect(runs.length).toBeGreaterThan(0);
    for (const run of runs) {
      expect(run.outcome, run.pod).toBe('exited');
      expect(run.exitCode, run.pod).toBe(0);
      for (const pvr of pvrs.filter((p) => p.pod === run.pod)) {
        expect(Date.parse(String(run.startedAt)), `${run.pod}: hook after PVR ${pvr.name}`).toBeGreaterThanOrEqual(
          Date.parse(String(pvr.completionTimestamp)),
        );
      }
    }
    // No PVR was created twice: one per (restored pod, volume), each labelled with this restore.
    const all = await stack.kube.requestJson<{
      items: Array<{ metadata: { labels?: Record<string, string> }; spec: { pod: { uid: string }; volume: string } }>;
    }>({
      path: '/apis/stowage.dev/v1alpha1/namespaces/stowage/podvolumerestores',
    });
    const mine = all.items.filter((p) => p.metadata.labels?.[pvrLabels.restoreName] === 'rs-demo');
    expect(new Set(mine.map((p) => `${p.spec.pod.uid}/${p.spec.volume}`)).size).toBe(mine.length);
    expect(mine.length).toBe(pvrs.length);
  });

  it('a finished restore reads the same from storage once Redis has lost it: view, PVRs, hook runs, items, logs', async () => {
    const read = async () => {
      const view = await client.call('GET', '/v1/restores/rs-demo');
      const items = await client.call('GET', '/v1/restores/rs-demo/items?limit=1000');
      const logs = await fetch(`http://127.0.0.1:${api.port}/v1/restores/rs-demo/logs`, {
        headers: { authorization: `Bearer ${stack.token}` },
      });
      return { status: [view.status, items.status, logs.status], view: view.body, items: items.body, logs: await logs.text() };
    };
    const before = await read();
    expect(before.status).toEqual([200, 200, 200]);
    expect((before.view.pvrs as unknown[]).length).toBeGreaterThan(0);
    expect((before.view.hookRuns as unknown[]).length).toBeGreaterThan(0);
    expect(before.logs.trim().split('\n').length).toBeGreaterThan(0);
    await stack.redis.flushall();
    expect(await stack.redis.dbsize()).toBe(0);
    const after = await read();
    // The same, the storage figures too: storage's copy counts finalize's own writes of it.
    expect((before.view as { storage: { requests: { put: number } } }).storage.requests.put).toBeGreaterThan(0);
    expect(after).toEqual(before);
    const cancel = await client.call('POST', '/v1/restores/rs-demo/cancel');
    expect(cancel.status).toBe(409);
    expect(JSON.stringify(cancel.body)).toContain('has already ended (phase Completed)');
    // Deleting it removes the archive; then it is gone.
    expect((await client.call('DELETE', '/v1/restores/rs-demo')).status).toBe(200);
    expect((await client.call('GET', '/v1/restores/rs-demo')).status).toBe(404);
  });
});
