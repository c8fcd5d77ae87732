import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { findBrokenReferences, formatBrokenReferences, headingSlug } from './doc-references.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Where references live: code comments, docs, manifests and scripts (tracked files only). */
const SCANNED = /\.(ts|tsx|js|mjs|cjs|md|ya?ml|sh)$/;

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

describe('references in the repository', () => {
  it('every reference to a document or a heading resolves inside the repository', () => {
    const tracked = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' })
      .split('\0')
      // The checker's own files hold the patterns and broken fixtures on purpose.
      .filter((file) => SCANNED.test(file) && !file.startsWith('scripts/doc-references.'));
    expect(tracked.length).toBeGreaterThan(100);
    const broken = findBrokenReferences(ROOT, tracked);
    expect(broken.length, `broken references:\n${formatBrokenReferences(broken)}\n`).toBe(0);
  });
});

describe('findBrokenReferences', () => {
  async function tree(files: Record<string, string>): Promise<string> {
    const root = await mkdtemp(join(tmpdir(), 'stowage-doc-refs-'));
    dirs.push(root);
    for (const [path, text] of Object.entries(files)) {
      await mkdir(join(root, path, '..'), { recursive: true });
      await writeFile(join(root, path), text);
    }
    return root;
  }

  it('names the file, line and reference of each broken one, and passes the ones that resolve', async () => {
    const root = await tree({
      'docs/architecture.md': '# Architecture\n\n## The job graph\n\nSee [velero](velero.md#hooks) and [nowhere](gone.md).\n',
      'docs/velero.md': '# Velero\n\n## Hooks\n\n## Hooks\n',
      'packages/core/src/a.ts': [
        '// Grouping (docs/architecture.md#the-job-graph): fine.',
        '// Hooks, see docs/velero.md#hooks-1 and docs/velero.md#hook.',
        `// The contract (${'DESIGN'} §3), the layout (${'velero'}-semantics §8.3).`,
        '// Velero §5, reference/stack.md and docs/missing.md.',
      ].join('\n'),
      'README.md': '```\n[in a fence](not-checked.md)\n```\n[a heading here](#the-top)\n\n## The top\n',
    });
    const broken = findBrokenReferences(root, ['docs/architecture.md', 'docs/velero.md', 'packages/core/src/a.ts', 'README.md']);
    expect(formatBrokenReferences(broken).split('\n')).toEqual([
      'docs/architecture.md:5: [nowhere](gone.md) — gone.md does not exist in the repository',
      'packages/core/src/a.ts:2: docs/velero.md#hook — docs/velero.md has no heading #hook',
      `packages/core/src/a.ts:3: ${'DESIGN'} §3 — points at a document outside the repository; cite docs/architecture.md#…`,
      `packages/core/src/a.ts:3: ${'velero'}-semantics §8.3 — points at a document outside the repository; cite docs/velero.md#…`,
      'packages/core/src/a.ts:4: Velero §5 — points at a document outside the repository; cite docs/velero.md#…',
      'packages/core/src/a.ts:4: reference/stack.md — points at a document outside the repository; cite docs/velero.md#…',
      'packages/core/src/a.ts:4: reference/stack.md — reference/stack.md does not exist in the repository',
      'packages/core/src/a.ts:4: docs/missing.md — docs/missing.md does not exist in the repository',
    ]);
  });

  it("makes GitHub's anchors from headings", () => {
    expect(headingSlug('State: Redis vs storage')).toBe('state-redis-vs-storage');
    expect(headingSlug('Backup with file-system volumes: decoupled vs inline (issue #8)')).toBe(
      'backup-with-file-system-volumes-decoupled-vs-inline-issue-8',
    );
    expect(headingSlug('Unset `onError` is `Fail`')).toBe('unset-onerror-is-fail');
  });
});
