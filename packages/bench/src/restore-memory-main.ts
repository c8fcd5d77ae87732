/** pnpm bench --scenario restore-memory (issue #45): see restore-memory.ts and the README. */
import { loadavg } from 'node:os';
import { writeReport } from './report.js';
import {
  parseRestoreMemoryArgs,
  RESTORE_MEMORY_USAGE,
  renderRestoreMemoryMarkdown,
  restoreMemoryTargets,
  runRestoreMemory,
} from './restore-memory.js';

export async function runRestoreMemoryMain(argv: readonly string[]): Promise<number> {
  const say = (line: string) => process.stderr.write(`${line}\n`);
  const parsed = parseRestoreMemoryArgs(argv);
  if (parsed.ok === 'help') {
    process.stdout.write(`${RESTORE_MEMORY_USAGE}\n`);
    return 0;
  }
  if (parsed.ok === false) {
    say(
      `bench: ${parsed.problems.length} problem(s) with the options:\n${parsed.problems.map((p) => `  - ${p}`).join('\n')}\n\n${RESTORE_MEMORY_USAGE}`,
    );
    return 2;
  }
  const startedAt = new Date().toISOString();
  say(
    `Stowage bench (restore-memory); load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  const result = await runRestoreMemory(parsed.options, say);
  const markdown = renderRestoreMemoryMarkdown(result, `pnpm bench ${argv.join(' ')}`, startedAt);
  process.stdout.write(markdown);
  if (parsed.options.json) {
    const json = { ...result, targets: restoreMemoryTargets(result), startedAt, loadAverageEnd: loadavg() };
    say(`wrote ${await writeReport(parsed.options.json, `${JSON.stringify(json, null, 2)}\n`)}`);
  }
  if (parsed.options.markdown) say(`wrote ${await writeReport(parsed.options.markdown, markdown)}`);
  return result.runs.some((r) => r.code === 'this tree' && r.error) ? 1 : 0;
}
