import { execFileSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  assembleTarball,
  type BackupItem,
  backupLayout,
  itemTarballPath,
  type ObjectStore,
  readGzipJson,
  stageItems,
  writePodVolumeBackupsSidecar,
  writeResourceListSidecar,
  writeResultsSidecar,
} from '../src/index.js';
import { BACKENDS, useBackend } from './support/backends.js';

const longName = `a-very-long-configmap-name-${'x'.repeat(200)}`;
const items: BackupItem[] = [
  {
    groupResource: 'pods',
    namespace: 'shop',
    name: 'db-0',
    object: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'db-0', namespace: 'shop' } },
  },
  {
    groupResource: 'deployments.apps',
    namespace: 'shop',
    name: 'web',
    object: { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web', namespace: 'shop' } },
  },
  { groupResource: 'persistentvolumes', name: 'pv-1', object: { apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name: 'pv-1' } } },
  {
    groupResource: 'clusterroles.rbac.authorization.k8s.io',
    name: 'system:aggregate-to-admin',
    object: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'system:aggregate-to-admin' } },
  },
  {
    groupResource: 'configmaps',
    namespace: 'shop',
    name: longName,
    object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: longName, namespace: 'shop' }, data: { ünïcode: 'ok' } },
  },
];

function tar(...args: string[]): string {
  return execFileSync('tar', args, { encoding: 'utf8' });
}

describe.each(BACKENDS)('assembleTarball on %s', (kind) => {
  const backend = useBackend(kind);
  let storage: ObjectStore;
  let root: string;
  beforeEach(() => {
    storage = backend().storage;
    root = backend().scratch;
  });

  it('writes a gzip tar that system tar lists and extracts with every item at its Velero path', async () => {
    await stageItems(storage, 'nightly', items);
    const result = await assembleTarball(storage, 'nightly', { mtime: new Date('2026-01-02T03:04:05Z') });
    expect(result.items).toBe(items.length);
    const tarball = await backend().localFile(backupLayout('nightly').tarball);

    const listed = tar('-tzf', tarball).trim().split('\n');
    expect(listed[0]).toBe('metadata/version');
    for (const item of items) expect(listed).toContain(itemTarballPath(item));
    expect(listed).toContain('resources/deployments.apps/v1-preferredversion/namespaces/shop/web.json');
    expect(listed).toContain('resources/clusterroles.rbac.authorization.k8s.io/v1-preferredversion/cluster/system:aggregate-to-admin.json');
    expect(listed).toHaveLength(1 + 2 * items.length);

    const out = join(root, 'out');
    execFileSync('mkdir', [out]);
    tar('-xzf', tarball, '-C', out);
    expect(await readFile(join(out, 'metadata/version'), 'utf8')).toBe('1.1.0\n');
    for (const item of items) {
      expect(JSON.parse(await readFile(join(out, itemTarballPath(item)), 'utf8'))).toEqual(item.object);
    }
    const verbose = tar('-tvzf', tarball).trim().split('\n');
    expect(verbose.every((line) => line.startsWith('-rwxr-xr-x'))).toBe(true);

    expect(result.resourceList).toEqual({
      'apps/v1/Deployment': ['shop/web'],
      'rbac.authorization.k8s.io/v1/ClusterRole': ['system:aggregate-to-admin'],
      'v1/ConfigMap': [`shop/${longName}`],
      'v1/PersistentVolume': ['pv-1'],
      'v1/Pod': ['shop/db-0'],
    });
  });

  it('is safe to repeat: re-staged items appear once, the newest copy, and a second assembly gives the same bytes', async () => {
    await stageItems(storage, 'b', items);
    const relabelled = {
      ...items[0]!,
      object: { ...items[0]!.object, metadata: { name: 'db-0', namespace: 'shop', labels: { again: 'yes' } } },
    };
    await stageItems(storage, 'b', [relabelled, ...items.slice(1)]); // a re-delivered block job, which read the pod again
    const mtime = new Date('2026-01-02T03:04:05Z');
    await assembleTarball(storage, 'b', { mtime });
    const first = await storage.getObject(backupLayout('b').tarball);
    await assembleTarball(storage, 'b', { mtime });
    const second = await storage.getObject(backupLayout('b').tarball);
    expect(second?.equals(first ?? Buffer.alloc(0))).toBe(true);
    const path = join(root, 'b.tar.gz');
    await writeFile(path, second ?? Buffer.alloc(0));
    expect(tar('-tzf', path).trim().split('\n')).toHaveLength(1 + 2 * items.length);
    expect(JSON.parse(tar('-xzOf', path, 'resources/pods/namespaces/shop/db-0.json'))).toEqual(relabelled.object);
  });

  it('streams an archive too large to assemble in memory, and system tar reads every item of it', async () => {
    // 1,200 items of ~4 KiB each, twice (preferred-version copies): ~10 MiB of tar, past the
    // 4 MiB built in memory, so the rest streams after the part already assembled.
    const big: BackupItem[] = Array.from({ length: 1200 }, (_, i) => ({
      groupResource: 'configmaps',
      namespace: 'bulk',
      name: `cm-${String(i).padStart(4, '0')}`,
      object: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `cm-${String(i).padStart(4, '0')}`, namespace: 'bulk' },
        data: { blob: `${i}:`.padEnd(4000, String.fromCharCode(97 + (i % 26))) },
      },
    }));
    await stageItems(storage, 'big', big, { durable: false });
    const result = await assembleTarball(storage, 'big', { mtime: new Date('2026-01-02T03:04:05Z') });
    expect(result.items).toBe(big.length);
    const tarball = await backend().localFile(backupLayout('big').tarball);
    const listed = tar('-tzf', tarball).trim().split('\n');
    expect(listed).toHaveLength(1 + 2 * big.length);
    expect(listed.at(-1)).toBe('resources/configmaps/v1-preferredversion/namespaces/bulk/cm-1199.json');
    const out = join(root, 'big-out');
    execFileSync('mkdir', ['-p', out]);
    tar('-xzf', tarball, '-C', out);
    const last = JSON.parse(await readFile(join(out, 'resources/configmaps/namespaces/bulk/cm-1199.json'), 'utf8'));
    expect(last).toEqual(big[1199]?.object);
  });

  it('assembles an empty backup to a tarball holding only metadata/version', async () => {
    await assembleTarball(storage, 'empty', { mtime: new Date(0), preferredVersionCopies: false });
    expect(tar('-tzf', await backend().localFile(backupLayout('empty').tarball)).trim()).toBe('metadata/version');
  });

  it('writes sidecars that read back as the JSON they were given', async () => {
    await writePodVolumeBackupsSidecar(storage, 'b', [{ metadata: { name: 'pvb-1' }, status: { phase: 'Completed' } }]);
    await writeResourceListSidecar(storage, 'b', { 'v1/Pod': ['shop/db-0'] });
    await writeResultsSidecar(storage, 'b', { errors: { namespaces: { shop: ['hook failed'] } }, warnings: {} });
    const layout = backupLayout('b');
    expect(await readGzipJson(storage, layout.podVolumeBackups)).toEqual([{ metadata: { name: 'pvb-1' }, status: { phase: 'Completed' } }]);
    expect(await readGzipJson(storage, layout.resourceList)).toEqual({ 'v1/Pod': ['shop/db-0'] });
    expect(await readGzipJson(storage, layout.results)).toEqual({ errors: { namespaces: { shop: ['hook failed'] } }, warnings: {} });
    // Also readable with system gunzip, as a Velero user would.
    expect(execFileSync('gzip', ['-dc', await backend().localFile(layout.resourceList)], { encoding: 'utf8' })).toBe(
      '{"v1/Pod":["shop/db-0"]}',
    );
  });
});
