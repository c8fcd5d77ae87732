import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultReadThreads, SmallFileReader } from './small-file-reader.js';

describe('STOWAGE_REPO_THREADS', () => {
  it('defaults by core count (2 to 8), takes a whole number, and refuses anything else naming the variable', () => {
    const byDefault = defaultReadThreads({});
    expect(byDefault).toBeGreaterThanOrEqual(2);
    expect(byDefault).toBeLessThanOrEqual(8);
    expect(defaultReadThreads({ STOWAGE_REPO_THREADS: '3' })).toBe(3);
    for (const bad of ['0', '-1', '2.5', 'many', '1000']) {
      expect(() => defaultReadThreads({ STOWAGE_REPO_THREADS: bad })).toThrow(/STOWAGE_REPO_THREADS must be a whole number/);
    }
  });
});

describe('SmallFileReader against files swapped after the walk', () => {
  it('reads a file only if it is still the regular file the walk saw: never through a link, a FIFO or another file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stowage-swap-'));
    const reader = new SmallFileReader(1);
    try {
      await writeFile(join(dir, 'outside'), 'secret');
      const seen: Record<string, { dev: number; ino: number }> = {};
      for (const name of ['same', 'link', 'fifo', 'other']) {
        await writeFile(join(dir, name), 'mine!!');
        seen[name] = statSync(join(dir, name));
      }
      // What a pod does between the walk and the read.
      await rm(join(dir, 'link'));
      await symlink(join(dir, 'outside'), join(dir, 'link'));
      await rm(join(dir, 'fifo'));
      execFileSync('mkfifo', [join(dir, 'fifo')]);
      await writeFile(join(dir, 'other.new'), 'secret');
      await rename(join(dir, 'other.new'), join(dir, 'other'));
      const reads = await reader.read(
        ['same', 'link', 'fifo', 'other'].map((name) => ({ path: join(dir, name), size: 6, dev: seen[name]!.dev, ino: seen[name]!.ino })),
      );
      expect(reads.map((r) => (r.kind === 'read' ? r.data.toString() : r.kind))).toEqual(['mine!!', 'changed', 'changed', 'changed']);
    } finally {
      await reader.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
