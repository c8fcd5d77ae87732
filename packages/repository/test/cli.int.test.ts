import { execFile } from 'node:child_process';
import { mkdtemp, open, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describeTree, writeVolumeTree } from '@stowage/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ExitCode, Repository, runRepoCli } from '../src/index.js';
import { TEST_CHUNKER, TEST_PACK_BLOB_MAX } from './test-settings.js';

const KEY = 'cli test key';
const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
let work: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'stowage-repo-cli-'));
});
afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l) }, out, err };
}

async function backedUpRepo() {
  const source = join(work, 'volume');
  await writeVolumeTree(source);
  const repoDir = join(work, 'repo');
  const repo = await Repository.init({
    dir: repoDir,
    key: KEY,
    chunker: TEST_CHUNKER,
    packBlobMaxBytes: TEST_PACK_BLOB_MAX,
    durable: false,
  });
  const { snapshotId } = await repo.backup(source);
  return { source, repoDir, snapshotId };
}

describe('repo CLI', () => {
  it('restore rebuilds the snapshot; verify exits 0 when clean and 1 on damage, naming the file', async () => {
    const { source, repoDir, snapshotId } = await backedUpRepo();
    const env = { STOWAGE_REPO_KEY: KEY };
    const target = join(work, 'target');
    const restore = capture();
    expect(await runRepoCli(['restore', '--repo', repoDir, '--snapshot', snapshotId, '--target', target], env, restore.io)).toBe(
      ExitCode.Ok,
    );
    expect(await describeTree(target)).toEqual(await describeTree(source));

    const clean = capture();
    expect(await runRepoCli(['verify', '--repo', repoDir], env, clean.io)).toBe(ExitCode.Ok);
    expect(clean.out[0]).toMatch(/no damage/);

    let chunkFile = '';
    for (const dir of await readdir(join(repoDir, 'data'))) {
      const names = await readdir(join(repoDir, 'data', dir));
      if (names[0]) chunkFile = join(repoDir, 'data', dir, names[0]);
    }
    const file = await open(chunkFile, 'r+');
    await file.write(Buffer.from('garbage'), 0, 7, 20);
    await file.close();

    const damaged = capture();
    expect(await runRepoCli(['verify', '--repo', repoDir], env, damaged.io)).toBe(ExitCode.Failed);
    expect(damaged.err.join('\n')).toMatch(/DAMAGE FOUND/);
    expect(damaged.err.join('\n')).toMatch(/affects snapshot [0-9a-f]{32} file "/);

    const failedRestore = capture();
    const code = await runRepoCli(
      ['restore', '--repo', repoDir, '--snapshot', snapshotId, '--target', join(work, 't2')],
      env,
      failedRestore.io,
    );
    expect(code).toBe(ExitCode.Failed);
    expect(failedRestore.err[0]).toMatch(/^REPO_CHUNK_CORRUPT: cannot restore /);
  });

  it('usage errors exit 2; a missing or wrong key exits 1 with the error code', async () => {
    const { repoDir } = await backedUpRepo();
    const usage = capture();
    expect(await runRepoCli(['restore', '--repo', repoDir], { STOWAGE_REPO_KEY: KEY }, usage.io)).toBe(ExitCode.Usage);
    expect(usage.err[0]).toMatch(/missing --snapshot, --target/);
    expect(await runRepoCli(['frobnicate'], {}, capture().io)).toBe(ExitCode.Usage);
    const noKey = capture();
    expect(await runRepoCli(['verify', '--repo', repoDir], {}, noKey.io)).toBe(ExitCode.Failed);
    expect(noKey.err[0]).toMatch(/^REPO_KEY_MISSING/);
    const wrongKey = capture();
    expect(await runRepoCli(['snapshots', '--repo', repoDir], { STOWAGE_REPO_KEY: 'nope' }, wrongKey.io)).toBe(ExitCode.Failed);
    expect(wrongKey.err[0]).toBe('REPO_WRONG_KEY: the repository key does not match this repository');
  });

  it('runs as a process: the exit code reaches the shell', async () => {
    const { repoDir } = await backedUpRepo();
    const run = promisify(execFile);
    const tsx = join(packageDir, '../../node_modules/.bin/tsx');
    const ok = await run(tsx, ['--conditions=@stowage/source', 'src/cli.ts', 'snapshots', '--repo', repoDir], {
      cwd: packageDir,
      env: { ...process.env, STOWAGE_REPO_KEY: KEY },
    });
    expect(ok.stdout).toMatch(/^[0-9a-f]{32} {2}/);
    const failed = await run(tsx, ['--conditions=@stowage/source', 'src/cli.ts', 'verify', '--repo', repoDir], {
      cwd: packageDir,
      env: { ...process.env, STOWAGE_REPO_KEY: 'wrong' },
    }).catch((e: { code: number; stderr: string }) => e);
    expect(failed).toMatchObject({ code: 1, stderr: expect.stringContaining('REPO_WRONG_KEY') });
  });
});
