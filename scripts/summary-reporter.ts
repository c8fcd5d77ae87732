import type { Reporter, TestCase, TestModule } from 'vitest/node';

export interface RunCounts {
  passed: number;
  failed: number;
  skipped: number;
}

/**
 * Prints the plain closing line `N passed, N failed` (plus skipped when any) that CI reads,
 * since vitest's own summary is not in that form. The line never says less than the truth:
 * - a test that did not run because its file or suite failed (a `beforeAll` that threw, a
 *   file that did not load) counts as failed, not skipped; only `skip`/`todo` tests are skipped;
 * - a file that failed outside its tests (an `afterAll` that threw) counts as one failure;
 * - every unhandled error counts as one failure, and so does a run that found no test.
 * When anything failed the exit code is 1, so the line and the exit code always agree.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    const counts = countRun(testModules, unhandledErrors.length);
    const tail = counts.skipped > 0 ? `, ${counts.skipped} skipped` : '';
    process.stdout.write(`\n${counts.passed} passed, ${counts.failed} failed${tail}\n`);
    if (counts.failed > 0) process.exitCode = 1;
  }
}

export function countRun(testModules: ReadonlyArray<TestModule>, unhandledErrors: number): RunCounts {
  const counts: RunCounts = { passed: 0, failed: 0, skipped: 0 };
  for (const mod of testModules) {
    const fileFailed = mod.state() === 'failed';
    let failedInFile = 0;
    for (const test of mod.children.allTests()) {
      const outcome = testOutcome(test, fileFailed);
      counts[outcome]++;
      if (outcome === 'failed') failedInFile++;
    }
    if (fileFailed && failedInFile === 0) counts.failed++;
  }
  counts.failed += unhandledErrors;
  if (testModules.length === 0) counts.failed++;
  return counts;
}

function testOutcome(test: TestCase, fileFailed: boolean): keyof RunCounts {
  const state = test.result().state;
  if (state === 'passed') return 'passed';
  if (state === 'failed') return 'failed';
  const skippedOnPurpose = test.options.mode === 'skip' || test.options.mode === 'todo';
  // Not run, and not skipped on purpose: its file or suite broke before it could run.
  return skippedOnPurpose || !fileFailed ? 'skipped' : 'failed';
}
