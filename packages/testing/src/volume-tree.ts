import { createHash, randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, readdir, readFile, readlink, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Log-like text: compresses somewhat, but no two runs are equal. */
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
 * (Re)creates at `root` a tree with what volumes really hold: a large random file, a compressible
 * log, many small files in nested dirs, the same content twice, empty files and dirs, symlinks
 * (one dangling), names with spaces, unicode, a newline, a tab, a quote and a leading dash, and
 * odd modes (executable, 0600, a read-only dir with a read-only file in it, a 0750 dir).
 */
export async function writeVolumeTree(root: string, opts: { bigFileBytes?: number } = {}): Promise<void> {
  await rm(root, { recursive: true, force: true });
  await mkdir(join(root, 'nested/a/b/c'), { recursive: true });
  await mkdir(join(root, 'empty-dir'), { recursive: true });
  await mkdir(join(root, 'read-only-dir'), { recursive: true });
  await writeFile(join(root, 'big.bin'), randomBytes(opts.bigFileBytes ?? 2 * 1024 * 1024 + 777));
  await writeFile(join(root, 'app.log'), semiCompressible(512 * 1024));
  for (let i = 0; i < 40; i++) {
    const dir = ['nested', 'nested/a', 'nested/a/b', 'nested/a/b/c'][i % 4]!;
    await writeFile(join(root, dir, `small-${i}.dat`), randomBytes(500 + i * 97));
  }
  await writeFile(join(root, 'nested/a/duplicate-1.txt'), 'the same content twice\n');
  await writeFile(join(root, 'nested/a/b/duplicate-2.txt'), 'the same content twice\n');
  await writeFile(join(root, 'empty.txt'), '');
  await writeFile(join(root, 'nested/a/b/c/empty-too'), '');
  await writeFile(join(root, 'with space.txt'), 'spaces\n');
  await writeFile(join(root, 'ünïcödé-名前.txt'), 'unicode\n');
  await writeFile(join(root, 'new\nline'), 'newline in the name\n');
  await writeFile(join(root, 'tab\tand-quote"'), 'tab\n');
  await writeFile(join(root, '-leading-dash'), 'dash\n');
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

export interface DescribedEntry {
  readonly type: 'file' | 'dir' | 'symlink';
  readonly mode: number;
  readonly size: number;
  readonly mtimeMs: number;
  readonly sha256?: string;
  readonly target?: string;
}

/** Everything a user compares after a restore, keyed by relative path (root excluded): type, mode, size, mtime, bytes, link target. */
export async function describeTree(root: string): Promise<Record<string, DescribedEntry>> {
  const out: Record<string, DescribedEntry> = {};
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
      } else {
        const sha256 = createHash('sha256')
          .update(await readFile(abs))
          .digest('hex');
        out[path] = { ...base, type: 'file', size: st.size, sha256 };
      }
    }
  };
  await visit('');
  return out;
}
