import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** `{ err: e.message }`, `{ err: (error as Error).message }`, `err: err?.message`: the stack and the cause are lost. */
const MESSAGE_ONLY = /\berr:\s*\(?\s*\w+(?:\s+as\s+Error)?\s*\)?\??\.message\b/;

describe('errors in logs', () => {
  it('are logged as { err } (pino keeps the stack and the cause), never as their message alone', () => {
    const sources = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' })
      .split('\0')
      .filter((file) => /^(packages|services)\/[^/]+\/src\/.*\.ts$/.test(file) && !file.endsWith('.test.ts'));
    expect(sources.length).toBeGreaterThan(100);
    const found = sources.flatMap((file) =>
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .flatMap((line, i) => (MESSAGE_ONLY.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(found, `log the error itself: { err }\n${found.join('\n')}`).toEqual([]);
  });

  it('the pattern finds the forms that drop the stack', () => {
    for (const line of [
      "log.warn({ err: err.message }, 'x')",
      "log.warn({ jobId, err: (error as Error).message }, 'x')",
      "log.warn({ err: (err as Error)?.message }, 'x')",
    ]) {
      expect(MESSAGE_ONLY.test(line), line).toBe(true);
    }
    expect(MESSAGE_ONLY.test("log.warn({ err }, 'x')")).toBe(false);
    expect(MESSAGE_ONLY.test("log.warn({ err: error, reason: error.message }, 'x')")).toBe(false);
  });
});
