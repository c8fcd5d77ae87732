import { appendFileSync, unlinkSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Repository } from '../src/index.js';
import { TEST_CHUNKER } from './test-settings.js';

let work: string;
beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'stowage-small-'));
});
afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

describe('small files read in batches by worker threads', () => {
  it('many small files restore byte for byte; one removed and one grown after the walk are kept as empty and read whole', async () => {
    const source = join(work, 'volume');
    for (let d = 0; d < 5; d++) {
      await mkdir(join(source, `d${d}`), { recursive: true });
      for (let f = 0; f < 100; f++) await writeFile(join(source, `d${d}`, `f${f}.txt`), `file ${d}/${f}\n`.repeat(1 + f));
    }
    const repo = await Repository.init({ dir: join(work, 'repo'), key: 'small files key', chunker: TEST_CHUNKER, durable: false });
    let changed = false;
    const { snapshotId, stats } = await repo.backup(source, {
      // The first progress report comes after the walk and before any file is read.
      onProgress: () => {
        if (changed) return;
        changed = true;
        unlinkSync(join(source, 'd0', 'f1.txt'));
        appendFileSync(join(source, 'd4', 'f99.txt'), 'x'.repeat(300 * 1024));
      },
    });
    expect(changed).toBe(true);
    expect(stats.files).toBe(500);
    const target = join(work, 'restored');
    await repo.restore(snapshotId, target);
    expect(await readFile(join(target, 'd0', 'f1.txt'), 'utf8')).toBe('');
    expect((await readFile(join(target, 'd4', 'f99.txt'))).equals(await readFile(join(source, 'd4', 'f99.txt')))).toBe(true);
    for (let d = 0; d < 5; d++) {
      for (let f = 0; f < 100; f++) {
        if ((d === 0 && f === 1) || (d === 4 && f === 99)) continue;
        expect(await readFile(join(target, `d${d}`, `f${f}.txt`), 'utf8')).toBe(`file ${d}/${f}\n`.repeat(1 + f));
      }
    }
    expect(await repo.verify()).toMatchObject({ ok: true });
  });
});
