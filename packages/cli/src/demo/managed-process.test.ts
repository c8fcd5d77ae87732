import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ManagedProcess } from './managed-process.js';

describe('ManagedProcess signals its group only while the process lives', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'stowage-managed-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const start = (name: string, code: string) =>
    new ManagedProcess({ name, command: process.execPath, args: ['-e', code], env: {}, cwd: dir, logFile: join(dir, `${name}.log`) });

  it('stops a running one with SIGTERM to its group', async () => {
    const p = start('running', 'setInterval(() => {}, 1000)');
    expect(await p.stop()).toEqual({ code: null, signal: 'SIGTERM' });
    expect(p.groupAlive()).toBe(false);
  });

  it('once it has exited, stop and killNow send no signal (its pid may be reused)', async () => {
    const p = start('exited', '');
    await p.exited;
    const kill = vi.spyOn(process, 'kill');
    try {
      p.killNow();
      await p.stop();
      // Only probes (signal 0), never a signal to what may be another process's group.
      expect(kill.mock.calls.filter(([, signal]) => signal !== 0)).toEqual([]);
    } finally {
      kill.mockRestore();
    }
  });
});
