import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findVolumeDir, kubeletVolumeLayout, type VolumeDirLayout } from './volume-dir.js';

describe('kubeletVolumeLayout: where each volume plugin keeps its data on a kubelet', () => {
  const cases: {
    name: string;
    volume: Record<string, unknown>;
    pv?: Parameters<typeof kubeletVolumeLayout>[1];
    layout: VolumeDirLayout;
  }[] = [
    {
      name: 'emptyDir: the directory itself',
      volume: { emptyDir: {} },
      layout: { kind: 'exact', plugin: 'kubernetes.io~empty-dir', dir: 'v', data: 'v' },
    },
    {
      name: 'inline CSI: only <volume>/mount',
      volume: { csi: { driver: 'x' } },
      layout: { kind: 'exact', plugin: 'kubernetes.io~csi', dir: 'v', data: 'v/mount' },
    },
    {
      name: 'PVC on a CSI PV: only <pv>/mount',
      volume: { persistentVolumeClaim: { claimName: 'c' } },
      pv: { name: 'pv-1', spec: { csi: { driver: 'x' } } },
      layout: { kind: 'exact', plugin: 'kubernetes.io~csi', dir: 'pv-1', data: 'pv-1/mount' },
    },
    {
      name: 'PVC on an in-tree PV migrated to CSI: only <pv>/mount',
      volume: { persistentVolumeClaim: { claimName: 'c' } },
      pv: {
        name: 'pv-1',
        spec: { awsElasticBlockStore: { volumeID: 'v' } },
        annotations: { 'pv.kubernetes.io/migrated-to': 'ebs.csi.aws.com' },
      },
      layout: { kind: 'exact', plugin: 'kubernetes.io~csi', dir: 'pv-1', data: 'pv-1/mount' },
    },
    {
      name: 'PVC on an NFS PV: the mount point kubernetes.io~nfs/<pv>',
      volume: { persistentVolumeClaim: { claimName: 'c' } },
      pv: { name: 'pv-1', spec: { nfs: { server: 's', path: '/p' } } },
      layout: { kind: 'exact', plugin: 'kubernetes.io~nfs', dir: 'pv-1', data: 'pv-1' },
    },
    {
      name: 'PVC on a local PV: kubernetes.io~local-volume/<pv>',
      volume: { persistentVolumeClaim: { claimName: 'c' } },
      pv: { name: 'pv-1', spec: { local: { path: '/mnt/disk' } } },
      layout: { kind: 'exact', plugin: 'kubernetes.io~local-volume', dir: 'pv-1', data: 'pv-1' },
    },
    {
      name: 'PVC on an in-tree EBS PV (not migrated): kubernetes.io~aws-ebs/<pv>',
      volume: { persistentVolumeClaim: { claimName: 'c' } },
      pv: { name: 'pv-1', spec: { awsElasticBlockStore: { volumeID: 'v' } } },
      layout: { kind: 'exact', plugin: 'kubernetes.io~aws-ebs', dir: 'pv-1', data: 'pv-1' },
    },
    {
      name: 'inline NFS: kubernetes.io~nfs/<volume>',
      volume: { nfs: { server: 's', path: '/p' } },
      layout: { kind: 'exact', plugin: 'kubernetes.io~nfs', dir: 'v', data: 'v' },
    },
    {
      name: 'flex volume: any plugin directory but CSI',
      volume: { flexVolume: { driver: 'acme/x' } },
      layout: { kind: 'any-plugin', dir: 'v' },
    },
    {
      name: 'hostPath: no kubelet directory',
      volume: { hostPath: { path: '/x' } },
      layout: { kind: 'none', why: 'hostPath volumes have no data directory under the kubelet' },
    },
  ];
  it.each(cases)('$name', ({ volume, pv, layout }) => {
    expect(kubeletVolumeLayout({ name: 'v', ...volume }, pv)).toEqual(layout);
  });
});

describe('findVolumeDir on a kubelet-shaped directory', () => {
  let root: string;
  const what = { volume: 'data', podRef: 'ns/p' };
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'stowage-volume-dir-'));
    // CSI PV with data; CSI PV set up by the kubelet but not mounted (vol_data.json only).
    await mkdir(join(root, 'kubernetes.io~csi', 'pv-ok', 'mount'), { recursive: true });
    await mkdir(join(root, 'kubernetes.io~csi', 'pv-unmounted'), { recursive: true });
    await writeFile(join(root, 'kubernetes.io~csi', 'pv-unmounted', 'vol_data.json'), '{"driverName":"x"}');
    await mkdir(join(root, 'kubernetes.io~nfs', 'pv-nfs'), { recursive: true });
    await mkdir(join(root, 'acme~flex', 'flexy'), { recursive: true });
    await mkdir(join(root, 'kubernetes.io~csi', 'only-csi'), { recursive: true });
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('a CSI volume: its mount directory', async () => {
    const res = await findVolumeDir(root, { kind: 'exact', plugin: 'kubernetes.io~csi', dir: 'pv-ok', data: 'pv-ok/mount' }, what);
    expect(res).toEqual({ ok: true, path: join(root, 'kubernetes.io~csi', 'pv-ok', 'mount'), plugin: 'kubernetes.io~csi' });
  });

  it('a CSI volume without its mount directory fails naming the path, and never reads <pv>/', async () => {
    const res = await findVolumeDir(
      root,
      { kind: 'exact', plugin: 'kubernetes.io~csi', dir: 'pv-unmounted', data: 'pv-unmounted/mount' },
      what,
    );
    expect(res.ok).toBe(false);
    if (res.ok) return;
    expect(res.reason).toBe('dir-missing');
    expect(res.message).toContain(join(root, 'kubernetes.io~csi', 'pv-unmounted', 'mount'));
    expect(res.message).toContain('holds no data directory');
  });

  it('an NFS PV: the mount point itself', async () => {
    const res = await findVolumeDir(root, { kind: 'exact', plugin: 'kubernetes.io~nfs', dir: 'pv-nfs', data: 'pv-nfs' }, what);
    expect(res).toMatchObject({ ok: true, path: join(root, 'kubernetes.io~nfs', 'pv-nfs') });
  });

  it('an NFS PV whose directory is missing fails naming the path', async () => {
    const res = await findVolumeDir(root, { kind: 'exact', plugin: 'kubernetes.io~nfs', dir: 'gone', data: 'gone' }, what);
    expect(res).toMatchObject({ ok: false, reason: 'dir-missing' });
    expect(res.ok ? '' : res.message).toContain(join(root, 'kubernetes.io~nfs', 'gone'));
  });

  it('an unknown plugin: found under its vendor directory, never under CSI without mount', async () => {
    expect(await findVolumeDir(root, { kind: 'any-plugin', dir: 'flexy' }, what)).toMatchObject({ ok: true, plugin: 'acme~flex' });
    expect(await findVolumeDir(root, { kind: 'any-plugin', dir: 'only-csi' }, what)).toMatchObject({ ok: false, reason: 'dir-missing' });
  });

  it('a source without a directory says why', async () => {
    const res = await findVolumeDir(root, { kind: 'none', why: 'hostPath volumes have no data directory under the kubelet' }, what);
    expect(res).toMatchObject({ ok: false, reason: 'no-volume-dir' });
    expect(res.ok ? '' : res.message).toContain('hostPath');
  });
});
