import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KUBECTL_HINT, REPO_ROOT, runTool } from './run-tool.js';

// The CRD files as an operator applies them, through kubectl, to the simulator (a real HTTP API server).
const CRD_FILES = [
  'podvolumebackups',
  'podvolumerestores',
  'backups',
  'clusterbackups',
  'restores',
  'clusterrestores',
  'schedules',
  'clusterschedules',
].map((plural) => join(REPO_ROOT, `k8s/base/crd-${plural}.yaml`));

let sim: Simulator;
let dir: string;

function kubectl(...args: string[]) {
  return runTool('kubectl', ['--kubeconfig', sim.kubeconfigPath, ...args], KUBECTL_HINT);
}

async function applyManifest(name: string, manifest: object) {
  // JSON, not YAML: kubectl reads YAML 1.1, where an unquoted `yes` would become true
  const file = join(dir, `${name}.json`);
  await writeFile(file, JSON.stringify(manifest));
  // kubectl validates on the server (the CRD schema, fieldValidation=Strict), as against a cluster
  return kubectl('apply', '-f', file);
}

function pvb(name: string, spec: Record<string, unknown>) {
  return { apiVersion: 'stowage.dev/v1alpha1', kind: 'PodVolumeBackup', metadata: { name, namespace: 'stowage' }, spec };
}

const validSpec = {
  node: 'node-a',
  pod: { namespace: 'shop', name: 'postgres-0', uid: '3f1c2a9e-0000-4000-8000-000000000001' },
  volume: 'data',
  backupStorageLocation: 'default',
  tags: { backup: 'nightly' },
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stowage-crd-'));
  sim = await startSimulator({ materializeVolumes: 'none', kubeconfigPath: join(dir, 'kubeconfig') });
  for (const file of CRD_FILES) {
    const applied = await kubectl('apply', '-f', file);
    if (applied.exitCode !== 0) throw new Error(`kubectl apply of ${file} failed:\n${applied.stderr}`);
  }
});

afterAll(async () => {
  await sim?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('k8s/base/crd-podvolumebackups.yaml applied to the simulator', () => {
  it('accepts a valid PodVolumeBackup', async () => {
    const created = await applyManifest('valid', pvb('nightly-abc123', validSpec));
    expect(created.stderr).toBe('');
    expect(created.exitCode).toBe(0);
    const stored = await kubectl('get', 'pvb', '-n', 'stowage', 'nightly-abc123', '-o', 'json');
    expect(stored.exitCode).toBe(0);
    expect((JSON.parse(stored.stdout) as { spec: unknown }).spec).toEqual(validSpec);
  });

  it('rejects a PodVolumeBackup without a node and with a pod without uid, naming the fields', async () => {
    const { node: _node, ...withoutNode } = validSpec;
    const rejected = await applyManifest('invalid', pvb('broken-1', { ...withoutNode, pod: { namespace: 'shop', name: 'postgres-0' } }));
    expect(rejected.exitCode).not.toBe(0);
    expect(rejected.stderr).toMatch(/spec\.node/);
    expect(rejected.stderr).toMatch(/spec\.pod\.uid/);
    const lookup = await kubectl('get', 'pvb', '-n', 'stowage', 'broken-1');
    expect(lookup.exitCode).not.toBe(0);
  });

  it('rejects a wrong type and an empty string where the schema wants one', async () => {
    const wrongType = await applyManifest('wrong-type', pvb('broken-2', { ...validSpec, cancel: 'yes' }));
    expect(wrongType.exitCode).not.toBe(0);
    expect(wrongType.stderr).toMatch(/spec\.cancel/);
    const empty = await applyManifest('empty-volume', pvb('broken-3', { ...validSpec, volume: '' }));
    expect(empty.exitCode).not.toBe(0);
    expect(empty.stderr).toMatch(/spec\.volume/);
  });
});

function pvr(name: string, spec: Record<string, unknown>) {
  return { apiVersion: 'stowage.dev/v1alpha1', kind: 'PodVolumeRestore', metadata: { name, namespace: 'stowage' }, spec };
}

const validPvrSpec = {
  pod: { namespace: 'shop-restored', name: 'postgres-0', uid: '3f1c2a9e-0000-4000-8000-000000000002' },
  volume: 'data',
  snapshotID: '9a1b2c3d4e5f',
  backupStorageLocation: 'default',
  repoIdentifier: 'repository',
  sourceNamespace: 'shop',
  uploaderType: 'stowage',
};

describe('k8s/base/crd-podvolumerestores.yaml applied to the simulator', () => {
  it('accepts a valid PodVolumeRestore and lists it by its short name', async () => {
    const created = await applyManifest('valid-pvr', pvr('restore-1-abc123', validPvrSpec));
    expect(created.stderr).toBe('');
    expect(created.exitCode).toBe(0);
    const stored = await kubectl('get', 'pvr', '-n', 'stowage', 'restore-1-abc123', '-o', 'json');
    expect(stored.exitCode).toBe(0);
    expect((JSON.parse(stored.stdout) as { spec: unknown }).spec).toEqual(validPvrSpec);
  });

  it('rejects a PodVolumeRestore without a snapshot, with an unknown uploader and a pod without uid, naming the fields', async () => {
    const { snapshotID: _snapshot, ...withoutSnapshot } = validPvrSpec;
    const rejected = await applyManifest(
      'invalid-pvr',
      pvr('broken-pvr-1', { ...withoutSnapshot, uploaderType: 'kopia', pod: { namespace: 'shop', name: 'postgres-0' } }),
    );
    expect(rejected.exitCode).not.toBe(0);
    expect(rejected.stderr).toMatch(/spec\.snapshotID/);
    expect(rejected.stderr).toMatch(/spec\.uploaderType/);
    expect(rejected.stderr).toMatch(/spec\.pod\.uid/);
    const lookup = await kubectl('get', 'pvr', '-n', 'stowage', 'broken-pvr-1');
    expect(lookup.exitCode).not.toBe(0);
  });
});

describe('the stowage.dev/v1 CRDs (generated from core’s spec schemas) applied to the simulator', () => {
  const backup = (name: string, spec: Record<string, unknown>) => ({
    apiVersion: 'stowage.dev/v1',
    kind: 'Backup',
    metadata: { name, namespace: 'shop' },
    spec,
  });

  it('accepts a Backup as Velero users write one, label selector and hooks included', async () => {
    const spec = {
      labelSelector: { matchLabels: { app: 'postgres' } },
      defaultVolumesToFsBackup: true,
      ttl: '72h',
      hooks: { resources: [{ name: 'freeze', pre: [{ exec: { command: ['/bin/freeze'], onError: 'Fail', timeout: '30s' } }] }] },
      serviceAccountName: 'backup-operator',
    };
    const created = await applyManifest('valid-backup', backup('nightly', spec));
    expect(created.stderr).toBe('');
    expect(created.exitCode).toBe(0);
    const stored = await kubectl('get', 'backups.stowage.dev', '-n', 'shop', 'nightly', '-o', 'json');
    expect((JSON.parse(stored.stdout) as { spec: unknown }).spec).toEqual(spec);
  });

  it('rejects at apply what the schema can say, naming each field: types, enums, selector operators, typos', async () => {
    const rejected = await applyManifest(
      'invalid-backup',
      backup('broken', {
        ttl: 72,
        snapshotVolumes: 'yes',
        labelSelector: { matchExpressions: [{ key: 'app', operator: 'Equals' }] },
        hooks: { resources: [{ name: 'freeze', pre: [{ exec: { command: ['/bin/freeze'], onError: 'Sometimes' } }] }] },
      }),
    );
    expect(rejected.exitCode).not.toBe(0);
    expect(rejected.stderr).toMatch(/spec\.ttl/);
    expect(rejected.stderr).toMatch(/spec\.snapshotVolumes/);
    expect(rejected.stderr).toMatch(/spec\.labelSelector\.matchExpressions\[0\]\.operator/);
    expect(rejected.stderr).toMatch(/spec\.hooks\.resources\[0\]\.pre\[0\]\.exec\.onError/);
    expect((await kubectl('get', 'backups.stowage.dev', '-n', 'shop', 'broken')).exitCode).not.toBe(0);
    // an unknown field (a typo) is refused while decoding, as kube-apiserver's strict field validation does
    const typo = await applyManifest('typo-backup', backup('typo', { includedNamespace: ['shop'] }));
    expect(typo.exitCode).not.toBe(0);
    expect(typo.stderr).toMatch(/unknown field "spec\.includedNamespace"/);
  });

  it('refuses a ClusterSchedule without a schedule and a Restore without a backup name', async () => {
    const schedule = await applyManifest('invalid-schedule', {
      apiVersion: 'stowage.dev/v1',
      kind: 'ClusterSchedule',
      metadata: { name: 'nightly' },
      spec: { template: {} },
    });
    expect(schedule.exitCode).not.toBe(0);
    expect(schedule.stderr).toMatch(/spec\.schedule/);
    const restore = await applyManifest('invalid-restore', {
      apiVersion: 'stowage.dev/v1',
      kind: 'Restore',
      metadata: { name: 'r1', namespace: 'shop' },
      spec: { namespaceMapping: { shop: 'shop-2' } },
    });
    expect(restore.exitCode).not.toBe(0);
    expect(restore.stderr).toMatch(/spec\.backupName/);
  });
});
