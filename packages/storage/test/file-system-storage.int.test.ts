import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileSystemStorage } from '../src/index.js';

let root: string;
let storage: FileSystemStorage;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'stowage-storage-'));
  storage = new FileSystemStorage(root);
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function allFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}

describe('FileSystemStorage', () => {
  it('a non-durable put is still atomic and creates missing directories, also after a delete pruned them', async () => {
    await storage.putObject('backups/b1/items/pods/namespaces/ns/p.json', '{"v":1}', { durable: false });
    await storage.putObject('backups/b1/items/pods/namespaces/ns/p.json', '{"v":2}', { durable: false });
    expect((await storage.getObject('backups/b1/items/pods/namespaces/ns/p.json'))?.toString()).toBe('{"v":2}');
    expect(await storage.deletePrefix('backups/b1/')).toBe(1);
    await storage.putObject('backups/b1/items/pods/namespaces/ns/q.json', '{}', { durable: false });
    expect(await allFiles(root)).toEqual(['backups/b1/items/pods/namespaces/ns/q.json']); // no temp files left
  });

  it('objects above the small-object size take the asynchronous read and read back whole', async () => {
    const big = Buffer.alloc(300 * 1024, 7);
    await storage.putObject('backups/b1/big.bin', big, { durable: false });
    await storage.putObject('backups/b1/big-durable.bin', big);
    expect((await storage.getObject('backups/b1/big.bin'))?.equals(big)).toBe(true);
    expect((await storage.getObject('backups/b1/big-durable.bin'))?.equals(big)).toBe(true);
    expect(await allFiles(root)).toEqual(['backups/b1/big-durable.bin', 'backups/b1/big.bin']);
  });

  it('stores, reads, lists and deletes objects by key', async () => {
    await storage.putObject('backups/b1/velero-backup.json', '{"a":1}');
    await storage.putObject('backups/b1/items/pods/namespaces/ns/p.json', Buffer.from('{}'));
    await storage.putObject('backups/b2/velero-backup.json', '{}');
    expect((await storage.getObject('backups/b1/velero-backup.json'))?.toString()).toBe('{"a":1}');
    expect(await storage.getObject('backups/b1/missing.json')).toBeUndefined();
    expect(await storage.getObject('backups/b1')).toBeUndefined(); // a directory is not an object
    expect(await storage.exists('backups/b1/velero-backup.json')).toBe(true);
    expect(await storage.exists('backups/b1')).toBe(false);
    expect(await storage.list('backups/b1/')).toEqual(['backups/b1/items/pods/namespaces/ns/p.json', 'backups/b1/velero-backup.json']);
    expect(await storage.list('backups/b')).toHaveLength(3);
    expect(await storage.list('nothing/')).toEqual([]);

    expect(await storage.deletePrefix('backups/b1/')).toBe(2);
    expect(await storage.list('')).toEqual(['backups/b2/velero-backup.json']);
    expect(await readdir(join(root, 'backups'))).toEqual(['b2']); // emptied directories are pruned
  });

  it('rewrites the same key with the same bytes harmlessly, leaving no temp files', async () => {
    for (let i = 0; i < 3; i++) await storage.putObject('backups/b/x.json', '{"same":true}');
    expect((await storage.getObject('backups/b/x.json'))?.toString()).toBe('{"same":true}');
    expect(await allFiles(root)).toEqual(['backups/b/x.json']);
  });

  it('never shows a reader a partly written object', async () => {
    const a = Buffer.alloc(4 * 1024 * 1024, 'a');
    const b = Buffer.alloc(4 * 1024 * 1024, 'b');
    await storage.putObject('big.bin', a);
    let writing = true;
    const writer = (async () => {
      for (let i = 0; i < 10; i++) await storage.putObject('big.bin', i % 2 === 0 ? b : a);
      writing = false;
    })();
    let reads = 0;
    while (writing) {
      const seen = await storage.getObject('big.bin');
      expect(seen?.equals(a) || seen?.equals(b)).toBe(true);
      reads++;
    }
    await writer;
    expect(reads).toBeGreaterThan(0);
  });

  it('keeps the old object when a streamed write fails midway', async () => {
    await storage.putObject('backups/b/b.tar.gz', 'old');
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield Buffer.from('half of the new');
      throw new Error('source broke');
    }
    await expect(storage.putStream('backups/b/b.tar.gz', failing())).rejects.toThrow(/STORAGE_IO: writing .*source broke/);
    expect((await storage.getObject('backups/b/b.tar.gz'))?.toString()).toBe('old');
    expect(await allFiles(root)).toEqual(['backups/b/b.tar.gz']);
  });

  it('rejects unsafe keys before touching the disk', async () => {
    await expect(storage.putObject('../escape.json', 'x')).rejects.toMatchObject({ code: 'STORAGE_BAD_KEY' });
    await expect(storage.getObject('/etc/passwd')).rejects.toMatchObject({ code: 'STORAGE_BAD_KEY' });
    await expect(storage.list('a/../../')).rejects.toMatchObject({ code: 'STORAGE_BAD_KEY' });
    await expect(storage.deletePrefix('..')).rejects.toMatchObject({ code: 'STORAGE_BAD_KEY' });
    expect(await allFiles(root)).toEqual([]);
  });
});
