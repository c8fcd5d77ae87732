import { execFileSync } from 'node:child_process';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  assembleTarball,
  type BackupItem,
  type BackupStorage,
  backupLayout,
  type ObjectStore,
  restageItems,
  StorageErrorCode,
  stagedItemPaths,
  stageItems,
} from '../src/index.js';
import { BACKENDS, useBackend } from './support/backends.js';

function pod(name: string, extra: Record<string, unknown> = {}): BackupItem {
  return {
    groupResource: 'pods',
    namespace: 'shop',
    name,
    object: { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'shop' }, ...extra },
  };
}

describe.each(BACKENDS)('staged item segments on %s', (kind) => {
  const backend = useBackend(kind);
  let storage: ObjectStore;
  beforeEach(() => {
    storage = backend().storage;
  });
  const segments = (name: string) => storage.list(backupLayout(name).itemsPrefix);
  async function tarList(name: string): Promise<string[]> {
    return execFileSync('tar', ['-tzf', await backend().localFile(backupLayout(name).tarball)], { encoding: 'utf8' })
      .trim()
      .split('\n');
  }

  it('writes the items of jobs that stage at the same moment in one file, and each job waits for it', async () => {
    const jobs = Array.from({ length: 20 }, (_, i) => stageItems(storage, 'b', [pod(`p-${i}`), pod(`q-${i}`)], { durable: false }));
    await Promise.all(jobs);
    expect(await segments('b')).toHaveLength(1);
    expect(await stagedItemPaths(storage, 'b')).toHaveLength(40);

    // A job staging later gets a segment of its own.
    await stageItems(storage, 'b', [pod('late')]);
    expect(await segments('b')).toHaveLength(2);
    const result = await assembleTarball(storage, 'b', { preferredVersionCopies: false });
    expect(result.items).toBe(41);
    expect(await tarList('b')).toContain('resources/pods/namespaces/shop/late.json');
  });

  it('keeps backups apart: items of two backups staged at once go to two segments', async () => {
    await Promise.all([stageItems(storage, 'a', [pod('x')]), stageItems(storage, 'c', [pod('y')])]);
    expect(await stagedItemPaths(storage, 'a')).toEqual(['pods/namespaces/shop/x.json']);
    expect(await stagedItemPaths(storage, 'c')).toEqual(['pods/namespaces/shop/y.json']);
  });

  it('when a shared segment cannot be written, each job writes its own: only the job whose write fails fails', async () => {
    let refuse: (data: string) => boolean = () => true;
    const flaky: BackupStorage = {
      list: (p) => storage.list(p),
      getObject: (k) => storage.getObject(k),
      exists: (k) => storage.exists(k),
      deletePrefix: (p) => storage.deletePrefix(p),
      putStream: (k, b) => storage.putStream(k, b),
      putObject: async (key, data, opts) => {
        if (refuse(data.toString())) throw new Error('injected: disk refused');
        return storage.putObject(key, data, opts);
      },
    };
    const all = await Promise.allSettled([stageItems(flaky, 'b', [pod('a')]), stageItems(flaky, 'b', [pod('b')])]);
    expect(all.map((o) => o.status)).toEqual(['rejected', 'rejected']);
    expect(await segments('b')).toEqual([]);

    refuse = (data) => data.includes('/bad.json');
    const some = await Promise.allSettled([
      stageItems(flaky, 'b', [pod('a')]),
      stageItems(flaky, 'b', [pod('bad')]),
      stageItems(flaky, 'b', [pod('c')]),
    ]);
    expect(some.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(await stagedItemPaths(storage, 'b')).toEqual(['pods/namespaces/shop/a.json', 'pods/namespaces/shop/c.json']);
  });

  it('refuses an item whose names cannot form a path, before anything is written', async () => {
    await expect(stageItems(storage, 'b', [pod('ok'), { ...pod('x'), namespace: '..' }])).rejects.toThrow(/STORAGE_BAD_NAME/);
    expect(await segments('b')).toEqual([]);
  });

  it('finds a segment cut by a machine crash, and restaging replaces every segment so assembly succeeds', async () => {
    await stageItems(storage, 'b', [pod('a'), pod('b')], { durable: false });
    await stageItems(storage, 'b', [pod('c')], { durable: false });
    const [first = ''] = await segments('b');
    const bytes = (await storage.getObject(first)) ?? Buffer.alloc(0);
    await backend().tamper(first, bytes.subarray(0, bytes.length - 7)); // an unflushed tail lost

    await expect(assembleTarball(storage, 'b')).rejects.toMatchObject({ code: StorageErrorCode.corruptItem });
    expect(await restageItems(storage, 'b', [pod('a'), pod('b'), pod('c')], 2)).toBe(3);
    expect(await segments('b')).toHaveLength(2); // two fresh ones of at most 2 items; the cut one is gone
    const result = await assembleTarball(storage, 'b', { preferredVersionCopies: false });
    expect(result.items).toBe(3);
  });

  it('rejects a segment line whose path would leave resources/ in the tarball', async () => {
    await stageItems(storage, 'b', [pod('a')]);
    const [key] = await segments('b');
    for (const [path, error] of [
      ['pods/namespaces/../../../etc/x.json', /STORAGE_CORRUPT_ITEM: staged segment .* line 1 has no item path/],
      ['pods/namespaces/../x.json', /STORAGE_BAD_KEY/],
    ] as const) {
      await storage.putObject(key ?? '', `${JSON.stringify(path)}\t{"kind":"Pod"}\n`);
      await expect(assembleTarball(storage, 'b')).rejects.toThrow(error);
    }
  });
});
