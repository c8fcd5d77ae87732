import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { getPod, type InformerEvent, type PodVolumeBackup, type PodVolumeRestore, restoreWaitContainer } from '@stowage/kube';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NodeAgent, startNodeAgent } from '../src/index.js';
import {
  type AgentProcess,
  describeTree,
  type Harness,
  spawnAgent,
  startHarness,
  TEST_REPO_KEY,
  waitFor,
  waitForPhase,
  waitForPvrPhase,
  writeRandomFile,
  writeVolumeTree,
} from './support.js';

// Volume restores through a real node agent process (node-a) against the simulator: the data is
// backed up through a PVB first, then restored into a new pod's volume through a PVR.
const RESTORE_UID = 'restore-uid-0001';
const BIG_FILE_BYTES = 12 * 1024 * 1024;

let h: Harness;
let storage: string;
let agentEnv: Record<string, string>;
let agentA: AgentProcess;
const children: AgentProcess[] = [];
const inProcess: NodeAgent[] = [];

function pvrPhase(name: string, phases: string[], timeoutMs?: number): Promise<PodVolumeRestore | undefined> {
  return waitForPvrPhase(h.pvrs, name, phases, timeoutMs);
}

/** Backs up one volume of a fixture pod through a PVB and returns the snapshot id. */
async function backUp(pvb: string, pod: string, volume: string): Promise<string> {
  await h.createPvb(pvb, { node: 'node-a', namespace: 'app', pod, volume });
  const done = await waitForPhase(h.pvbs, pvb, ['Completed', 'Failed'], 60_000);
  expect(done?.status?.message ?? '').toBe('');
  expect(done?.status?.phase).toBe('Completed');
  return done!.status!.snapshotID!;
}

/** Files of a volume as the app would see them: without the agent's .stowage directory. */
async function restoredTree(dir: string) {
  const tree = await describeTree(dir);
  for (const path of Object.keys(tree)) if (path === '.stowage' || path.startsWith('.stowage/')) delete tree[path];
  return tree;
}

function startAgentA(extra: Record<string, string> = {}): AgentProcess {
  const agent = spawnAgent({ ...agentEnv, ...extra });
  children.push(agent);
  return agent;
}

beforeAll(async () => {
  h = await startHarness();
  storage = await mkdtemp(join(tmpdir(), 'stowage-node-agent-restore-'));
  agentEnv = {
    KUBECONFIG: h.sim.kubeconfigPath,
    STOWAGE_NODE_NAME: 'node-a',
    STOWAGE_NAMESPACE: 'stowage',
    STOWAGE_REPO_KEY: TEST_REPO_KEY,
    STOWAGE_STORAGE: storage,
    STOWAGE_KUBELET_ROOT: h.kubeletRoot('node-a'),
    // two at once on node-a, PVBs and PVRs together; slow enough to cancel and kill mid-restore
    STOWAGE_LOAD_CONCURRENCY: '{"globalConfig": 2}',
    STOWAGE_BANDWIDTH_LIMIT: '4MiB',
    STOWAGE_RESTORE_VOLUME_DIR_TIMEOUT_MS: '8000',
    PORT: '0',
    LOG_LEVEL: 'info',
  };
  agentA = startAgentA();
  await agentA.port();
}, 120_000);

afterAll(async () => {
  await Promise.all(inProcess.map((agent) => agent.stop()));
  for (const child of children) {
    try {
      child.killHard();
    } catch {
      // already gone
    }
  }
  await h?.close();
  if (storage) await rm(storage, { recursive: true, force: true });
});

describe('node agent restoring PodVolumeRestores', () => {
  it('restores a backed-up volume into a new pod byte for byte (content, mode, mtime), writes the marker, and restore-wait clears it', async () => {
    const source = h.volumeDir('app', 'db', 'scratch');
    await writeVolumeTree(source);
    const snapshotID = await backUp('pvb-roundtrip', 'db', 'scratch');

    const podUid = await h.createPod('app', 'db-restored', { node: 'node-a', volumes: ['scratch'] });
    await h.createPvr('pvr-roundtrip', {
      restoreUid: RESTORE_UID,
      namespace: 'app',
      pod: 'db-restored',
      podUid,
      volume: 'scratch',
      snapshotID,
    });
    const claimed = await waitFor(
      () => h.pvrs.get('pvr-roundtrip'),
      (pvr) => pvr?.status?.phase !== undefined,
      60_000,
      'the agent to take the PVR',
    );
    expect(claimed?.status).toMatchObject({ phase: 'InProgress', node: 'node-a' });
    const target = h.emptyDirOf('node-a', podUid, 'scratch');
    const done = (await pvrPhase('pvr-roundtrip', ['Completed', 'Failed']))!;
    expect(done.status?.message).toBeUndefined();
    expect(done.status).toMatchObject({ phase: 'Completed', node: 'node-a' });
    const total = done.status!.progress!.totalBytes!;
    expect(total).toBeGreaterThan(2 * 1024 * 1024);
    expect(done.status!.progress!.bytesDone).toBe(total);
    expect(Date.parse(done.status!.completionTimestamp!)).toBeGreaterThanOrEqual(Date.parse(done.status!.startTimestamp!));

    expect(await restoredTree(target)).toEqual(await describeTree(source));
    expect(await readdir(join(target, '.stowage'))).toEqual([RESTORE_UID]);
    expect(JSON.parse(await readFile(join(target, '.stowage', RESTORE_UID), 'utf8'))).toMatchObject({
      pvr: 'pvr-roundtrip',
      node: 'node-a',
    });

    // The init container's program, as a process, over the pod's volumes: it finds the marker and
    // leaves exactly the backed-up files.
    const wait = spawnAgent(
      { STOWAGE_RESTORE_UID: RESTORE_UID, STOWAGE_RESTORE_WAIT_ROOT: dirname(target), STOWAGE_RESTORE_WAIT_TIMEOUT_MS: '30000' },
      'services/node-agent/src/restore-wait.ts',
    );
    children.push(wait);
    expect((await wait.exited).code).toBe(0);
    expect(wait.stdout.join('')).toMatch(/all 1 volume\(s\) restored: scratch/);
    expect(await describeTree(target)).toEqual(await describeTree(source));
  }, 180_000);

  it('a restored pod waits in stowage-restore-wait until the agent has restored its volume, then runs on exactly the backed-up files', async () => {
    const source = h.volumeDir('app', 'db', 'scratch');
    const snapshotID = (await h.pvbs.getPvb('pvb-roundtrip'))!.status!.snapshotID!;
    const restoreUid = 'restore-uid-0002';
    // The pod as core's transform shapes it: no nodeName (the simulator's scheduler places it),
    // the restore-wait init container first, mounting the restored volume under /restores.
    const created = await h.kube.core.createNamespacedPod({
      namespace: 'app',
      body: {
        metadata: { name: 'db-scheduled', namespace: 'app' },
        spec: {
          nodeSelector: { 'kubernetes.io/hostname': 'node-a' },
          initContainers: [
            {
              name: restoreWaitContainer.name,
              image: 'stowage/node-agent',
              command: [...restoreWaitContainer.command],
              env: [{ name: restoreWaitContainer.restoreUidEnv, value: restoreUid }],
              volumeMounts: [{ name: 'scratch', mountPath: `${restoreWaitContainer.mountRoot}/scratch` }],
            },
          ],
          containers: [{ name: 'app', image: 'busybox', volumeMounts: [{ name: 'scratch', mountPath: '/data' }] }],
          volumes: [{ name: 'scratch', emptyDir: {} }],
        },
      },
    });
    const podUid = created.metadata!.uid!;
    const waiting = await waitFor(
      () => getPod(h.kube, 'app', 'db-scheduled'),
      (pod) => pod?.status?.initContainerStatuses?.[0]?.state?.running !== undefined,
      30_000,
      'the pod to sit in its restore-wait init container',
    );
    expect(waiting?.status?.phase).toBe('Pending');
    expect(waiting?.spec?.nodeName).toBe('node-a');

    await h.createPvr('pvr-scheduled', { restoreUid, namespace: 'app', pod: 'db-scheduled', podUid, volume: 'scratch', snapshotID });
    const done = (await pvrPhase('pvr-scheduled', ['Completed', 'Failed']))!;
    expect(done.status).toMatchObject({ phase: 'Completed', node: 'node-a' });
    const running = await waitFor(
      () => getPod(h.kube, 'app', 'db-scheduled'),
      (pod) => pod?.status?.phase === 'Running',
      30_000,
      'the pod to run once its volume is restored',
    );
    // The init container finished only after the PVR completed (the simulator writes whole seconds).
    const finishedAt = running?.status?.initContainerStatuses?.[0]?.state?.terminated?.finishedAt;
    expect(finishedAt).toBeDefined();
    expect(new Date(finishedAt!).getTime()).toBeGreaterThanOrEqual(Math.floor(Date.parse(done.status!.completionTimestamp!) / 1000) * 1000);
    // Marker consumed: the volume holds exactly the backed-up files.
    expect(await describeTree(h.emptyDirOf('node-a', podUid, 'scratch'))).toEqual(await describeTree(source));
  }, 120_000);

  it('finds the volume of a PVR through its pod informer: no API read of the pod per PVR', async () => {
    const source = h.volumeDir('app', 'db', 'scratch');
    const snapshotID = (await h.pvbs.getPvb('pvb-roundtrip'))!.status!.snapshotID!;
    const podUid = await h.createPod('app', 'db-cached', { node: 'node-a', volumes: ['scratch'] });
    const podGets = () => h.sim.requests().byResource.pods?.get ?? 0;
    const before = podGets();
    await h.createPvr('pvr-cached', {
      restoreUid: 'restore-uid-0003',
      namespace: 'app',
      pod: 'db-cached',
      podUid,
      volume: 'scratch',
      snapshotID,
    });
    const done = (await pvrPhase('pvr-cached', ['Completed', 'Failed']))!;
    expect(done.status?.message).toBeUndefined();
    expect(done.status).toMatchObject({ phase: 'Completed', node: 'node-a' });
    expect(await restoredTree(h.emptyDirOf('node-a', podUid, 'scratch'))).toEqual(await describeTree(source));
    // Every node agent of a cluster reads the pods of its node this way during a restore's burst.
    expect(podGets() - before).toBe(0);
  }, 120_000);

  it('leaves a PVR whose pod runs on another node to that node', async () => {
    const webUid = await h.podUid('app', 'web'); // on node-b
    const snapshotID = (await h.pvrs.get('pvr-roundtrip'))!.spec.snapshotID;
    await h.createPvr('pvr-node-b', { restoreUid: RESTORE_UID, namespace: 'app', pod: 'web', podUid: webUid, volume: 'cache', snapshotID });
    // A PVR for node-a made after it: once that one is Completed, node-a's agent has seen both.
    const podUid = await h.createPod('app', 'after-node-b', { node: 'node-a', volumes: ['v'] });
    await mkdir(h.emptyDirOf('node-a', podUid, 'v'), { recursive: true });
    await h.createPvr('pvr-after-node-b', {
      restoreUid: RESTORE_UID,
      namespace: 'app',
      pod: 'after-node-b',
      podUid,
      volume: 'v',
      snapshotID,
    });
    expect((await pvrPhase('pvr-after-node-b', ['Completed', 'Failed']))?.status?.phase).toBe('Completed');
    expect((await h.pvrs.get('pvr-node-b'))?.status).toBeUndefined();

    // node-b's agent (in-process here: same code) takes it, into node-b's directory.
    const target = join(h.volumeDir('app', 'web', 'cache'));
    const agentB = await startNodeAgent({
      nodeName: 'node-b',
      kube: h.kube,
      repoDir: join(storage, 'repository'),
      repoKey: TEST_REPO_KEY,
      kubeletRoot: h.kubeletRoot('node-b'),
      loadConcurrency: { globalConfig: 1 },
      logger: h.logger,
    });
    inProcess.push(agentB);
    const done = await pvrPhase('pvr-node-b', ['Completed', 'Failed']);
    expect(done?.status).toMatchObject({ phase: 'Completed', node: 'node-b' });
    expect(await restoredTree(target)).toEqual(await describeTree(h.volumeDir('app', 'db', 'scratch')));
    expect(agentB.operationStarts().map((s) => s.name)).toEqual(['pvr-node-b']);
  }, 120_000);

  it('cancels a running restore: Canceling → Canceled, and the volume is left as it was (no files, no marker)', async () => {
    const source = h.volumeDir('app', 'db', 'data');
    await writeRandomFile(join(source, 'large.bin'), BIG_FILE_BYTES);
    const snapshotID = await backUp('pvb-big', 'db', 'data');

    const podUid = await h.createPod('app', 'cancel-me', { node: 'node-a', volumes: ['data'] });
    const target = h.emptyDirOf('node-a', podUid, 'data');
    await mkdir(target, { recursive: true });
    await h.createPvr('pvr-cancel', { restoreUid: RESTORE_UID, namespace: 'app', pod: 'cancel-me', podUid, volume: 'data', snapshotID });
    await waitFor(
      () => h.pvrs.get('pvr-cancel'),
      (pvr) => pvr?.status?.phase === 'InProgress' && (pvr.status.progress?.bytesDone ?? 0) > 0,
      60_000,
      'the restore to be under way',
    );
    expect((await h.pvrs.requestCancel('pvr-cancel')).outcome).toBe('requested');
    const canceled = await pvrPhase('pvr-cancel', ['Canceled', 'Completed', 'Failed']);
    expect(canceled?.status?.phase).toBe('Canceled');
    expect(canceled?.status?.message).toMatch(/canceled on request \(spec\.cancel\) after restoring \d+ bytes/);
    expect(canceled!.status!.progress!.bytesDone!).toBeLessThan(BIG_FILE_BYTES);
    expect(await readdir(target)).toEqual([]);

    // A PVR canceled before it starts ends Canceled without touching its volume.
    await h.createPvr('pvr-cancel-new', {
      restoreUid: RESTORE_UID,
      namespace: 'app',
      pod: 'cancel-me',
      podUid,
      volume: 'data',
      snapshotID,
      cancel: true,
    });
    expect((await pvrPhase('pvr-cancel-new', ['Canceled', 'Completed', 'Failed']))?.status?.message).toMatch(
      /canceled before the restore started/,
    );
    expect(await readdir(target)).toEqual([]);
  }, 180_000);

  it('fails, naming what is wrong, when the snapshot is unknown or the volume never appears; waits for a claim bound late', async () => {
    const podUid = await h.createPod('app', 'broken', { node: 'node-a', volumes: ['a'] });
    await h.createPvr('pvr-no-snapshot', {
      restoreUid: RESTORE_UID,
      namespace: 'app',
      pod: 'broken',
      podUid,
      volume: 'a',
      snapshotID: 'f00d',
    });
    const noSnapshot = await pvrPhase('pvr-no-snapshot', ['Failed', 'Completed']);
    expect(noSnapshot?.status?.phase).toBe('Failed');
    expect(noSnapshot?.status?.message).toMatch(/f00d.*not in the repository at/);
    expect(await readdir(h.emptyDirOf('node-a', podUid, 'a'))).toEqual([]);

    // A claim that is never bound: the agent gives up after STOWAGE_RESTORE_VOLUME_DIR_TIMEOUT_MS (8 s here).
    const snapshotID = (await h.pvbs.getPvb('pvb-roundtrip'))!.status!.snapshotID!;
    const neverUid = await h.createPod('app', 'never-bound', { node: 'node-a', volumes: [], claims: { data: 'claim-never-bound' } });
    await h.createPvr('pvr-no-dir', {
      restoreUid: RESTORE_UID,
      namespace: 'app',
      pod: 'never-bound',
      podUid: neverUid,
      volume: 'data',
      snapshotID,
    });

    // A claim the provisioner binds while the agent waits: the restore goes on into the PV's directory.
    const lateUid = await h.createPod('app', 'bound-late', { node: 'node-a', volumes: [], claims: { data: 'claim-late' } });
    await h.createPvr('pvr-late', {
      restoreUid: RESTORE_UID,
      namespace: 'app',
      pod: 'bound-late',
      podUid: lateUid,
      volume: 'data',
      snapshotID,
    });
    await waitFor(
      () => h.pvrs.get('pvr-late'),
      (pvr) => pvr?.status?.phase === 'InProgress',
      30_000,
      'the agent to take pvr-late',
    );
    const lateDir = join(h.kubeletRoot('node-a'), 'pods', lateUid, 'volumes', 'kubernetes.io~csi', 'pv-late', 'mount');
    await mkdir(lateDir, { recursive: true });
    await h.kube.core.createNamespacedPersistentVolumeClaim({
      namespace: 'app',
      body: {
        metadata: { name: 'claim-late', namespace: 'app' },
        spec: { accessModes: ['ReadWriteOnce'], volumeName: 'pv-late', resources: { requests: { storage: '1Gi' } } },
      },
    });
    const late = await pvrPhase('pvr-late', ['Failed', 'Completed']);
    expect(late?.status?.phase, late?.status?.message).toBe('Completed');
    expect(await restoredTree(lateDir)).toEqual(await describeTree(h.volumeDir('app', 'db', 'scratch')));

    // A .stowage the pod's own data made into a link elsewhere is never followed.
    const elsewhere = h.volumeDir('app', 'web', 'cache');
    const before = await describeTree(elsewhere);
    const linkUid = await h.createPod('app', 'linked', { node: 'node-a', volumes: ['data'] });
    await mkdir(h.emptyDirOf('node-a', linkUid, 'data'), { recursive: true });
    await symlink(elsewhere, join(h.emptyDirOf('node-a', linkUid, 'data'), '.stowage'));
    await h.createPvr('pvr-linked', {
      restoreUid: RESTORE_UID,
      namespace: 'app',
      pod: 'linked',
      podUid: linkUid,
      volume: 'data',
      snapshotID,
    });
    const linked = await pvrPhase('pvr-linked', ['Failed', 'Completed']);
    expect(linked?.status?.phase).toBe('Failed');
    expect(linked?.status?.message).toMatch(/\.stowage exists and is not a directory; the agent restores nothing through it/);
    expect(await describeTree(elsewhere)).toEqual(before);

    const noDir = await pvrPhase('pvr-no-dir', ['Failed', 'Completed']);
    expect(noDir?.status?.message).toMatch(
      /^waited 8 s for the volume directory and it did not appear: persistentVolumeClaim app\/claim-never-bound of volume data does not exist/,
    );
  }, 120_000);

  it('never runs more than loadConcurrency PVBs and PVRs together on a node, and completes them all', async () => {
    const snapshotID = (await h.pvbs.getPvb('pvb-big'))!.status!.snapshotID!;
    const inProgress = new Map<string, boolean>();
    let most = 0;
    const track = (kind: string, event: InformerEvent<PodVolumeBackup | PodVolumeRestore>) => {
      const status = event.object.status as { phase?: string; node?: string } | undefined;
      const onNodeA = kind === 'PVB' ? (event.object.spec as { node: string }).node === 'node-a' : status?.node === 'node-a';
      inProgress.set(`${kind}/${event.object.metadata.name}`, onNodeA && event.type !== 'DELETED' && status?.phase === 'InProgress');
      most = Math.max(most, [...inProgress.values()].filter(Boolean).length);
    };
    const watches = [h.pvbs.watch({ onEvent: (event) => track('PVB', event) }), h.pvrs.watch({ onEvent: (event) => track('PVR', event) })];
    try {
      await Promise.all(watches.map((w) => w.synced));
      const names: string[] = [];
      for (let i = 0; i < 3; i++) {
        const podUid = await h.createPod('app', `limit-${i}`, { node: 'node-a', volumes: ['data'] });
        await mkdir(h.emptyDirOf('node-a', podUid, 'data'), { recursive: true });
        await h.createPvr(`pvr-limit-${i}`, {
          restoreUid: RESTORE_UID,
          namespace: 'app',
          pod: `limit-${i}`,
          podUid,
          volume: 'data',
          snapshotID,
        });
        await h.createPvb(`pvb-limit-${i}`, { node: 'node-a', namespace: 'app', pod: 'workers', volume: `v${i}` });
        names.push(`pvr-limit-${i}`, `pvb-limit-${i}`);
      }
      for (const name of names) {
        const done = name.startsWith('pvr')
          ? await pvrPhase(name, ['Completed', 'Failed'], 120_000)
          : await waitForPhase(h.pvbs, name, ['Completed', 'Failed'], 120_000);
        expect(done?.status?.phase, `${name}: ${done?.status?.message}`).toBe('Completed');
      }
      expect(most).toBe(2);
    } finally {
      await Promise.all(watches.map((w) => w.stop()));
    }
  }, 240_000);

  it('SIGKILLed mid-restore and started again: the PVR is resumed and ends Completed with the right bytes', async () => {
    const snapshotID = (await h.pvbs.getPvb('pvb-big'))!.status!.snapshotID!;
    const podUid = await h.createPod('app', 'killed', { node: 'node-a', volumes: ['data'] });
    const target = h.emptyDirOf('node-a', podUid, 'data');
    await mkdir(target, { recursive: true });
    await h.createPvr('pvr-kill', { restoreUid: RESTORE_UID, namespace: 'app', pod: 'killed', podUid, volume: 'data', snapshotID });
    const running = await waitFor(
      () => h.pvrs.get('pvr-kill'),
      (pvr) => pvr?.status?.phase === 'InProgress' && (pvr.status.progress?.bytesDone ?? 0) > 0,
      60_000,
      'the restore to be under way',
    );
    // While it runs: PVRs by phase and bytes restored.
    const metrics = await (await fetch(`http://127.0.0.1:${await agentA.port()}/metrics`)).text();
    expect(metrics).toContain('stowage_node_agent_pvrs{node="node-a",phase="InProgress"} 1');
    expect(metrics).toMatch(/stowage_node_agent_restored_bytes_total\{node="node-a"\} [1-9]/);
    agentA.killHard();
    expect((await agentA.exited).signal).toBe('SIGKILL');
    const orphan = await h.pvrs.get('pvr-kill');
    expect(orphan?.status?.phase).toBe('InProgress');
    expect(orphan!.status!.progress!.bytesDone!).toBeLessThan(BIG_FILE_BYTES);
    // Nothing half-restored at the volume's root, and no marker for the init container to find.
    expect((await readdir(target)).filter((name) => name !== '.stowage')).toEqual([]);

    // Another PVR the killed agent had finished except for its Completed status: the marker is
    // in place. The next agent must not restore it again over data the app may be using.
    const doneUid = await h.createPod('app', 'marked', { node: 'node-a', volumes: ['data'] });
    const doneDir = h.emptyDirOf('node-a', doneUid, 'data');
    await mkdir(join(doneDir, '.stowage'), { recursive: true });
    await writeFile(join(doneDir, 'app-data.txt'), 'written by the app after the restore\n');
    await writeFile(join(doneDir, '.stowage', RESTORE_UID), 'done');
    const marked = await h.createPvr('pvr-marked', {
      restoreUid: RESTORE_UID,
      namespace: 'app',
      pod: 'marked',
      podUid: doneUid,
      volume: 'data',
      snapshotID,
    });
    const left = await h.pvrs.updateStatusIf('pvr-marked', marked.metadata.resourceVersion!, {
      phase: 'InProgress',
      node: 'node-a',
      startTimestamp: new Date().toISOString(),
      progress: { totalBytes: BIG_FILE_BYTES, bytesDone: BIG_FILE_BYTES },
    });
    expect(left.outcome).toBe('updated');

    agentA = startAgentA();
    const skipped = await pvrPhase('pvr-marked', ['Completed', 'Failed'], 120_000);
    expect(skipped?.status?.phase).toBe('Completed');
    expect(skipped?.status?.message).toMatch(/restored before the node agent restarted \(its done marker is in place\)/);
    expect((await readdir(doneDir)).sort()).toEqual(['.stowage', 'app-data.txt']);
    const done = (await pvrPhase('pvr-kill', ['Completed', 'Failed'], 120_000))!;
    expect(done.status?.phase).toBe('Completed');
    expect(done.status?.node).toBe('node-a');
    expect(done.status?.startTimestamp).not.toBe(running?.status?.startTimestamp);
    expect(await restoredTree(target)).toEqual(await describeTree(h.volumeDir('app', 'db', 'data')));
    expect(await readdir(join(target, '.stowage'))).toEqual([RESTORE_UID]);
    expect(agentA.stdout.join('')).toMatch(/"pvr":"pvr-kill","resumed":true/);

    agentA.child.kill('SIGTERM');
    expect((await agentA.exited).code).toBe(0);
  }, 240_000);
});
