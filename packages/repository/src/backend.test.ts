import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DirectoryBackend, ObjectExistsError, ObjectNotFoundError } from './backend.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stowage-backend-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('DirectoryBackend', () => {
  it('puts, gets, reads ranges, lists by prefix, deletes; parents are created on first use', async () => {
    const backend = new DirectoryBackend(dir, true);
    await backend.put('packs/ab/abcd', [Buffer.from('hello '), Buffer.from('world')]);
    await backend.put('index/abcd', Buffer.from('idx'));
    expect((await backend.get('packs/ab/abcd')).toString()).toBe('hello world');
    expect((await backend.getRange('packs/ab/abcd', 6, 5)).toString()).toBe('world');
    expect((await backend.getRange('packs/ab/abcd', 6, 100)).toString()).toBe('world'); // shorter at the end
    expect((await backend.list('packs/')).sort()).toEqual(['packs/ab/abcd']);
    expect(await backend.list('snapshots/')).toEqual([]);
    expect(await backend.exists('index/abcd')).toBe(true);
    await backend.delete('index/abcd');
    await backend.delete('index/abcd'); // absent is fine
    expect(await backend.exists('index/abcd')).toBe(false);
    await expect(backend.get('index/abcd')).rejects.toBeInstanceOf(ObjectNotFoundError);
    await expect(backend.getRange('packs/ab/none', 0, 1)).rejects.toBeInstanceOf(ObjectNotFoundError);
    expect(await readdir(join(dir, 'tmp'))).toEqual([]);
  });

  it('an exclusive put never overwrites', async () => {
    const backend = new DirectoryBackend(dir, false);
    await backend.put('config.json', Buffer.from('first'), { exclusive: true });
    await expect(backend.put('config.json', Buffer.from('second'), { exclusive: true })).rejects.toBeInstanceOf(ObjectExistsError);
    expect((await backend.get('config.json')).toString()).toBe('first');
  });

  it('an upload is invisible until committed, and an aborted one never appears', async () => {
    const backend = new DirectoryBackend(dir, true);
    const upload = backend.upload('packs/cd/cdef');
    await upload.write([Buffer.from('part one, ')]);
    await upload.write([Buffer.from('part '), Buffer.from('two')]);
    expect(await backend.exists('packs/cd/cdef')).toBe(false);
    await upload.commit();
    expect((await backend.get('packs/cd/cdef')).toString()).toBe('part one, part two');

    const dropped = backend.upload('packs/ef/ef01');
    await dropped.write([Buffer.from('never')]);
    await dropped.abort();
    expect(await backend.exists('packs/ef/ef01')).toBe(false);
    expect(await readdir(join(dir, 'tmp'))).toEqual([]);
  });

  it('range reads through more packs than it keeps open all return their own bytes', async () => {
    const backend = new DirectoryBackend(dir, false);
    for (let i = 0; i < 40; i++) await backend.put(`packs/00/p${i}`, Buffer.from(`pack number ${i}`));
    const reads = await Promise.all(Array.from({ length: 200 }, (_, n) => backend.getRange(`packs/00/p${n % 40}`, 5, 20)));
    expect(reads.map((bytes) => bytes.toString())).toEqual(Array.from({ length: 200 }, (_, n) => `number ${n % 40}`));
  });
});
