import { readdirSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SmallFileReader } from './small-file-reader.js';
import { walkTree } from './tree-walk.js';

let root: string;
/** Every path of the tree in manifest order: a directory's children sorted by name, each subdirectory's subtree after them. */
let expected: string[];
let expectedBytes = 0;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'stowage-walk-'));
  // Top-level subtrees of very different sizes (so threads take different numbers of them),
  // nested and empty directories, files and a symlink at the root.
  const dirs: Record<string, string[]> = {
    '.': ['a.txt', 'z.txt'],
    big: Array.from({ length: 120 }, (_, i) => `f${String(i).padStart(3, '0')}`),
    'big/inner': ['x', 'y'],
    'big/inner/deep': ['only'],
    empty: [],
    mid: ['m1', 'm2', 'm3'],
    'mid/sub': [],
    ...Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`t${i}`, [`file${i}`]])),
  };
  for (const [dir, files] of Object.entries(dirs)) {
    await mkdir(join(root, dir), { recursive: true });
    for (const file of files) {
      await writeFile(join(root, dir, file), `${dir}/${file}`);
      expectedBytes += `${dir}/${file}`.length;
    }
  }
  await symlink('a.txt', join(root, 'link'));
  // The order by hand: sorted children of a directory, then each subdirectory's subtree.
  const listing = (dir: string): string[] => {
    const children = readdirSync(join(root, dir))
      .sort()
      .map((name) => (dir === '.' ? name : `${dir}/${name}`));
    return [...children, ...children.filter((c) => dirs[c]).flatMap(listing)];
  };
  expected = ['.', ...listing('.')];
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('walkTree', () => {
  it.each([1, 2, 3])('lists the tree in manifest order, each entry once, with %i thread(s) sharing the subtrees', async (threads) => {
    const reader = new SmallFileReader(threads);
    try {
      const walk = await walkTree(root, undefined, reader);
      expect(walk.entries.map((e) => e.path)).toEqual(expected);
      expect(walk.entries.find((e) => e.path === 'link')).toMatchObject({ type: 'symlink', target: 'a.txt' });
      expect(walk.entries.find((e) => e.path === 'big/inner/deep')).toMatchObject({ type: 'dir' });
      expect(walk.totalBytes).toBe(expectedBytes);
    } finally {
      await reader.close();
    }
  });

  it('stops at an abort between subtrees, and the threads are free for the next walk', async () => {
    const reader = new SmallFileReader(2);
    try {
      const controller = new AbortController();
      controller.abort(new Error('stop'));
      await expect(walkTree(root, controller.signal, reader)).rejects.toThrow('stop');
      const walk = await walkTree(root, undefined, reader);
      expect(walk.entries.map((e) => e.path)).toEqual(expected);
    } finally {
      await reader.close();
    }
  });
});
