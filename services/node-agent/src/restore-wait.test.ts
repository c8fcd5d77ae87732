import { mkdir, mkdtemp, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { doneMarkerPath, runRestoreWait, waitForRestoredVolumes } from './restore-wait.js';

let root: string;
const UID = '7d0c2f5e-1111-4222-8333-944455556666';
const OLD_MTIME = new Date('2024-03-01T12:00:00Z');

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'stowage-restore-wait-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function volume(name: string, files: Record<string, string> = { 'data.txt': 'hello' }): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir, { recursive: true });
  for (const [file, content] of Object.entries(files)) await writeFile(join(dir, file), content);
  return dir;
}

async function mark(dir: string, uid = UID): Promise<void> {
  await mkdir(join(dir, '.stowage'), { recursive: true });
  await writeFile(doneMarkerPath(dir, uid), 'done');
  await utimes(dir, OLD_MTIME, OLD_MTIME);
}

describe('stowage-restore-wait', () => {
  it('waits until every mounted volume has its marker, then leaves exactly the restored files (and the root mtime)', async () => {
    const data = await volume('data');
    const logs = await volume('logs', { 'app.log': 'x' });
    await mark(data);
    const waiting = waitForRestoredVolumes({ root, restoreUid: UID, timeoutMs: 10_000, pollIntervalMs: 20 });
    let settled = false;
    void waiting.then(() => {
      settled = true;
    });
    await new Promise((r) => setTimeout(r, 150));
    expect(settled).toBe(false); // logs has no marker yet
    await mark(logs);
    const result = await waiting;
    expect(result).toEqual({ ok: true, volumes: ['data', 'logs'], warnings: [] });
    expect(await readdir(data)).toEqual(['data.txt']);
    expect(await readdir(logs)).toEqual(['app.log']);
    expect((await stat(data)).mtime.toISOString()).toBe(OLD_MTIME.toISOString());
  });

  it('wakes when the node agent writes the marker, not at its next poll (the poll is only the fallback)', async () => {
    const data = await volume('data');
    // A poll this slow would not look again within the test: only a change event can end the wait.
    const waiting = waitForRestoredVolumes({ root, restoreUid: UID, timeoutMs: 600_000, pollIntervalMs: 600_000 });
    await new Promise((r) => setTimeout(r, 100)); // the first look found nothing and the wait sleeps
    // As the node agent does: `.stowage` first (its staging dir lives there), the marker last.
    await mkdir(join(data, '.stowage', 'restoring-pvr-1'), { recursive: true });
    await rm(join(data, '.stowage', 'restoring-pvr-1'), { recursive: true });
    await writeFile(doneMarkerPath(data, UID), 'done');
    const slowPoll = new Promise((r) => setTimeout(() => r('still waiting'), 4_000));
    expect(await Promise.race([waiting, slowPoll])).toEqual({ ok: true, volumes: ['data'], warnings: [] });
    expect(await readdir(data)).toEqual(['data.txt']);
  });

  it('wakes for a .stowage that was removed and made again (a failed attempt cleaned up, then a retry)', async () => {
    const data = await volume('data');
    await mkdir(join(data, '.stowage'));
    const waiting = waitForRestoredVolumes({ root, restoreUid: UID, timeoutMs: 600_000, pollIntervalMs: 600_000 });
    await new Promise((r) => setTimeout(r, 100));
    await rm(join(data, '.stowage'), { recursive: true });
    await new Promise((r) => setTimeout(r, 100));
    await mkdir(join(data, '.stowage'));
    await new Promise((r) => setTimeout(r, 100));
    await writeFile(doneMarkerPath(data, UID), 'done');
    const slowPoll = new Promise((r) => setTimeout(() => r('still waiting'), 4_000));
    expect(await Promise.race([waiting, slowPoll])).toMatchObject({ ok: true });
  });

  it("keeps .stowage when another restore's marker is still in it", async () => {
    const data = await volume('data');
    await mark(data, 'other-restore-uid');
    await mark(data);
    expect(await waitForRestoredVolumes({ root, restoreUid: UID, timeoutMs: 1000, pollIntervalMs: 20 })).toMatchObject({ ok: true });
    expect(await readdir(join(data, '.stowage'))).toEqual(['other-restore-uid']);
  });

  it('does not take a marker of another restore for its own, and times out naming the volumes still missing', async () => {
    const data = await volume('data');
    await volume('cache');
    await mark(data, 'another-uid');
    const result = await waitForRestoredVolumes({ root, restoreUid: UID, timeoutMs: 200, pollIntervalMs: 20 });
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.reason).toBe('timeout');
      expect(result.message).toMatch(/cache, data/);
      expect(result.message).toContain(UID);
    }
  });

  it('refuses to run without volumes or without a restore uid, saying what is missing', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const io = { out: (l: string) => out.push(l), err: (l: string) => err.push(l) };
    expect(await runRestoreWait({ STOWAGE_RESTORE_WAIT_ROOT: root, STOWAGE_RESTORE_UID: UID }, io)).toBe(1);
    expect(err.join('\n')).toMatch(/no restored volume is mounted under/);
    err.length = 0;
    expect(await runRestoreWait({ STOWAGE_RESTORE_WAIT_ROOT: root, STOWAGE_RESTORE_WAIT_TIMEOUT_MS: 'soon' }, io)).toBe(2);
    expect(err.join('\n')).toMatch(/STOWAGE_RESTORE_UID is required/);
    expect(err.join('\n')).toMatch(/STOWAGE_RESTORE_WAIT_TIMEOUT_MS must be a whole number/);
  });

  it('exits 0 once restored, and 1 on timeout', async () => {
    const io = { out: () => undefined, err: () => undefined };
    const data = await volume('data');
    const env = { STOWAGE_RESTORE_WAIT_ROOT: root, STOWAGE_RESTORE_UID: UID, STOWAGE_RESTORE_WAIT_TIMEOUT_MS: '300' };
    expect(await runRestoreWait(env, io)).toBe(1);
    await mark(data);
    expect(await runRestoreWait(env, io)).toBe(0);
    expect(await readdir(data)).toEqual(['data.txt']);
  });
});
