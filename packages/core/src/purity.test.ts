/*
 * Core stays pure (docs/architecture.md#core-is-pure): its source imports only relative modules and zod, and touches no
 * process environment, clock or randomness. This test reads the sources, so it lives here and
 * not in core itself.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const sourceDir = dirname(fileURLToPath(import.meta.url));
const sources = readdirSync(sourceDir, { recursive: true, encoding: 'utf8' })
  .filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts'))
  .map((file) => ({ file, text: readFileSync(join(sourceDir, file), 'utf8') }));

const IMPORT_SPECIFIER =
  /(?:\bimport\s[^'"]*?from\s*|\bimport\s*\(\s*|\bimport\s+|\bexport\s[^'"]*?from\s*|\brequire\s*\(\s*)['"]([^'"]+)['"]/g;

const FORBIDDEN_CALLS: [RegExp, string][] = [
  [/\bprocess\.env\b/, 'process.env (config comes in as arguments)'],
  [/\bprocess\./, 'process (core runs anywhere)'],
  [/\bDate\.now\s*\(/, 'Date.now() (time comes in as an argument)'],
  [/\bnew Date\s*\(\s*\)/, 'new Date() (time comes in as an argument)'],
  [/\bMath\.random\s*\(/, 'Math.random() (ids come in as arguments)'],
  [/\bcrypto\.(randomUUID|getRandomValues)\b/, 'crypto randomness'],
  [/\bsetTimeout\s*\(|\bsetInterval\s*\(/, 'timers'],
  [/\bfetch\s*\(/, 'network access'],
];

export function importsOf(text: string): string[] {
  return [...text.matchAll(IMPORT_SPECIFIER)].map((match) => match[1] ?? '');
}

describe('core purity', () => {
  it('finds the sources it checks', () => {
    expect(sources.map((source) => source.file)).toEqual(expect.arrayContaining(['index.ts', 'item-blocks.ts', 'hooks.ts']));
  });

  it('the import check catches what it should', () => {
    expect(
      importsOf(
        "import { readFileSync } from 'node:fs';\nimport Redis from 'ioredis';\nexport * from './x.js';\nconst m = await import('bullmq');",
      ),
    ).toEqual(['node:fs', 'ioredis', './x.js', 'bullmq']);
  });

  // zod (schemas) and cron-parser (cron arithmetic, always given the time it counts from) are pure libraries.
  const PURE_LIBRARIES = ['zod', 'cron-parser'];
  it.each(sources.map((source) => [source.file, source.text] as const))(
    '%s imports only relative modules and pure libraries',
    (_file, text) => {
      const outside = importsOf(text).filter(
        (specifier) => !specifier.startsWith('./') && !specifier.startsWith('../') && !PURE_LIBRARIES.includes(specifier),
      );
      expect(outside).toEqual([]);
    },
  );

  it.each(sources.map((source) => [source.file, source.text] as const))(
    '%s uses no environment, clock, randomness, timers or network',
    (_file, text) => {
      const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
      const found = FORBIDDEN_CALLS.filter(([pattern]) => pattern.test(code)).map(([, what]) => what);
      expect(found).toEqual([]);
    },
  );
});
