import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { FileSystemStorage } from './file-system-storage.js';
import { backupLayout } from './layout.js';
import { writeTar } from './tar-writer.js';
import { readBackupTarball } from './tarball-reader.js';

async function collect<T>(source: AsyncIterable<T> | Iterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of source) out.push(x);
  return out;
}

describe('readBackupTarball', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
  });
  const emptyStorage = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stowage-tar-reader-'));
    dirs.push(dir);
    return new FileSystemStorage(dir);
  };
  const storageWith = async (entries: Array<{ path: string; data: string }>) => {
    const storage = await emptyStorage();
    const tarEntries = entries.map((e) => ({ path: e.path, data: Buffer.from(e.data) }));
    const tar = Buffer.concat(await collect(writeTar(tarEntries, { mtime: new Date(0) })));
    await storage.putObject(backupLayout('b1').tarball, gzipSync(tar));
    return storage;
  };

  it('reads namespaced and cluster items (a pax long name too), passing over metadata and preferred-version copies', async () => {
    const longName = 'x'.repeat(150);
    const storage = await storageWith([
      { path: 'metadata/version', data: '1.1.0\n' },
      { path: 'resources/configmaps/namespaces/shop/settings.json', data: '{"kind":"ConfigMap","metadata":{"name":"settings"}}' },
      { path: 'resources/configmaps/v1-preferredversion/namespaces/shop/settings.json', data: '{"kind":"ConfigMap"}' },
      { path: 'resources/namespaces/cluster/shop.json', data: '{"kind":"Namespace","metadata":{"name":"shop"}}' },
      { path: `resources/secrets/namespaces/shop/${longName}.json`, data: '{"kind":"Secret"}' },
    ]);
    const items = await collect(readBackupTarball(storage, 'b1'));
    expect(items.map((i) => [i.groupResource, i.namespace, i.name])).toEqual([
      ['configmaps', 'shop', 'settings'],
      ['namespaces', null, 'shop'],
      ['secrets', 'shop', longName],
    ]);
    expect(items[0]?.object).toEqual({ kind: 'ConfigMap', metadata: { name: 'settings' } });
  });

  it('an item that is not a JSON object fails the read, naming the entry', async () => {
    const storage = await storageWith([{ path: 'resources/configmaps/namespaces/shop/bad.json', data: '{"cut' }]);
    await expect(collect(readBackupTarball(storage, 'b1'))).rejects.toThrow(
      /STORAGE_CORRUPT_ITEM.*configmaps\/namespaces\/shop\/bad\.json/,
    );
  });

  it('streams the archive and never parses an item `select` passes over', async () => {
    const fs = await storageWith([
      { path: 'resources/configmaps/namespaces/other/unread.json', data: '{"not json' },
      { path: 'resources/configmaps/namespaces/shop/settings.json', data: '{"kind":"ConfigMap","metadata":{"name":"settings"}}' },
      { path: 'resources/persistentvolumes/cluster/pv-1.json', data: '{"kind":"PersistentVolume"}' },
    ]);
    // Only the stream: asking for the whole archive's bytes fails the read.
    const streamOnly = Object.assign(Object.create(fs) as FileSystemStorage, {
      getObject: async () => {
        throw new Error('the whole archive was read into memory');
      },
    });
    const seen: unknown[] = [];
    const items = await collect(
      readBackupTarball(streamOnly, 'b1', {
        select: (ref) => {
          seen.push(ref);
          return ref.namespace !== 'other';
        },
      }),
    );
    expect(seen).toEqual([
      { path: 'resources/configmaps/namespaces/other/unread.json', groupResource: 'configmaps', namespace: 'other', name: 'unread' },
      { path: 'resources/configmaps/namespaces/shop/settings.json', groupResource: 'configmaps', namespace: 'shop', name: 'settings' },
      { path: 'resources/persistentvolumes/cluster/pv-1.json', groupResource: 'persistentvolumes', namespace: null, name: 'pv-1' },
    ]);
    expect(items.map((i) => i.name)).toEqual(['settings', 'pv-1']);
  });

  it('a tarball cut short, in its gzip or in its tar, fails the read: never a restore of fewer items', async () => {
    const entries = Array.from({ length: 200 }, (_, i) => ({
      path: `resources/configmaps/namespaces/shop/c-${i}.json`,
      data: Buffer.from(JSON.stringify({ kind: 'ConfigMap', metadata: { name: `c-${i}` }, data: { x: 'y'.repeat(i * 7) } })),
    }));
    const tar = Buffer.concat(await collect(writeTar(entries, { mtime: new Date(0) })));
    const storage = await emptyStorage();
    const gz = gzipSync(tar);
    await storage.putObject(backupLayout('cut-gzip').tarball, gz.subarray(0, gz.length - 100));
    await storage.putObject(backupLayout('cut-tar').tarball, gzipSync(tar.subarray(0, tar.length - 1024 - 512)));
    await expect(collect(readBackupTarball(storage, 'cut-gzip'))).rejects.toThrow(/unexpected end of file/);
    await expect(collect(readBackupTarball(storage, 'cut-tar'))).rejects.toThrow(
      /STORAGE_CORRUPT_OBJECT: backup cut-tar's tarball .* ends before its end-of-archive blocks/,
    );
  });

  it('a backup without a tarball is an error, not an empty restore', async () => {
    await expect(collect(readBackupTarball(await emptyStorage(), 'b1'))).rejects.toThrow(/has no tarball/);
  });
});
