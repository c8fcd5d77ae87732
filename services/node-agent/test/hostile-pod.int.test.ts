import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Repository } from '@stowage/repository';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
} from './support.js';

// A tenant's pod turning the node agent against the node (issue 44, SECURITY.md): the pod runs
// while its volume is read and written, and swaps what the agent is about to open for links to
// files and directories outside its volume. The agent runs as a real process; the pod's side is a
// separate process looping over renames and symlinks.

const DECOYS = 2000;
const DECOY_BYTES = 4096;
const DECOY_DIRS = 50;

let h: Harness;
let storage: string;
/** Outside every volume: what the pod must never get into its snapshot or change. */
let outside: string;
let secret: Buffer;
let agent: AgentProcess;
const swappers: ChildProcess[] = [];

beforeAll(async () => {
  h = await startHarness();
  storage = await mkdtemp(join(tmpdir(), 'stowage-hostile-pod-'));
  outside = await mkdtemp(join(tmpdir(), 'stowage-outside-'));
  // The same size as a decoy, so a read through a swapped link looks like the decoy's own bytes.
  const marker = `OUTSIDE-SECRET-${randomBytes(8).toString('hex')}\n`;
  secret = Buffer.from(marker.repeat(Math.ceil(DECOY_BYTES / marker.length)).slice(0, DECOY_BYTES));
  await writeFile(join(outside, 'secret'), secret);
  await mkdir(join(outside, 'dir'));
  await writeFile(join(outside, 'dir', 'f'), secret);
  agent = spawnAgent({
    KUBECONFIG: h.sim.kubeconfigPath,
    STOWAGE_NODE_NAME: 'node-a',
    STOWAGE_NAMESPACE: 'stowage',
    STOWAGE_REPO_KEY: TEST_REPO_KEY,
    STOWAGE_STORAGE: storage,
    STOWAGE_KUBELET_ROOT: h.kubeletRoot('node-a'),
    STOWAGE_LOAD_CONCURRENCY: '{"globalConfig": 1}',
    // Slow enough that the pod's loop runs through the whole copy.
    STOWAGE_BANDWIDTH_LIMIT: '2MiB',
    STOWAGE_RESTORE_VOLUME_DIR_TIMEOUT_MS: '8000',
    PORT: '0',
    LOG_LEVEL: 'info',
  });
  await agent.port();
}, 120_000);

afterAll(async () => {
  for (const swapper of swappers) swapper.kill('SIGKILL');
  try {
    agent?.killHard();
  } catch {
    // already gone
  }
  await h?.close();
  if (storage) await rm(storage, { recursive: true, force: true });
  if (outside) await rm(outside, { recursive: true, force: true });
});

/**
 * The pod's side: waits for `after` (default `dir`) to exist, replaces each of `once` by a symlink to `target` for
 * good, then until killed swaps each of `names` in turn for such a symlink and back (the real
 * entries wait in `held`, inside the same volume). Prints "swapping" once the first round started.
 */
function startSwapper(input: {
  dir: string;
  names: string[];
  target: string;
  held: string;
  once?: string[];
  after?: string;
}): ChildProcess {
  const script = `
    const fs = require('node:fs');
    const path = require('node:path');
    const { dir, names, target, held, once, after } = JSON.parse(process.argv[1]);
    fs.mkdirSync(held, { recursive: true });
    const park = (name) => path.join(held, name.replace(/\\//g, '_'));
    while (!fs.existsSync(after)) {}
    for (const name of once) {
      for (;;) {
        try { fs.renameSync(path.join(dir, name), park(name)); fs.symlinkSync(target, path.join(dir, name)); break; } catch {}
      }
    }
    let swapped = false;
    let rounds = 0;
    for (;;) {
      for (const name of names) {
        const live = path.join(dir, name);
        try {
          if (!swapped) { fs.renameSync(live, park(name)); fs.symlinkSync(target, live); }
          else { fs.unlinkSync(live); fs.renameSync(park(name), live); }
        } catch {}
      }
      swapped = !swapped;
      if (rounds++ === 0) process.stdout.write('swapping\\n');
    }
  `;
  const child = spawn(process.execPath, ['-e', script, JSON.stringify({ once: [], after: input.dir, ...input })], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  swappers.push(child);
  return child;
}

async function stopSwapper(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

function started(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    child.stdout?.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the swapper exited (${code}) before it started`)));
  });
}

/** Every regular file under `dir`, recursively, with its bytes. */
async function filesUnder(dir: string): Promise<{ path: string; data: Buffer }[]> {
  const found: { path: string; data: Buffer }[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) {
      const path = join(entry.parentPath, entry.name);
      found.push({ path, data: await readFile(path) });
    }
  }
  return found;
}

describe('a hostile pod against the node agent', () => {
  it('swapping files and directories for symlinks during a PVB gets no byte from outside the volume into the snapshot', async () => {
    const source = h.volumeDir('app', 'db', 'data');
    const names: string[] = [];
    await mkdir(join(source, 'decoys'), { recursive: true });
    for (let i = 0; i < DECOYS; i++) {
      names.push(`decoys/f${i}`);
      await writeFile(join(source, 'decoys', `f${i}`), randomBytes(DECOY_BYTES));
    }
    // Directories too: a listing through a swapped directory would read the outside one.
    const dirNames: string[] = [];
    for (let i = 0; i < DECOY_DIRS; i++) {
      dirNames.push(`dirs/d${i}`);
      await mkdir(join(source, 'dirs', `d${i}`), { recursive: true });
      await writeFile(join(source, 'dirs', `d${i}`, 'f'), randomBytes(DECOY_BYTES));
    }
    const held = join(source, '.held');
    const fileSwapper = startSwapper({ dir: source, names, target: join(outside, 'secret'), held });
    const dirSwapper = startSwapper({ dir: source, names: dirNames, target: join(outside, 'dir'), held });
    await Promise.all([started(fileSwapper), started(dirSwapper)]);
    try {
      await h.createPvb('pvb-hostile', { node: 'node-a', namespace: 'app', pod: 'db', volume: 'data' });
      const done = await waitForPhase(h.pvbs, 'pvb-hostile', ['Completed', 'Failed'], 120_000);
      expect(done?.status?.phase).toBe('Completed');
      // What was swapped is left out with a reason the PVB names, not read through the link.
      expect(done?.status?.message).toMatch(/entries were left out/);
      const snapshotId = done!.status!.snapshotID!;
      const repo = await Repository.open({ dir: join(storage, 'repository'), key: TEST_REPO_KEY });
      const target = join(storage, 'restored-hostile');
      await repo.restore(snapshotId, target);
      const files = await filesUnder(target);
      // The copy ran while the loop did: decoys were read (not all skipped).
      expect(files.length).toBeGreaterThan(DECOYS / 4);
      const leaked = files.filter((f) => f.data.includes(secret.subarray(0, 40))).map((f) => f.path);
      expect(leaked.slice(0, 5), `${leaked.length} restored files hold the outside file's bytes`).toEqual([]);
    } finally {
      await Promise.all([stopSwapper(fileSwapper), stopSwapper(dirSwapper)]);
    }
    // The outside file is as it was.
    expect(await readFile(join(outside, 'secret'))).toEqual(secret);
  }, 240_000);

  it("swapping directories of the restore's staging area for symlinks creates or changes nothing outside the volume, and the PVR fails naming the path", async () => {
    // A snapshot of many directories, restored slowly enough for the pod's loop to run through it.
    const source = h.volumeDir('app', 'db', 'scratch');
    const dirNames: string[] = [];
    for (let i = 0; i < 30; i++) {
      dirNames.push(`d${i}`);
      await mkdir(join(source, `d${i}`), { recursive: true });
      for (let j = 0; j < 10; j++) await writeFile(join(source, `d${i}`, `f${j}`), randomBytes(16 * 1024));
    }
    await h.createPvb('pvb-for-hostile-restore', { node: 'node-a', namespace: 'app', pod: 'db', volume: 'scratch' });
    const backedUp = await waitForPhase(h.pvbs, 'pvb-for-hostile-restore', ['Completed', 'Failed'], 120_000);
    expect(backedUp?.status?.phase).toBe('Completed');

    // Outside the volume: a directory the pod points its links at, with an old mode and mtime.
    const target = join(outside, 'target');
    await mkdir(join(target, 'sub'), { recursive: true });
    await writeFile(join(target, 'keep'), 'outside');
    await utimes(join(target, 'sub'), 1_000_000, 1_000_000);
    await utimes(target, 1_000_000, 1_000_000);
    const outsideBefore = { tree: await describeTree(target), root: await lstat(target) };

    const podUid = await h.createPod('app', 'restored-hostile', { node: 'node-a', volumes: ['data'] });
    const volume = h.emptyDirOf('node-a', podUid, 'data');
    const staging = join(volume, '.stowage', 'restoring-pvr-hostile');
    const swapper = startSwapper({
      dir: staging,
      // Once the agent made every directory of the snapshot there.
      after: join(staging, 'd29'),
      // d0 stays a link; the others are swapped back and forth.
      once: ['d0'],
      names: dirNames.slice(1),
      target,
      held: join(volume, 'held'),
    });
    // .stowage too, once files were moved into the volume (where the done marker is written next).
    const stowageSwapper = startSwapper({
      dir: volume,
      after: join(volume, 'd0'),
      names: ['.stowage'],
      target,
      held: join(volume, 'held-stowage'),
    });
    let done: Awaited<ReturnType<typeof waitForPvrPhase>>;
    try {
      await h.createPvr('pvr-hostile', {
        restoreUid: 'restore-hostile',
        namespace: 'app',
        pod: 'restored-hostile',
        podUid,
        volume: 'data',
        snapshotID: backedUp!.status!.snapshotID!,
      });
      done = await waitForPvrPhase(h.pvrs, 'pvr-hostile', ['Completed', 'Failed'], 120_000);
    } finally {
      await Promise.all([stopSwapper(swapper), stopSwapper(stowageSwapper)]);
    }
    // Nothing outside was created, written, chmod'ed or touched.
    expect(await describeTree(target)).toEqual(outsideBefore.tree);
    const rootAfter = await lstat(target);
    expect({ mode: rootAfter.mode, mtimeMs: rootAfter.mtimeMs, uid: rootAfter.uid }).toEqual({
      mode: outsideBefore.root.mode,
      mtimeMs: outsideBefore.root.mtimeMs,
      uid: outsideBefore.root.uid,
    });
    // The swap of d0 (never put back) failed the PVR, naming the path.
    expect(done?.status?.phase).toBe('Failed');
    expect(done?.status?.message).toMatch(/\.stowage\/restoring-pvr-hostile.* (is not a directory|was replaced|disappeared)/);
    // And the pod got no done marker.
    const markers = await readdir(join(volume, '.stowage')).catch(() => [] as string[]);
    expect(markers).not.toContain('restore-hostile');
  }, 240_000);

  it('a backup running across a prune after the grace loses no chunk: repo verify of its snapshot is clean', async () => {
    const source = h.volumeDir('app', 'workers', 'v0');
    // 16 MiB at the agent's 2 MiB/s: the second backup reads for ~8 s, deduplicating every chunk.
    for (let i = 0; i < 16; i++) await writeFile(join(source, `f${i}`), randomBytes(1024 * 1024));
    await h.createPvb('pvb-long-1', { node: 'node-a', namespace: 'app', pod: 'workers', volume: 'v0' });
    expect((await waitForPhase(h.pvbs, 'pvb-long-1', ['Completed', 'Failed'], 120_000))?.status?.phase).toBe('Completed');
    // The same bytes with new times: read again, and every chunk found in the first backup's packs.
    for (let i = 0; i < 16; i++) await utimes(join(source, `f${i}`), new Date(), new Date());
    await h.createPvb('pvb-long-2', { node: 'node-a', namespace: 'app', pod: 'workers', volume: 'v0' });
    await waitFor(
      () => h.pvbs.getPvb('pvb-long-2'),
      (pvb) => (pvb?.status?.progress?.bytesDone ?? 0) > 0 || pvb?.status?.phase === 'Completed' || pvb?.status?.phase === 'Failed',
      120_000,
      'the second backup to be reading',
    );
    const repo = await Repository.open({ dir: join(storage, 'repository'), key: TEST_REPO_KEY });
    try {
      // The first snapshot goes; a prune retires its packs, and one "after the grace" (0 here) would delete them.
      expect(await repo.forget({ pvb: 'pvb-long-1' })).toHaveLength(1);
      await repo.prune({ graceMs: 0 });
      const second = await repo.prune({ graceMs: 0 });
      const running = await h.pvbs.getPvb('pvb-long-2');
      // The prunes ran while the backup did (else this test shows nothing).
      expect(running?.status?.phase).toBe('InProgress');
      const done = await waitForPhase(h.pvbs, 'pvb-long-2', ['Completed', 'Failed'], 120_000);
      expect(done?.status?.phase).toBe('Completed');
      const report = await repo.verify();
      expect(report.missingRefs.filter((r) => r.snapshotId === done!.status!.snapshotID).slice(0, 3)).toEqual([]);
      expect(report.ok).toBe(true);
      // Kept because that backup was running, not by chance.
      expect(second.batchesHeld).toBe(1);
      // Once the backup has ended, a prune may delete the retired packs: nothing references them now.
      const after = await repo.prune({ graceMs: 0 });
      expect(after.batchesHeld).toBe(0);
      expect((await repo.verify()).ok).toBe(true);
    } finally {
      await repo.close();
    }
  }, 240_000);
});
