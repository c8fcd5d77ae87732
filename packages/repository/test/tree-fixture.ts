import { createHash, randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, readdir, readFile, readlink, symlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Chunk sizes small enough that a few MB of test data spans dozens of chunks. */
export const TEST_CHUNKER = { minBytes: 16 * 1024, avgBytes: 64 * 1024, maxBytes: 256 * 1024 };
/** Chunks up to 32 KiB are packed, larger ones loose: tests exercise both stores. */
export const TEST_PACK_BLOB_MAX = 32 * 1024;

function semiCompressible(bytes: number): Buffer {
  const words = ['volume', 'backup', 'stowage', 'chunk', 'node', 'agent', 'pod', 'restore', 'verify'];
  const parts: string[] = [];
  let size = 0;
  while (size < bytes) {
    const line = `${Date.now()} ${words[size % words.length]} ${randomBytes(8).toString('hex')} ${size}\n`;
    parts.push(line);
    size += line.length;
  }
  return Buffer.from(parts.join('')).subarray(0, bytes);
}

/**
 * A tree with what volumes really hold: a large random file, a compressible log, many small
 * files in nested dirs, empty files and dirs, symlinks (one dangling), odd names and modes.
 */
export async function makeTree(root: string): Promise<void> {
  await mkdir(join(root, 'nested/a/b/c'), { recursive: true });
  await mkdir(join(root, 'empty-dir'), { recursive: true });
  await mkdir(join(root, 'read-only-dir'), { recursive: true });
  await writeFile(join(root, 'big.bin'), randomBytes(2 * 1024 * 1024 + 777));
  await writeFile(join(root, 'app.log'), semiCompressible(512 * 1024));
  for (let i = 0; i < 40; i++) {
    const dir = ['nested', 'nested/a', 'nested/a/b', 'nested/a/b/c'][i % 4]!;
    await writeFile(join(root, dir, `small-${i}.dat`), randomBytes(500 + i * 97));
  }
  await writeFile(join(root, 'nested/a/duplicate-1.txt'), 'the same content twice\n');
  await writeFile(join(root, 'nested/a/b/duplicate-2.txt'), 'the same content twice\n');
  await writeFile(join(root, 'empty.txt'), '');
  await writeFile(join(root, 'with space.txt'), 'spaces\n');
  await writeFile(join(root, 'ünïcödé-名前.txt'), 'unicode\n');
  await writeFile(join(root, 'new\nline'), 'newline in the name\n');
  await writeFile(join(root, 'tab\tand-quote"'), 'tab\n');
  await writeFile(join(root, 'run.sh'), '#!/bin/sh\necho hi\n');
  await chmod(join(root, 'run.sh'), 0o755);
  await writeFile(join(root, 'secret.key'), 'k');
  await chmod(join(root, 'secret.key'), 0o600);
  await writeFile(join(root, 'read-only-dir/inside.txt'), 'inside a read-only dir\n');
  await chmod(join(root, 'read-only-dir/inside.txt'), 0o444);
  await symlink('nested/a/duplicate-1.txt', join(root, 'link-to-file'));
  await symlink('nested', join(root, 'link-to-dir'));
  await symlink('does/not/exist', join(root, 'dangling-link'));
  await utimes(join(root, 'app.log'), new Date('2021-03-04T05:06:07.123Z'), new Date('2021-03-04T05:06:07.123Z'));
  await utimes(join(root, 'nested/a'), new Date('2020-01-01T00:00:00Z'), new Date('2020-01-01T00:00:00Z'));
  await chmod(join(root, 'nested/a/b'), 0o750);
  await chmod(join(root, 'read-only-dir'), 0o555);
}

export interface Described {
  readonly type: string;
  readonly mode: number;
  readonly size: number;
  readonly mtimeMs: number;
  readonly sha256?: string;
  readonly target?: string;
}

/** Everything a user would compare after a restore, keyed by relative path (root excluded). */
export async function describeTree(root: string): Promise<Record<string, Described>> {
  const out: Record<string, Described> = {};
  const visit = async (rel: string) => {
    for (const name of (await readdir(join(root, rel))).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      const abs = join(root, path);
      const st = await lstat(abs);
      const base = { mode: st.mode & 0o7777, mtimeMs: Math.floor(st.mtimeMs) };
      if (st.isSymbolicLink()) out[path] = { ...base, type: 'symlink', size: st.size, target: await readlink(abs) };
      else if (st.isDirectory()) {
        out[path] = { ...base, type: 'dir', size: 0 };
        await visit(path);
      } else
        out[path] = {
          ...base,
          type: 'file',
          size: st.size,
          sha256: createHash('sha256')
            .update(await readFile(abs))
            .digest('hex'),
        };
    }
  };
  await visit('');
  return out;
}
