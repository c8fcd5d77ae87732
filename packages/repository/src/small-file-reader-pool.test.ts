import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SmallFileReaderPool } from './small-file-reader.js';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stowage-reader-pool-'));
  await writeFile(join(dir, 'a'), 'alpha');
  await writeFile(join(dir, 'b'), 'bravo!');
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A read request for `name` in `dir`, with the identity a walk would have seen. */
const file = (name: string, size: number) => {
  const st = statSync(join(dir, name));
  return { path: join(dir, name), size, dev: st.dev, ino: st.ino };
};

const readBoth = async (pool: SmallFileReaderPool) => {
  const lease = pool.acquire();
  try {
    const reads = await lease.reader.read([file('a', 5), file('b', 6)]);
    return { reader: lease.reader, text: reads.map((r) => (r.kind === 'read' ? r.data.toString() : r.kind)) };
  } finally {
    await lease.release();
  }
};

describe('SmallFileReaderPool', () => {
  it('hands the same threads to one backup after another, and to backups running at once', async () => {
    const pool = new SmallFileReaderPool(2);
    try {
      const first = await readBoth(pool);
      const second = await readBoth(pool);
      expect(first.text).toEqual(['alpha', 'bravo!']);
      expect(second).toEqual(first);
      const together = await Promise.all([readBoth(pool), readBoth(pool), readBoth(pool)]);
      for (const one of together) expect(one).toEqual(first);
    } finally {
      await pool.close();
    }
  });

  it('stops idle threads after the idle time; the next backup gets new ones that work', async () => {
    const pool = new SmallFileReaderPool(2, 50);
    try {
      const first = await readBoth(pool);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const second = await readBoth(pool);
      expect(second.reader).not.toBe(first.reader);
      expect(second.text).toEqual(['alpha', 'bravo!']);
      // The stopped reader refuses work: its threads are gone.
      await expect(first.reader.read([file('a', 5)])).rejects.toThrow();
    } finally {
      await pool.close();
    }
  });

  it('never hands out a reader whose thread crashed; the backups using it fail, the next one works', async () => {
    const pool = new SmallFileReaderPool(1);
    try {
      const lease = pool.acquire();
      const other = pool.acquire();
      // A negative size makes the thread's buffer allocation throw outside its per-file handling.
      await expect(lease.reader.read([file('a', -5)])).rejects.toThrow();
      expect(lease.reader.broken).toBe(true);
      await expect(other.reader.read([file('a', 5)])).rejects.toThrow();
      const next = await readBoth(pool);
      expect(next.reader).not.toBe(lease.reader);
      expect(next.text).toEqual(['alpha', 'bravo!']);
      await lease.release();
      await other.release();
    } finally {
      await pool.close();
    }
  });
  it('stops the rest of a reader whose thread died while no backup used it, when it replaces it', async () => {
    const pool = new SmallFileReaderPool(2);
    try {
      const { reader: idle } = await readBoth(pool);
      // Released and idle; one of its threads dies (here: a bad request sent past the pool).
      await expect(idle.read([file('a', -5)])).rejects.toThrow();
      const next = await readBoth(pool);
      expect(next.reader).not.toBe(idle);
      expect(next.text).toEqual(['alpha', 'bravo!']);
      await expect(idle.read([file('a', 5)])).rejects.toThrow('closed');
    } finally {
      await pool.close();
    }
  });
});

describe('a repository keeping its reader threads between backups', () => {
  // A CLI process backs up and returns from main: the threads kept for the next backup (small-file
  // readers, large-file hashers) must not keep it running (referenced, they would hold it for the
  // 30 s idle time after its last line).
  it('lets a process that has backed up exit by itself', async () => {
    const repoSrc = pathToFileURL(join(import.meta.dirname, 'index.ts')).href;
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const source = join(dir, 'volume');
    await mkdir(source);
    await writeFile(join(source, 'file'), 'data');
    // Over 1 MiB: read, cut and sealed on a large-file thread, which the repository keeps too.
    await writeFile(join(source, 'large'), Buffer.alloc(3 * 1024 * 1024, 7));
    const script = `
      const { Repository } = await import(${JSON.stringify(repoSrc)});
      const repo = await Repository.init({ dir: ${JSON.stringify(join(dir, 'repo'))}, key: 'reader pool test key', durable: false });
      const first = await repo.backup(${JSON.stringify(source)});
      // After close() stopped the threads, a backup starts them again.
      await repo.close();
      const second = await repo.backup(${JSON.stringify(source)});
      const third = await repo.backup(${JSON.stringify(source)});
      console.log(new Set([first.snapshotId, second.snapshotId, third.snapshotId]).size + ' snapshots');
    `;
    await writeFile(join(dir, 'backup-three-times.mjs'), script);
    const child = spawn(process.execPath, ['--conditions=@stowage/source', '--import', tsx, join(dir, 'backup-three-times.mjs')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    let lastLineAt = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      lastLineAt = Date.now();
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(stdout.trim()).toBe('3 snapshots');
    expect(code).toBe(0);
    // Seconds at most even on a busy machine; 30 s if the idle threads held the process.
    expect(Date.now() - lastLineAt).toBeLessThan(15_000);
  }, 180_000);
});
