import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BenchChild } from './child-process.js';

describe('BenchChild signals its group only while the child lives', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'stowage-bench-child-'));
    await writeFile(join(dir, 'exits.ts'), 'process.exitCode = 0;\n');
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('once it has exited, stop and killNow send no signal (its pid may be reused)', async () => {
    const child = new BenchChild({ name: 'exits', script: join(dir, 'exits.ts'), cwd: dir, logFile: join(dir, 'exits.log'), env: {} });
    expect(await child.exited).toEqual({ code: 0, signal: null });
    const kill = vi.spyOn(process, 'kill');
    try {
      child.killNow();
      await child.stop();
      expect(kill).not.toHaveBeenCalled();
    } finally {
      kill.mockRestore();
    }
  });
});
