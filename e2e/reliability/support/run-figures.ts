import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/*
 * Figures of the last run, one entry per test, for RELIABILITY.md: faults injected, backups
 * submitted and completed, items lost. Written only after a test's assertions passed, to
 * test-output/reliability/figures.json (ignored by git).
 */

export interface RunFigures {
  faults: number;
  backups: number;
  completed: number;
  itemsLost: number;
  [more: string]: number | string;
}

const FILE = join(fileURLToPath(new URL('../../../', import.meta.url)), 'test-output/reliability/figures.json');

export function recordRun(test: string, figures: RunFigures): void {
  mkdirSync(dirname(FILE), { recursive: true });
  let all: Record<string, RunFigures & { at: string }> = {};
  try {
    all = JSON.parse(readFileSync(FILE, 'utf8'));
  } catch {
    // first entry
  }
  all[test] = { ...figures, at: new Date().toISOString() };
  writeFileSync(FILE, `${JSON.stringify(all, null, 2)}\n`);
}
