import { mkdir, mkdtemp, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { restoreWaitContainer } from '@stowage/kube';
import { closeDir, type DirRef, makeDirAt, openDir, RepoErrorCode } from '@stowage/repository';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { confirmMarkerPlaced, writeMarker } from './restore-operation.js';
import { waitForRestoredVolumes } from './restore-wait.js';

// The last step of a PVR: the done marker written into .stowage, then checked to be where the
// pod's stowage-restore-wait init container looks, which may find (and remove) it in between.
const UID = 'restore-uid-marker';
let root: string;
let volumeDir: string;
let volume: DirRef;
let markerDir: DirRef;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'stowage-restore-marker-'));
  volumeDir = join(root, 'data');
  await mkdir(volumeDir);
  await writeFile(join(volumeDir, 'restored.txt'), 'restored');
  volume = await openDir(volumeDir);
  markerDir = await makeDirAt(volume, restoreWaitContainer.markerDir, 0o755);
});
afterEach(async () => {
  await closeDir(markerDir);
  await closeDir(volume);
  await rm(root, { recursive: true, force: true });
});

/** Writes the marker as the agent does and checks it, as the agent does, after `between` ran. */
async function writeThenConfirm(between: () => Promise<void>): Promise<string> {
  const marker = await writeMarker(markerDir, UID, '{"pvr":"p"}\n');
  try {
    await between();
    return await confirmMarkerPlaced(volume, markerDir, marker);
  } finally {
    await marker.close();
  }
}

describe('the done marker, written and confirmed', () => {
  it('in place: confirmed, and the marker is there for the init container', async () => {
    expect(await writeThenConfirm(async () => {})).toBe('in place');
    expect(await readdir(join(volumeDir, '.stowage'))).toEqual([UID]);
  });

  it('found by stowage-restore-wait before the check (marker and .stowage removed): confirmed, not a swap', async () => {
    const placed = await writeThenConfirm(async () => {
      const waited = await waitForRestoredVolumes({ root, restoreUid: UID, timeoutMs: 10_000 });
      expect(waited.ok).toBe(true);
    });
    expect(placed).toBe('consumed');
    expect(await readdir(volumeDir)).toEqual(['restored.txt']);
  });

  it('found by stowage-restore-wait and a new .stowage made since (another restore): confirmed', async () => {
    const placed = await writeThenConfirm(async () => {
      expect((await waitForRestoredVolumes({ root, restoreUid: UID, timeoutMs: 10_000 })).ok).toBe(true);
      await mkdir(join(volumeDir, '.stowage'));
    });
    expect(placed).toBe('consumed');
  });

  it('.stowage moved away with the marker in it: fails, naming the path', async () => {
    const err = await writeThenConfirm(() => rename(join(volumeDir, '.stowage'), join(root, 'elsewhere'))).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: RepoErrorCode.RestoreTargetChanged });
    expect((err as Error).message).toMatch(/data\/\.stowage disappeared/);
  });

  it('.stowage replaced by another directory, the marker left in the old one: fails, naming the path', async () => {
    const err = await writeThenConfirm(async () => {
      await rename(join(volumeDir, '.stowage'), join(root, 'elsewhere'));
      await mkdir(join(volumeDir, '.stowage'));
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: RepoErrorCode.RestoreTargetChanged });
    expect((err as Error).message).toMatch(/data\/\.stowage was replaced by another directory/);
  });
});
