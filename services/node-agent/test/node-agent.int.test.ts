import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PodVolumeBackup } from '@stowage/kube';
import { pvbLabels } from '@stowage/kube';
import { Repository } from '@stowage/repository';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type NodeAgent, type NodeAgentOptions, startNodeAgent } from '../src/index.js';
import {
  chunkFiles,
  describeTree,
  type Harness,
  startHarness,
  startTestAgent,
  TEST_REPO_KEY,
  waitFor,
  waitForPhase,
  writeRandomFile,
  writeVolumeTree,
} from './support.js';

let h: Harness;
let storage: string;
let repoDir: string;
const agents: NodeAgent[] = [];

beforeAll(async () => {
  h = await startHarness();
  storage = await mkdtemp(join(tmpdir(), 'stowage-node-agent-'));
  repoDir = join(storage, 'repository');
});

afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.stop()));
});

afterAll(async () => {
  await h?.close();
  await rm(storage, { recursive: true, force: true });
});

function agentFor(node: string, extra: Partial<NodeAgentOptions> = {}): Promise<NodeAgent> {
  return startTestAgent(h, agents, { node, repoDir, ...extra });
}

describe('node agent on the simulator', () => {
  it('backs up a pod volume through a PVB; the snapshot restores byte for byte and mode for mode', async () => {
    const source = h.volumeDir('app', 'db', 'data');
    await writeVolumeTree(source);
    await agentFor('node-a');
    await h.createPvb('pvb-data-1', { node: 'node-a', namespace: 'app', pod: 'db', volume: 'data' });

    const done = (await waitForPhase(h.pvbs, 'pvb-data-1', ['Completed', 'Failed']))!;
    expect(done.status?.message).toBeUndefined();
    expect(done.status?.phase).toBe('Completed');
    expect(done.status?.path).toBe(source);
    expect(done.status?.path).toMatch(/\/node-a\/pods\/[^/]+\/volumes\/kubernetes\.io~csi\/pv-data\/mount$/);
    expect(done.status?.startTimestamp).toBeTruthy();
    expect(Date.parse(done.status!.completionTimestamp!)).toBeGreaterThanOrEqual(Date.parse(done.status!.startTimestamp!));
    const expected = await describeTree(source);
    const totalBytes = Object.values(expected).reduce((sum, e) => sum + (e.type === 'file' ? e.size : 0), 0);
    expect(done.status?.progress).toEqual({ totalBytes, bytesDone: totalBytes });

    const repo = await Repository.open({ dir: repoDir, key: TEST_REPO_KEY });
    const snapshot = await repo.getSnapshot(done.status!.snapshotID!);
    expect(snapshot.tags).toMatchObject({ pvb: 'pvb-data-1', node: 'node-a', volume: 'data', backup: 'b1' });
    const target = join(storage, 'restore-1');
    await repo.restore(done.status!.snapshotID!, target);
    expect(await describeTree(target)).toEqual(expected);
    expect(Object.keys(expected)).toEqual(
      expect.arrayContaining(['big.bin', 'empty.txt', 'new\nline', 'dangling-link', 'nested/a/b/c/empty-too']),
    );

    // A second PVB of the same unchanged volume stores no new chunk, only a new snapshot.
    const chunksBefore = await chunkFiles(repoDir);
    await h.createPvb('pvb-data-2', { node: 'node-a', namespace: 'app', pod: 'db', volume: 'data' });
    const second = (await waitForPhase(h.pvbs, 'pvb-data-2', ['Completed', 'Failed']))!;
    expect(second.status?.phase).toBe('Completed');
    expect(second.status?.snapshotID).not.toBe(done.status?.snapshotID);
    expect(await chunkFiles(repoDir)).toEqual(chunksBefore);
    const report = await repo.verify();
    expect(report.ok).toBe(true);
    expect(report.snapshotsChecked).toBe(2);
  });

  it('keeps at most loadConcurrency (2 on node-a) PVBs InProgress, observed through a watch, and completes all 6', async () => {
    for (let i = 0; i < 6; i++) await writeRandomFile(join(h.volumeDir('app', 'workers', `v${i}`), 'payload.bin'), 600 * 1024);
    const inProgress = new Set<string>();
    let maxSeen = 0;
    const phases = new Map<string, string>();
    const observer = h.pvbs.watchPvbs({
      labelSelector: `${pvbLabels.backupName}=conc`,
      onEvent: ({ type, object }) => {
        const name = object.metadata.name;
        const phase = type === 'DELETED' ? 'gone' : (object.status?.phase ?? 'New');
        phases.set(name, phase);
        if (phase === 'InProgress' || phase === 'Canceling') inProgress.add(name);
        else inProgress.delete(name);
        maxSeen = Math.max(maxSeen, inProgress.size);
      },
    });
    await observer.synced;
    try {
      const agent = await agentFor('node-a', {
        // node-a matches both rules: the smaller number, 2, wins over 3 and over globalConfig 1.
        loadConcurrency: {
          globalConfig: 1,
          perNodeConfig: [
            { nodeSelector: { matchLabels: { 'stowage.dev/backup-pool': 'large' } }, number: 3 },
            { nodeSelector: { matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['zone-1'] }] }, number: 2 },
          ],
        },
        // ~3.6 MB at 2 MB/s: the copies overlap long enough for a third to start if the limit leaked.
        bandwidthBytesPerSec: 2 * 1024 * 1024,
      });
      expect(agent.loadConcurrency).toBe(2);
      const names = Array.from({ length: 6 }, (_, i) => `conc-${i}`);
      for (const [i, name] of names.entries()) {
        const uid = await h.podUid('app', 'workers');
        await h.pvbs.createPvb({
          metadata: { name, labels: { [pvbLabels.backupName]: 'conc', [pvbLabels.node]: 'node-a' } },
          spec: { node: 'node-a', pod: { namespace: 'app', name: 'workers', uid }, volume: `v${i}`, backupStorageLocation: 'default' },
        });
      }
      await waitFor(
        async () => names.map((n) => phases.get(n)),
        (all) => all.every((p) => p === 'Completed' || p === 'Failed'),
        30_000,
        'all six PVBs to finish',
      );
      for (const name of names) expect((await h.pvbs.getPvb(name))?.status?.phase, name).toBe('Completed');
      expect(maxSeen).toBe(2);
      // Queued PVBs started in creation order.
      expect(agent.copyStarts().map((s) => s.pvb)).toEqual(names);
    } finally {
      await observer.stop();
    }
  });

  it('cancels a running copy: Canceling → Canceled, and no snapshot references the partial data', async () => {
    const dir = h.volumeDir('app', 'db', 'scratch');
    await writeRandomFile(join(dir, 'large.bin'), 8 * 1024 * 1024);
    await agentFor('node-a', { bandwidthBytesPerSec: 1024 * 1024, progressIntervalMs: 300 });
    const repo = await Repository.open({ dir: repoDir, key: TEST_REPO_KEY }).catch(() => undefined);
    const snapshotsBefore = (await repo?.listSnapshots()) ?? [];

    await h.createPvb('pvb-cancel', { node: 'node-a', namespace: 'app', pod: 'db', volume: 'scratch' });
    await waitFor(
      () => h.pvbs.getPvb('pvb-cancel'),
      (p) => p?.status?.phase === 'InProgress' && (p.status.progress?.bytesDone ?? 0) > 0,
      15_000,
      'the copy to be under way',
    );
    const seen: string[] = [];
    const observer = h.pvbs.watchPvbs({
      fieldSelector: 'metadata.name=pvb-cancel',
      onEvent: ({ object }) => {
        const phase = object.status?.phase ?? 'New';
        if (seen.at(-1) !== phase) seen.push(phase);
      },
    });
    await observer.synced;
    await h.pvbs.requestCancel('pvb-cancel');
    const canceled = (await waitForPhase(h.pvbs, 'pvb-cancel', ['Canceled', 'Completed', 'Failed'], 15_000))!;
    await observer.stop();
    expect(canceled.status?.phase).toBe('Canceled');
    expect(canceled.status?.snapshotID).toBeUndefined();
    expect(canceled.status?.message).toMatch(/canceled on request.*no snapshot was written/);
    expect(canceled.status!.progress!.bytesDone!).toBeLessThan(8 * 1024 * 1024);
    expect(seen).toContain('Canceling');

    const after = await (await Repository.open({ dir: repoDir, key: TEST_REPO_KEY })).listSnapshots();
    expect(after.map((s) => s.id)).toEqual(snapshotsBefore.map((s) => s.id));
    expect(after.some((s) => s.tags.pvb === 'pvb-cancel')).toBe(false);
  });

  it('a PVB with spec.cancel while still New goes straight to Canceled without copying', async () => {
    const agent = await agentFor('node-a');
    await h.createPvb('pvb-cancel-new', { node: 'node-a', namespace: 'app', pod: 'db', volume: 'scratch', cancel: true });
    const pvb = (await waitForPhase(h.pvbs, 'pvb-cancel-new', ['Canceled', 'Completed', 'Failed']))!;
    expect(pvb.status?.phase).toBe('Canceled');
    expect(pvb.status?.startTimestamp).toBeUndefined();
    expect(agent.copyStarts().map((s) => s.pvb)).not.toContain('pvb-cancel-new');
  });

  it('fails a PVB whose volume directory is missing, naming the path; and one naming a volume the pod lacks', async () => {
    await agentFor('node-b');
    const dir = h.volumeDir('app', 'web', 'cache');
    await rm(dir, { recursive: true, force: true });
    await h.createPvb('pvb-missing-dir', { node: 'node-b', namespace: 'app', pod: 'web', volume: 'cache' });
    await h.createPvb('pvb-no-volume', { node: 'node-b', namespace: 'app', pod: 'web', volume: 'logs' });
    const missing = (await waitForPhase(h.pvbs, 'pvb-missing-dir', ['Completed', 'Failed']))!;
    expect(missing.status?.phase).toBe('Failed');
    expect(missing.status?.message).toContain(dir);
    expect(missing.status?.completionTimestamp).toBeTruthy();
    const noVolume = (await waitForPhase(h.pvbs, 'pvb-no-volume', ['Completed', 'Failed']))!;
    expect(noVolume.status?.phase).toBe('Failed');
    expect(noVolume.status?.message).toBe('pod app/web has no volume named logs');

    // A PVB made for an earlier pod of the same name (another uid) must not back up the new one.
    await h.pvbs.createPvb({
      metadata: { name: 'pvb-stale-uid', labels: { [pvbLabels.node]: 'node-b' } },
      spec: {
        node: 'node-b',
        pod: { namespace: 'app', name: 'web', uid: 'uid-of-an-older-pod' },
        volume: 'cache',
        backupStorageLocation: 'default',
      },
    });
    const stale = (await waitForPhase(h.pvbs, 'pvb-stale-uid', ['Completed', 'Failed']))!;
    expect(stale.status?.phase).toBe('Failed');
    expect(stale.status?.message).toMatch(/^pod app\/web was replaced \(uid .+, the PVB was made for uid uid-of-an-older-pod\)/);
  });

  it('a CSI volume whose mount directory is missing fails naming that path; <pv>/ (vol_data.json only) is never backed up', async () => {
    await agentFor('node-a');
    const mount = h.volumeDir('app', 'unmounted', 'data');
    expect(mount).toMatch(/\/kubernetes\.io~csi\/pv-unmounted\/mount$/);
    await rm(mount, { recursive: true, force: true });
    // What a real kubelet leaves in <pv>/ beside mount.
    await writeFile(join(mount, '..', 'vol_data.json'), '{"driverName":"sim.csi.stowage.dev","specVolID":"pv-unmounted"}');
    await h.createPvb('pvb-csi-unmounted', { node: 'node-a', namespace: 'app', pod: 'unmounted', volume: 'data' });
    const done = (await waitForPhase(h.pvbs, 'pvb-csi-unmounted', ['Completed', 'Failed']))!;
    expect(done.status?.phase).toBe('Failed');
    expect(done.status?.message).toContain(mount);
    expect(done.status?.snapshotID).toBeUndefined();
  });

  it('two agents for the same node never both copy one PVB', async () => {
    const [a, b] = [
      await agentFor('node-b', { loadConcurrency: { globalConfig: 4 } }),
      await agentFor('node-b', { loadConcurrency: { globalConfig: 4 } }),
    ];
    const dir = h.volumeDir('app', 'web', 'cache');
    await writeRandomFile(join(dir, 'one.bin'), 64 * 1024);
    const names = Array.from({ length: 8 }, (_, i) => `pvb-race-${i}`);
    await Promise.all(names.map((name) => h.createPvb(name, { node: 'node-b', namespace: 'app', pod: 'web', volume: 'cache' })));
    const done: PodVolumeBackup[] = [];
    for (const name of names) done.push((await waitForPhase(h.pvbs, name, ['Completed', 'Failed']))!);
    expect(done.map((p) => p.status?.phase)).toEqual(names.map(() => 'Completed'));

    const started = [...a.copyStarts(), ...b.copyStarts()].map((s) => s.pvb).filter((n) => n.startsWith('pvb-race-'));
    expect(started.sort()).toEqual([...names].sort());
    const repo = await Repository.open({ dir: repoDir, key: TEST_REPO_KEY });
    const raceSnapshots = (await repo.listSnapshots()).filter((s) => s.tags.pvb?.startsWith('pvb-race-'));
    expect(raceSnapshots.map((s) => s.tags.pvb).sort()).toEqual([...names].sort());
    expect(new Set(done.map((p) => p.status?.snapshotID)).size).toBe(names.length);
  });
  it('a graceful stop leaves the running PVB InProgress, and the next agent resumes it to Completed', async () => {
    const dir = h.volumeDir('app', 'workers', 'v0');
    // 16 MiB at 4 MiB/s: ~4 s of copying in ~16 chunks (1 MiB average). Progress moves per chunk, and
    // a 4 MiB file could be one or two chunks (up to 8 MiB each), finishing before any progress was seen.
    await writeRandomFile(join(dir, 'graceful.bin'), 16 * 1024 * 1024);
    const first = await startNodeAgent({
      nodeName: 'node-a',
      kube: h.kube,
      repoDir,
      repoKey: TEST_REPO_KEY,
      kubeletRoot: h.kubeletRoot('node-a'),
      loadConcurrency: {},
      logger: h.logger,
      bandwidthBytesPerSec: 4 * 1024 * 1024,
      progressIntervalMs: 300,
    });
    await h.createPvb('pvb-graceful', { node: 'node-a', namespace: 'app', pod: 'workers', volume: 'v0' });
    await waitFor(
      () => h.pvbs.getPvb('pvb-graceful'),
      (p) => p?.status?.phase === 'InProgress' && (p.status.progress?.bytesDone ?? 0) > 0,
      15_000,
      'the copy to be under way',
    );
    await first.stop();
    const interrupted = await h.pvbs.getPvb('pvb-graceful');
    expect(interrupted?.status?.phase).toBe('InProgress');
    expect(interrupted?.status?.message).toMatch(/interrupted by a node agent shutdown/);

    const second = await agentFor('node-a');
    const done = (await waitForPhase(h.pvbs, 'pvb-graceful', ['Completed', 'Failed']))!;
    expect(done.status?.phase).toBe('Completed');
    expect(second.copyStarts()).toEqual([expect.objectContaining({ pvb: 'pvb-graceful', resumed: true })]);
  });

  it('fails with an actionable message when the repository key is wrong or the repository is unreachable', async () => {
    await Repository.open({ dir: repoDir, key: TEST_REPO_KEY }).catch(() => Repository.init({ dir: repoDir, key: TEST_REPO_KEY }));
    await writeRandomFile(join(h.volumeDir('app', 'web', 'cache'), 'k.bin'), 1024);
    await agentFor('node-b', { repoKey: 'not-the-key-the-repository-was-made-with' });
    await h.createPvb('pvb-wrong-key', { node: 'node-b', namespace: 'app', pod: 'web', volume: 'cache' });
    const wrongKey = (await waitForPhase(h.pvbs, 'pvb-wrong-key', ['Completed', 'Failed']))!;
    expect(wrongKey.status?.phase).toBe('Failed');
    expect(wrongKey.status?.message).toContain('the repository key (STOWAGE_REPO_KEY) does not match the repository at');
    await Promise.all(agents.splice(0).map((a) => a.stop()));

    const notADir = join(storage, 'a-file');
    await writeFile(notADir, 'storage is not mounted here');
    await agentFor('node-b', { repoDir: join(notADir, 'repository') });
    await h.createPvb('pvb-unreachable', { node: 'node-b', namespace: 'app', pod: 'web', volume: 'cache' });
    const unreachable = (await waitForPhase(h.pvbs, 'pvb-unreachable', ['Completed', 'Failed']))!;
    expect(unreachable.status?.phase).toBe('Failed');
    expect(unreachable.status?.message).toMatch(
      /the repository at .*a-file\/repository cannot be reached.*check that the backup storage is mounted/,
    );
  });
});
