import { spawnSync } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ESM script without type declarations
import { REQUIRED_TOOLS } from './preflight.mjs';

const script = fileURLToPath(new URL('./preflight.mjs', import.meta.url));
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

/** A directory to use as the whole PATH, holding an executable stand-in for each named tool. */
async function pathWith(tools: readonly string[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'stowage-preflight-'));
  dirs.push(dir);
  for (const tool of tools) {
    await writeFile(join(dir, tool), '#!/bin/sh\nexit 0\n');
    await chmod(join(dir, tool), 0o755);
  }
  return dir;
}

function runPreflight(pathEnv: string) {
  return spawnSync(process.execPath, [script], {
    env: { PATH: pathEnv, STOWAGE_PREFLIGHT_INSTALL: 'never' },
    encoding: 'utf8',
    timeout: 20_000,
  });
}

describe('preflight', () => {
  it('stops at once with one line per missing tool, naming it and the command that installs it', async () => {
    const run = runPreflight(await pathWith(['redis-server']));
    expect(run.status).toBe(1);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toContain(
      'preflight: kubectl is missing (the simulator and deploy tests run kubectl); install it: sudo apt-get install -y kubernetes-client',
    );
    expect(lines.filter((l) => l.includes('docker-compose is missing'))).toHaveLength(1);
    expect(lines.filter((l) => l.includes('redis-cli is missing'))).toHaveLength(1);
    expect(lines.some((l) => l.includes('redis-server is missing'))).toBe(false);
    expect(lines.at(-1)).toContain('no test was run');
  });

  it('passes silently when every tool is on PATH', async () => {
    const run = runPreflight(await pathWith(REQUIRED_TOOLS.map((t: { command: string }) => t.command)));
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });
});
