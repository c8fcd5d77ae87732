import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createKubeClients, createPvbClient, pvbLabels } from '@stowage/kube';
import { startSimulator } from '@stowage/kube-sim';
import { BackupState, deleteBackup, writeBackupArchive } from '@stowage/pipeline';
import { Repository } from '@stowage/repository';
import { type BackupStorage, backupLayout, FileSystemStorage, writeBackupMetadata } from '@stowage/storage';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOST_IN_FLIGHT_REASON, syncBackupCatalogue } from '../src/backup-sync.js';

const CRD_PATH = fileURLToPath(new URL('../../../k8s/base/crd-podvolumebackups.yaml', import.meta.url));
const silent = { info: () => undefined, warn: () => undefined };

describe('backup sync: the catalogue follows storage', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let redis: Redis;
  let dir: string;
  let fs: FileSystemStorage;
  /** Only what sync may use: the storage interface's list, getObject and exists (any backend has them). */
  let storage: Pick<BackupStorage, 'list' | 'getObject' | 'exists'>;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    redis = new Redis(redisHandle.url);
    dir = await mkdtemp(join(tmpdir(), 'stowage-sync-'));
    fs = new FileSystemStorage(dir);
    storage = { list: (p) => fs.list(p), getObject: (k) => fs.getObject(k), exists: (k) => fs.exists(k) };
  });
  afterAll(async () => {
    await redis?.quit();
    await redisHandle?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** A backup finished by another install: its archive and final marker in storage, as finalize writes them. */
  async function finishedElsewhere(name: string, phase: string, opts: { marker?: boolean } = {}): Promise<void> {
    const elsewhere = new BackupState({ redis, prefix: uniquePrefix() });
    await elsewhere.createBackup({
      name,
      uid: `uid-${name}`,
      spec: { includedNamespaces: ['shop'] },
      phase: 'InProgress',
      createdAt: 1_000,
    });
    await elsewhere.putBlockPlans(name, [
      { id: 'blk-1', plan: { pods: [{ namespace: 'shop', name: 'db-0' }], items: [{}, {}] }, items: [] },
    ]);
    await elsewhere.setCounter(name, 'itemsBackedUp', 2);
    await elsewhere.transitionPhase(name, ['InProgress'], phase, { completedAt: 2_000 });
    const record = (await elsewhere.getBackup(name))!;
    await writeBackupArchive(fs, elsewhere, record);
    if (opts.marker !== false) await writeBackupMetadata(fs, name, { kind: 'Backup', status: { phase } });
  }

  it('adds finished backups once (idempotent, also when two replicas sync at once), lists cut-off ones as Failed, skips what it cannot read, removes what was deleted', async () => {
    const state = new BackupState({ redis, prefix: uniquePrefix() });
    await finishedElsewhere('done-1', 'Completed');
    await finishedElsewhere('partial-1', 'PartiallyFailed');
    await finishedElsewhere('cut-1', 'Completed', { marker: false }); // killed before its final write
    await fs.putObject('backups/half-1/items/0001.jsonl', 'pods/namespaces/shop/db-0.json\t{}\n'); // killed mid-backup
    await writeBackupMetadata(fs, 'velero-only', { kind: 'Backup', status: { phase: 'Completed' } }); // not written by Stowage
    // A backup running here right now: storage has its staged items, Redis its record.
    await state.createBackup({ name: 'running-1', uid: 'u', spec: {}, phase: 'InProgress', createdAt: 5 });
    await fs.putObject('backups/running-1/items/0001.jsonl', 'pods/namespaces/shop/web-0.json\t{}\n');

    const [a, b] = await Promise.all([
      syncBackupCatalogue({ state, storage, logger: silent }),
      syncBackupCatalogue({ state, storage, logger: silent }),
    ]);
    expect([...a.added, ...b.added].sort()).toEqual(['done-1', 'partial-1']);
    expect([...a.lost, ...b.lost].sort()).toEqual(['cut-1', 'half-1']);
    expect(a.skipped.map((s) => s.name)).toEqual(['velero-only']);
    expect(a.skipped[0]?.reason).toMatch(/stowage\/backup\.json\.gz does not \(not written by this Stowage\)/);

    const page = await state.listBackups({ limit: 50 });
    const phases = Object.fromEntries(page.items.map((r) => [r.name, r.phase]));
    expect(phases).toEqual({
      'done-1': 'Completed',
      'partial-1': 'PartiallyFailed',
      'cut-1': 'Failed',
      'half-1': 'Failed',
      'running-1': 'InProgress',
    });
    expect(await state.getBackup('done-1')).toMatchObject({
      uid: 'uid-done-1',
      createdAt: 1_000,
      completedAt: 2_000,
      spec: { includedNamespaces: ['shop'] },
    });
    expect(await state.counters('done-1')).toEqual({ itemsBackedUp: 2 });
    expect(await state.getBackup('half-1')).toMatchObject({ failureReason: LOST_IN_FLIGHT_REASON });

    // Again: nothing changes.
    expect(await syncBackupCatalogue({ state, storage, logger: silent })).toMatchObject({ added: [], lost: [], removed: [] });

    // Deleted from storage by someone else: gone from the catalogue; the running backup is never touched.
    await fs.deletePrefix(backupLayout('done-1').dir);
    await fs.deletePrefix(backupLayout('half-1').dir);
    await fs.deletePrefix(backupLayout('running-1').dir);
    expect((await syncBackupCatalogue({ state, storage, logger: silent })).removed.sort()).toEqual(['done-1', 'half-1']);
    expect(await state.getBackup('done-1')).toBeUndefined();
    expect(await state.getBackup('running-1')).toMatchObject({ phase: 'InProgress' });
  });

  it('a pass while a backup is being deleted drops its record only once its PVBs and repository snapshots are gone', async () => {
    const state = new BackupState({ redis, prefix: uniquePrefix() });
    await finishedElsewhere('expiring', 'Completed');
    expect((await syncBackupCatalogue({ state, storage, logger: silent })).added).toContain('expiring');

    const sim = await startSimulator({
      fixture: { objects: [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'stowage' } }] },
      port: 0,
      extraManifests: [CRD_PATH],
      materializeVolumes: 'none',
    });
    try {
      const pvbs = createPvbClient(createKubeClients({ kubeconfigPath: sim.kubeconfigPath }), { namespace: 'stowage' });
      const labels = { [pvbLabels.backupName]: 'expiring' };
      const spec = { node: 'node-a', pod: { namespace: 'shop', name: 'db-0', uid: 'u' }, volume: 'data', backupStorageLocation: 'default' };
      await pvbs.createPvb({ metadata: { name: 'expiring-pvb', labels }, spec });
      // What the node agent wrote for it: a snapshot tagged with the backup's name.
      const repo = await Repository.init({ dir: join(dir, 'repository'), key: 'sync key', durable: false });
      const volume = join(dir, 'volume');
      await mkdir(volume, { recursive: true });
      await writeFile(join(volume, 'data.bin'), 'bytes');
      await repo.backup(volume, { tags: { backup: 'expiring' } });

      // A sync pass (another api replica's) between every two steps of the deletion: whenever it
      // has dropped the record (the user sees 404), the backup's PVBs and snapshots must be gone.
      const seenGone: Array<{ after: string; pvbs: number; snapshots: number }> = [];
      const syncPass = async (after: string) => {
        await syncBackupCatalogue({ state, storage, logger: silent });
        if (await state.getBackup('expiring')) return;
        seenGone.push({
          after,
          pvbs: (await pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=expiring` })).length,
          snapshots: (await repo.listSnapshots()).filter((s) => s.tags.backup === 'expiring').length,
        });
      };
      await deleteBackup(
        {
          state,
          storage: {
            getObject: (k) => fs.getObject(k),
            deletePrefix: async (p) => {
              const deleted = await fs.deletePrefix(p);
              await syncPass('storage');
              return deleted;
            },
          },
          pvbs: {
            listPvbs: (o) => pvbs.listPvbs(o),
            deletePvb: async (n) => {
              const deleted = await pvbs.deletePvb(n);
              await syncPass('pvb');
              return deleted;
            },
          },
          repository: {
            forget: async (tags) => {
              const forgotten = await repo.forget(tags);
              await syncPass('forget');
              return forgotten;
            },
          },
        },
        'expiring',
      );
      expect(await state.getBackup('expiring')).toBeUndefined();
      expect(seenGone.length).toBeGreaterThan(0);
      for (const gone of seenGone) expect(gone).toEqual({ after: gone.after, pvbs: 0, snapshots: 0 });
    } finally {
      await sim.close();
    }
  });
});
