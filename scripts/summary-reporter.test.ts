import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const vitestBin = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs');
const fixtureConfig = fileURLToPath(new URL('./test-fixtures/reporter/vitest.config.ts', import.meta.url));

/** Runs vitest with our reporter on one fixture file, as `pnpm test` would, and returns its closing line and exit code. */
function runFixture(fixture: string): { closingLine: string; exitCode: number | null } {
  const run = spawnSync(process.execPath, [vitestBin, 'run', '--config', fixtureConfig, fixture], {
    env: { ...process.env, CI: 'true', NO_COLOR: '1' },
    encoding: 'utf8',
    timeout: 60_000,
  });
  const lines = run.stdout.split('\n').filter((l) => /^\d+ passed, \d+ failed/.test(l));
  return { closingLine: lines.at(-1) ?? `(no closing line; stderr: ${run.stderr.slice(-500)})`, exitCode: run.status };
}

describe('the closing line tells the truth', () => {
  it('counts the tests of a suite whose beforeAll throws as failed, and the run exits 1', () => {
    const { closingLine, exitCode } = runFixture('before-all-throws.fixture.ts');
    expect(closingLine).toBe('1 passed, 2 failed, 1 skipped');
    expect(exitCode).toBe(1);
  });

  it('counts a file whose afterAll throws as one failure after its passing tests', () => {
    const { closingLine, exitCode } = runFixture('after-all-throws.fixture.ts');
    expect(closingLine).toBe('1 passed, 1 failed');
    expect(exitCode).toBe(1);
  });

  it('counts a run that found no test as failed', () => {
    const { closingLine, exitCode } = runFixture('no-such-file.fixture.ts');
    expect(closingLine).toBe('0 passed, 1 failed');
    expect(exitCode).toBe(1);
  });
});
