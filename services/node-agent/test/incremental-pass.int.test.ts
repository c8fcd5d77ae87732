import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKubeClients, type InformerEvent, type PodVolumeRestore } from '@stowage/kube';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NodeAgent, NodeAgentOptions } from '../src/index.js';
import { type Harness, startHarness, startTestAgent, waitFor, waitForPhase, waitForPvrPhase, writeRandomFile } from './support.js';

// The agent's scheduling pass re-evaluates only the PVBs and PVRs that changed (and the PVRs
// whose pod changed), not its whole cache per event; a periodic full rescan is the safety net.
// These tests pin what that must not lose.
let h: Harness;
let storage: string;
const agents: NodeAgent[] = [];
const HOUR_MS = 3_600_000;
const LATE_LABEL = 'stowage.dev/test-late';

beforeAll(async () => {
  h = await startHarness();
  storage = await mkdtemp(join(tmpdir(), 'stowage-node-agent-incremental-'));
});

afterEach(async () => {
  h.sim.clearFaults();
  await Promise.all(agents.splice(0).map((a) => a.stop()));
});

afterAll(async () => {
  await h?.close();
  if (storage) await rm(storage, { recursive: true, force: true });
});

function agentFor(node: string, extra: Partial<NodeAgentOptions>): Promise<NodeAgent> {
  return startTestAgent(h, agents, { node, repoDir: join(storage, 'repository'), ...extra });
}

function pvrPhase(name: string, phases: string[], timeoutMs?: number): Promise<PodVolumeRestore | undefined> {
  return waitForPvrPhase(h.pvrs, name, phases, timeoutMs);
}

describe('node agent scheduling pass (incremental)', () => {
  it('with no periodic rescan, starts a PVR queued behind a running one, and one whose pod is scheduled onto the node after the PVR was made', async () => {
    // Slow work (3 MiB at 1 MiB/s) so the later PVRs arrive while one runs; loadConcurrency 1.
    const agent = await agentFor('node-b', { rescanIntervalMs: HOUR_MS, bandwidthBytesPerSec: 1024 * 1024 });
    await writeRandomFile(join(h.volumeDir('app', 'web', 'cache'), 'blob.bin'), 3 * 1024 * 1024);
    await h.createPvb('pvb-incremental', { node: 'node-b', namespace: 'app', pod: 'web', volume: 'cache' });
    const backedUp = await waitForPhase(h.pvbs, 'pvb-incremental', ['Completed', 'Failed'], 60_000);
    expect(backedUp?.status?.phase, backedUp?.status?.message).toBe('Completed');
    const snapshotID = backedUp!.status!.snapshotID!;

    let most = 0;
    const inProgress = new Set<string>();
    const watch = h.pvrs.watch({
      onEvent: (event: InformerEvent<PodVolumeRestore>) => {
        const name = event.object.metadata.name;
        if (event.type !== 'DELETED' && event.object.status?.phase === 'InProgress') inProgress.add(name);
        else inProgress.delete(name);
        most = Math.max(most, inProgress.size);
      },
    });
    try {
      await watch.synced;
      const pvr = (name: string, pod: string, podUid: string) =>
        h.createPvr(name, { restoreUid: 'restore-uid-inc', namespace: 'app', pod, podUid, volume: 'data', snapshotID });

      const firstUid = await h.createPod('app', 'inc-first', { node: 'node-b', volumes: ['data'] });
      await mkdir(h.emptyDirOf('node-b', firstUid, 'data'), { recursive: true });
      await pvr('pvr-inc-first', 'inc-first', firstUid);
      await pvrPhase('pvr-inc-first', ['InProgress', 'Completed', 'Failed']);

      // Arrives while the first runs: queued (limit 1), started when the first ends.
      const queuedUid = await h.createPod('app', 'inc-queued', { node: 'node-b', volumes: ['data'] });
      await mkdir(h.emptyDirOf('node-b', queuedUid, 'data'), { recursive: true });
      await pvr('pvr-inc-queued', 'inc-queued', queuedUid);

      // Made while its pod is still unscheduled (a restore creates PVRs before the scheduler places
      // the pods): only the pod's arrival on this node makes it this agent's, so that pod event
      // alone must bring the PVR into the pass.
      const late = await h.kube.core.createNamespacedPod({
        namespace: 'app',
        body: {
          metadata: { name: 'inc-late', namespace: 'app' },
          spec: {
            nodeSelector: { [LATE_LABEL]: 'yes' },
            containers: [{ name: 'app', image: 'busybox' }],
            volumes: [{ name: 'data', emptyDir: {} }],
          },
        },
      });
      await pvr('pvr-inc-late', 'inc-late', late.metadata!.uid!);
      expect((await h.pvrs.get('pvr-inc-first'))?.status?.phase).toBe('InProgress');
      // The only node that fits now is node-b: the simulator's scheduler places the pod there.
      const node = await h.kube.core.readNode({ name: 'node-b' });
      node.metadata!.labels = { ...node.metadata!.labels, [LATE_LABEL]: 'yes' };
      await h.kube.core.replaceNode({ name: 'node-b', body: node });

      for (const name of ['pvr-inc-first', 'pvr-inc-queued', 'pvr-inc-late']) {
        const done = await pvrPhase(name, ['Completed', 'Failed'], 120_000);
        expect(done?.status?.phase, `${name}: ${done?.status?.message}`).toBe('Completed');
      }
      const first = (await h.pvrs.get('pvr-inc-first'))!.status!;
      const queued = (await h.pvrs.get('pvr-inc-queued'))!.status!;
      expect(Date.parse(queued.startTimestamp!)).toBeGreaterThanOrEqual(Date.parse(first.completionTimestamp!));
      expect(most).toBe(1);
      expect(
        agent
          .operationStarts()
          .filter((s) => s.kind === 'PVR')
          .map((s) => s.name),
      ).toEqual(['pvr-inc-first', 'pvr-inc-queued', 'pvr-inc-late']);
      expect((await h.pvrs.get('pvr-inc-late'))?.status?.node).toBe('node-b');
    } finally {
      await watch.stop();
    }
  }, 240_000);

  it('a cancel whose answer failed is answered by the periodic rescan, although no event comes for that PVR again', async () => {
    // One attempt per request, so the injected failure reaches the agent instead of a retry.
    const kube = createKubeClients({ kubeconfigPath: h.sim.kubeconfigPath, retryPolicy: { maxAttempts: 1 } });
    await agentFor('node-a', { kube, rescanIntervalMs: 300 });
    h.sim.resetRequests();
    h.sim.setFaults({
      errorRate: 1,
      statuses: [500],
      appliesTo: { resources: ['podvolumerestores.stowage.dev/status'], verbs: ['update'] },
    });
    // A New PVR with spec.cancel whose pod is nowhere: any agent answers it (Canceled).
    await h.createPvr('pvr-cancel-retried', {
      restoreUid: 'restore-uid-inc',
      namespace: 'app',
      pod: 'nowhere',
      podUid: '00000000-0000-4000-8000-00000000nowh',
      volume: 'data',
      snapshotID: 'none',
      cancel: true,
    });
    await waitFor(
      async () => h.sim.requests().faulted['500'] ?? 0,
      (failed) => failed >= 1,
      30_000,
      "the agent's answer to the cancel to fail",
    );
    expect((await h.pvrs.get('pvr-cancel-retried'))?.status).toBeUndefined();
    h.sim.clearFaults();
    const done = await pvrPhase('pvr-cancel-retried', ['Canceled', 'Completed', 'Failed'], 30_000);
    expect(done?.status).toMatchObject({ phase: 'Canceled', message: expect.stringMatching(/canceled before the restore started/) });
  }, 120_000);

  it("a claim that failed is tried again on the next event, even one about another node's PVR", async () => {
    const kube = createKubeClients({ kubeconfigPath: h.sim.kubeconfigPath, retryPolicy: { maxAttempts: 1 } });
    await agentFor('node-a', { kube, rescanIntervalMs: HOUR_MS });
    const podUid = await h.createPod('app', 'claim-retried', { node: 'node-a', volumes: ['data'] });
    h.sim.resetRequests();
    h.sim.setFaults({
      errorRate: 1,
      statuses: [500],
      appliesTo: { resources: ['podvolumerestores.stowage.dev/status'], verbs: ['update'] },
    });
    // (its snapshot does not exist: the restore fails once claimed; the claim is what this is about)
    const pvr = { restoreUid: 'restore-uid-inc', namespace: 'app', volume: 'data', snapshotID: 'none' };
    await h.createPvr('pvr-claim-retried', { ...pvr, pod: 'claim-retried', podUid });
    await waitFor(
      async () => h.sim.requests().faulted['500'] ?? 0,
      (failed) => failed >= 1,
      30_000,
      "the agent's claim to fail",
    );
    h.sim.clearFaults();
    expect((await h.pvrs.get('pvr-claim-retried'))?.status).toBeUndefined();
    // Changes nothing on node-a (its pod runs on node-b), but it is an event: the failed claim goes again.
    await h.createPvr('pvr-for-node-b', { ...pvr, pod: 'web', podUid: await h.podUid('app', 'web') });
    const claimed = await waitFor(
      () => h.pvrs.get('pvr-claim-retried'),
      (current) => current?.status?.node !== undefined,
      30_000,
      'node-a to claim the PVR',
    );
    expect(claimed?.status?.node).toBe('node-a');
    expect((await h.pvrs.get('pvr-for-node-b'))?.status).toBeUndefined();
  }, 120_000);
});
