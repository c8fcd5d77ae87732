import { execFile } from 'node:child_process';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKubeClients, createPvbClient, createPvrClient } from '@stowage/kube';
import { type Simulator, snapshotCrdsPath, startSimulator } from '@stowage/kube-sim';
import {
  BackupState,
  DEFAULT_PIPELINE_CONFIG,
  NodeAgentRegistry,
  RestoreState,
  type RunningWorkers,
  startWorkers,
  statePrefixFor,
} from '@stowage/pipeline';
import { loadConfig } from '@stowage/platform';
import { createWorkerConnection, QueueName, type RedisClient } from '@stowage/queue';
import { FileSystemStorage } from '@stowage/storage';
import { deployIdentities, uniquePrefix, useTestRedis } from '@stowage/testing';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiService, startApiService } from '../src/api-service.js';
import { apiCaller } from './api-call.js';

/*
 * Backups declared as Kubernetes resources: team A applies a Backup in its namespace with kubectl
 * (its own kubeconfig, a RoleBinding to `admin`), and the controller in the api — under the api's
 * deployed identity — runs it through the same submit and delete as REST.
 */

const STATIC_TOKEN = 'controller-static-token-0123456789';

const objects = [
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'a' } },
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'b' } },
  { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default', namespace: 'a' } },
  { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } } },
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'a' }, data: { team: 'a' } },
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'b' }, data: { team: 'b' } },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'alice-admin', namespace: 'a' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }],
  },
  // The account a's resources act as (spec.serviceAccountName defaults to it): admin of a, nothing in b.
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'default-admin', namespace: 'a' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
    subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: 'a' }],
  },
  // Namespace c: a pod whose annotation pre hook the simulator holds, so a backup of c runs as long as a test needs.
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'c' } },
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'c' }, data: { team: 'c' } },
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'app-0', namespace: 'c', annotations: { 'pre.hook.backup.velero.io/command': '["/bin/freeze"]' } },
    spec: { nodeName: 'node-a', containers: [{ name: 'main', image: 'busybox' }] },
    status: { phase: 'Running' },
  },
  // Namespace d: a CSI volume a backup keeps a snapshot of (the simulator cuts it), which deleting the backup deletes.
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'd' } },
  {
    apiVersion: 'storage.k8s.io/v1',
    kind: 'StorageClass',
    metadata: { name: 'standard' },
    provisioner: 'sim.csi.stowage.dev',
    reclaimPolicy: 'Delete',
  },
  {
    apiVersion: 'snapshot.storage.k8s.io/v1',
    kind: 'VolumeSnapshotClass',
    metadata: { name: 'sim-snap', labels: { 'velero.io/csi-volumesnapshot-class': 'true' } },
    driver: 'sim.csi.stowage.dev',
    deletionPolicy: 'Delete',
  },
  {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'data', namespace: 'd', annotations: { 'sim.stowage.dev/files': JSON.stringify([{ path: 'x', content: 'd\n' }]) } },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } }, storageClassName: 'standard' },
  },
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'db-0', namespace: 'd' },
    spec: {
      nodeName: 'node-a',
      containers: [{ name: 'main', image: 'busybox', volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }],
    },
    status: { phase: 'Running' },
  },
];

function kubectl(kubeconfig: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('kubectl', ['--kubeconfig', kubeconfig, ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('the controller: Backup and ClusterBackup resources through the REST submit path', () => {
  let redis: { url: string; stop: () => Promise<void> };
  let sim: Simulator;
  let api: ApiService;
  let workerConnection: RedisClient;
  let workers: RunningWorkers;
  let restoreWorkers: RunningWorkers;
  let storageDir: string;
  let dir: string;
  let alice: string;
  const admin = apiCaller(() => api.url, STATIC_TOKEN);

  const status = async (ns: string, name: string) => {
    const res = await kubectl(alice, ['get', 'backup', name, '-n', ns, '-o', 'json']);
    if (res.code !== 0) throw new Error(res.stderr);
    return (JSON.parse(res.stdout) as { status?: Record<string, unknown> & { phase?: string } }).status ?? {};
  };

  beforeAll(async () => {
    redis = await useTestRedis();
    sim = await startSimulator({ fixture: { objects }, port: 0, materializeVolumes: 'all', extraManifests: [snapshotCrdsPath] });
    const ids = await deployIdentities(sim);
    storageDir = await mkdtemp(join(tmpdir(), 'stowage-controller-'));
    dir = await mkdtemp(join(tmpdir(), 'stowage-controller-yaml-'));
    alice = sim.kubeconfigFor({ user: 'alice' }, join(dir, 'alice.kubeconfig')).path;
    const prefix = uniquePrefix();
    const loaded = loadConfig({
      REDIS_URL: redis.url,
      KUBECONFIG: ids.api,
      STOWAGE_STORAGE: storageDir,
      STOWAGE_API_TOKENS: STATIC_TOKEN,
      STOWAGE_CONTROLLER: 'enabled',
      STOWAGE_QUEUE_PREFIX: prefix,
      LOG_LEVEL: 'warn',
    });
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    api = await startApiService({
      config: loaded.config,
      logger: pino({ level: 'warn' }),
      port: 0,
      host: '127.0.0.1',
      controller: { intervalMs: 200 },
    });
    api.markReady();
    workerConnection = createWorkerConnection(redis.url);
    const statePrefix = statePrefixFor(prefix);
    const agents = new NodeAgentRegistry({ redis: workerConnection, prefix: statePrefix });
    await agents.registerNodeAgent('node-a', 600_000);
    // Backup workers as stowage-worker, restore items as stowage-restorer (the overlay's two Deployments).
    const workersAs = (kubeconfigPath: string, queues: QueueName[]) => {
      const kube = createKubeClients({ kubeconfigPath });
      return startWorkers({
        deps: {
          connection: workerConnection,
          queuePrefix: prefix,
          state: new BackupState({ redis: workerConnection, prefix: statePrefix }),
          agents,
          kube,
          pvbs: createPvbClient(kube, { namespace: 'stowage' }),
          restores: new RestoreState({ redis: workerConnection, prefix: statePrefix }),
          pvrs: createPvrClient(kube, { namespace: 'stowage' }),
          storage: new FileSystemStorage(storageDir),
          logger: pino({ level: 'warn' }),
          clock: { now: Date.now },
          config: DEFAULT_PIPELINE_CONFIG,
        },
        queues,
      });
    };
    workers = workersAs(ids.worker, [QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks, QueueName.repository]);
    restoreWorkers = workersAs(ids.restorer, [QueueName.restoreItems]);
  }, 120_000);

  afterAll(async () => {
    await workers?.close();
    await restoreWorkers?.close();
    await api?.stopHttp();
    await api?.stopWorkers();
    await api?.stopQueues();
    await api?.stopRedis();
    await workerConnection?.quit();
    await sim?.close();
    await redis?.stop();
    for (const d of [storageDir, dir]) if (d) await rm(d, { recursive: true, force: true });
  });

  it("team A's Backup applied with kubectl completes; kubectl shows its phase and progress; REST shows the same run", async () => {
    const file = join(dir, 'nightly.yaml');
    await writeFile(
      file,
      'apiVersion: stowage.dev/v1\nkind: Backup\nmetadata:\n  name: nightly\n  namespace: a\nspec:\n  includedResources: [configmaps, pods]\n',
    );
    const applied = await kubectl(alice, ['apply', '-f', file]);
    expect(applied.code, applied.stderr).toBe(0);
    const done = await waitFor('the Backup to end', async () => {
      const s = await status('a', 'nightly');
      return s.phase === 'Completed' || s.phase === 'Failed' || s.phase === 'PartiallyFailed' ? s : undefined;
    });
    expect(done).toMatchObject({ phase: 'Completed', errors: 0, progress: { summary: '1/1' } });
    const runName = done.runName as string;
    const rest = (await admin('GET', `/v1/backups/${runName}`)).json();
    expect(rest).toMatchObject({ name: runName, namespace: 'a', phase: 'Completed' });
    const resources = (await admin('GET', `/v1/backups/${runName}/resources`)).json().resources as Record<string, string[]>;
    expect(Object.values(resources).flat()).toEqual(['a/settings']);

    const table = await kubectl(alice, ['get', 'backups', '-n', 'a']);
    expect(table.code, table.stderr).toBe(0);
    const [header, row] = table.stdout.trim().split('\n');
    expect(header?.split(/\s+/)).toEqual(['NAME', 'PHASE', 'PROGRESS', 'ERRORS', 'WARNINGS', 'EXPIRES', 'AGE']);
    expect(row?.split(/\s+/).slice(0, 5)).toEqual(['nightly', 'Completed', '1/1', '0', '0']);

    const events = await kubectl(alice, ['get', 'events', '-n', 'a', '--field-selector', 'involvedObject.name=nightly', '-o', 'json']);
    const reasons = (JSON.parse(events.stdout) as { items: Array<{ reason: string }> }).items.map((e) => e.reason);
    expect(reasons).toContain('Completed');
  });

  it("team A's Backup that selects b ends FailedValidation naming the field, and backs nothing up", async () => {
    const file = join(dir, 'wide.yaml');
    await writeFile(
      file,
      'apiVersion: stowage.dev/v1\nkind: Backup\nmetadata:\n  name: wide\n  namespace: a\nspec:\n  includedNamespaces: [b]\n  includeClusterResources: true\n',
    );
    expect((await kubectl(alice, ['apply', '-f', file])).code).toBe(0);
    const s = await waitFor('the Backup to be judged', async () => {
      const st = await status('a', 'wide');
      return st.phase ? st : undefined;
    });
    expect(s.phase).toBe('FailedValidation');
    const errors = s.validationErrors as string[];
    expect(errors.map((e) => e.split(':')[0])).toEqual(['spec.includedNamespaces[0]', 'spec.includeClusterResources']);
    const accepted = (s.conditions as Array<{ type: string; status: string; reason: string; message: string }>).find(
      (c) => c.type === 'Accepted',
    );
    expect(accepted).toMatchObject({ status: 'False', reason: 'InvalidSpec' });
    expect(accepted?.message).toContain('outside this resource\'s namespace "a"');
    expect((await admin('GET', `/v1/backups/${s.runName as string}`)).status).toBe(404);
  });

  it('kubectl delete backup removes its data through the finalizer', async () => {
    const s = await status('a', 'nightly');
    const runName = s.runName as string;
    await stat(join(storageDir, 'backups', runName));
    const deleted = await kubectl(alice, ['delete', 'backup', 'nightly', '-n', 'a', '--wait=true', '--timeout=60s']);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect((await admin('GET', `/v1/backups/${runName}`)).status).toBe(404);
    await expect(stat(join(storageDir, 'backups', runName))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  /** A resource's status, read with the admin's kubectl (`-n ns` for a namespaced kind). */
  const statusOf = async (kind: string, name: string, ns?: string) => {
    const res = await kubectl(sim.kubeconfigPath, ['get', kind, name, ...(ns ? ['-n', ns] : []), '-o', 'json']);
    if (res.code !== 0) throw new Error(res.stderr);
    return (JSON.parse(res.stdout) as { status?: Record<string, unknown> & { phase?: string } }).status ?? {};
  };
  const ended = (s: { phase?: string }) =>
    ['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled'].includes(s.phase ?? '');
  const apply = async (name: string, yaml: string, kubeconfig = sim.kubeconfigPath) => {
    const file = join(dir, `${name}.yaml`);
    await writeFile(file, yaml);
    return kubectl(kubeconfig, ['apply', '-f', file]);
  };
  type Condition = { type: string; status: string; reason: string; message: string };

  it("a Restore in a restores a's Backup by its resource name; mapped into b (where it may not write) it is refused", async () => {
    const applied = await apply(
      'weekly',
      'apiVersion: stowage.dev/v1\nkind: Backup\nmetadata:\n  name: weekly\n  namespace: a\nspec:\n  includedResources: [configmaps]\n',
      alice,
    );
    expect(applied.code, applied.stderr).toBe(0);
    const backup = await waitFor('the Backup to end', async () => {
      const s = await statusOf('backup', 'weekly', 'a');
      return ended(s) ? s : undefined;
    });
    expect(backup.phase).toBe('Completed');
    expect((await kubectl(alice, ['delete', 'configmap', 'settings', '-n', 'a'])).code).toBe(0);

    const restore = await apply(
      'back',
      'apiVersion: stowage.dev/v1\nkind: Restore\nmetadata:\n  name: back\n  namespace: a\nspec:\n  backupName: weekly\n',
      alice,
    );
    expect(restore.code, restore.stderr).toBe(0);
    const done = await waitFor('the Restore to end', async () => {
      const s = await statusOf('restore', 'back', 'a');
      return ended(s) ? s : undefined;
    });
    expect(done).toMatchObject({ phase: 'Completed', backupRunName: backup.runName, errors: 0 });
    const cm = await kubectl(alice, ['get', 'configmap', 'settings', '-n', 'a', '-o', 'json']);
    expect(cm.code, cm.stderr).toBe(0);
    expect((JSON.parse(cm.stdout) as { data: Record<string, string> }).data).toEqual({ team: 'a' });
    // REST shows the same run, as namespace a's restore.
    expect((await admin('GET', `/v1/restores/${done.runName as string}`)).json()).toMatchObject({ namespace: 'a', phase: 'Completed' });

    const mapped = await apply(
      'into-b',
      'apiVersion: stowage.dev/v1\nkind: Restore\nmetadata:\n  name: into-b\n  namespace: a\nspec:\n  backupName: weekly\n  namespaceMapping: {a: b}\n',
      alice,
    );
    expect(mapped.code, mapped.stderr).toBe(0);
    const refused = await waitFor('the mapped Restore to be judged', async () => {
      const s = await statusOf('restore', 'into-b', 'a');
      return s.phase ? s : undefined;
    });
    expect(refused.phase).toBe('FailedValidation');
    const accepted = (refused.conditions as Condition[]).find((c) => c.type === 'Accepted');
    expect(accepted).toMatchObject({ status: 'False', reason: 'Forbidden' });
    expect(accepted?.message).toContain('system:serviceaccount:a:default');
    expect(accepted?.message).toContain('"configmaps"');
    expect(accepted?.message).toContain('namespace "b"');
    expect((await admin('GET', `/v1/restores/${refused.runName as string}`)).status).toBe(404);
    expect((await kubectl(sim.kubeconfigPath, ['get', 'configmap', 'settings', '-n', 'b', '-o', 'json'])).stdout).toContain('"team": "b"');
  });

  it('a ClusterSchedule applied from a YAML file runs on its tick; its backup is a ClusterBackup too; deleting it stops it', async () => {
    // skipImmediately: the first backup comes from a tick of the schedule, not from its creation.
    const applied = await apply(
      'every-2s',
      [
        'apiVersion: stowage.dev/v1',
        'kind: ClusterSchedule',
        'metadata:',
        '  name: every-2s',
        'spec:',
        "  schedule: '@every 2s'",
        '  skipImmediately: true',
        '  template:',
        '    includedNamespaces: [b]',
        '    includedResources: [configmaps]',
        '',
      ].join('\n'),
    );
    expect(applied.code, applied.stderr).toBe(0);
    const scheduled = await waitFor('a tick to start a backup', async () => {
      const s = await statusOf('clusterschedule', 'every-2s');
      return s.lastBackup ? s : undefined;
    });
    expect(scheduled).toMatchObject({ phase: 'Enabled', paused: false });
    const conditions = scheduled.conditions as Condition[];
    expect(conditions.find((c) => c.type === 'Accepted')).toMatchObject({ status: 'True' });
    const runName = scheduled.runName as string;
    expect((await admin('GET', `/v1/schedules/${runName}`)).json()).toMatchObject({ name: runName, status: { phase: 'Enabled' } });
    // The tick's backup shows as a ClusterBackup (labelled with its schedule) and completes.
    const first = scheduled.lastBackup as string;
    const backup = await waitFor('the scheduled backup to end as a ClusterBackup', async () => {
      const s = await statusOf('clusterbackup', first).catch(() => undefined);
      return s && ended(s) ? s : undefined;
    });
    expect(backup).toMatchObject({ phase: 'Completed', runName: first });
    const labels = await kubectl(sim.kubeconfigPath, ['get', 'clusterbackups', '-l', `stowage.dev/schedule-name=${runName}`, '-o', 'name']);
    expect(labels.stdout).toContain(`clusterbackup.stowage.dev/${first}`);

    const deleted = await kubectl(sim.kubeconfigPath, ['delete', 'clusterschedule', 'every-2s', '--wait=true', '--timeout=60s']);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect((await admin('GET', `/v1/schedules/${runName}`)).status).toBe(404);
    // Its backups stay (as in Velero).
    expect((await admin('GET', `/v1/backups/${first}`)).status).toBe(200);
  });

  it("team A's Schedule backs up a only: its ticks' backups are a's Backups; one reaching wider is refused", async () => {
    const applied = await apply(
      'team-a',
      [
        'apiVersion: stowage.dev/v1',
        'kind: Schedule',
        'metadata:',
        '  name: team-a',
        '  namespace: a',
        'spec:',
        "  schedule: '@every 2s'",
        '  skipImmediately: true',
        '  template:',
        "    includedNamespaces: ['*']",
        '    includedResources: [configmaps]',
        '',
      ].join('\n'),
      alice,
    );
    expect(applied.code, applied.stderr).toBe(0);
    const scheduled = await waitFor('a tick to start a backup', async () => {
      const s = await statusOf('schedule', 'team-a', 'a');
      return s.lastBackup ? s : undefined;
    });
    expect(scheduled).toMatchObject({ phase: 'Enabled', requestedBy: 'ServiceAccount "a/default"' });
    const first = scheduled.lastBackup as string;
    const backup = await waitFor("the tick's backup to end as a Backup of a", async () => {
      const s = await statusOf('backup', first, 'a').catch(() => undefined);
      return s && ended(s) ? s : undefined;
    });
    expect(backup.phase).toBe('Completed');
    expect((await admin('GET', `/v1/backups/${first}`)).json()).toMatchObject({ namespace: 'a', phase: 'Completed' });
    const resources = (await admin('GET', `/v1/backups/${first}/resources`)).json().resources as Record<string, string[]>;
    const items = Object.values(resources).flat();
    expect(items.length).toBeGreaterThan(0);
    for (const item of items) expect(item.startsWith('a/')).toBe(true);
    const deleted = await kubectl(alice, ['delete', 'schedule', 'team-a', '-n', 'a', '--wait=true', '--timeout=60s']);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect((await admin('GET', `/v1/schedules/${scheduled.runName as string}`)).status).toBe(404);

    const wide = await apply(
      'team-a-wide',
      [
        'apiVersion: stowage.dev/v1',
        'kind: Schedule',
        'metadata:',
        '  name: team-a-wide',
        '  namespace: a',
        'spec:',
        "  schedule: '@every 1h'",
        '  template:',
        '    includedNamespaces: [b]',
        '',
      ].join('\n'),
      alice,
    );
    expect(wide.code, wide.stderr).toBe(0);
    const refused = await waitFor('the wide Schedule to be judged', async () => {
      const s = await statusOf('schedule', 'team-a-wide', 'a');
      return s.phase ? s : undefined;
    });
    expect(refused.phase).toBe('FailedValidation');
    expect((refused.validationErrors as string[]).map((e) => e.split(':')[0])).toEqual(['spec.template.includedNamespaces[0]']);
    expect((await admin('GET', `/v1/schedules/${refused.runName as string}`)).status).toBe(404);
  });

  it('a backup submitted through REST is a ClusterBackup too, and kubectl and REST list the same backups', async () => {
    const posted = await admin('POST', '/v1/backups', {
      name: 'from-rest',
      spec: { includedNamespaces: ['b'], includedResources: ['configmaps'] },
    });
    expect(posted.status, posted.text).toBe(201);
    const mirrored = await waitFor('the ClusterBackup of the REST backup to end', async () => {
      const s = await statusOf('clusterbackup', 'from-rest').catch(() => undefined);
      return s && ended(s) ? s : undefined;
    });
    expect(mirrored).toMatchObject({ phase: 'Completed', runName: 'from-rest', progress: { summary: '1/1' } });
    const spec = JSON.parse((await kubectl(sim.kubeconfigPath, ['get', 'clusterbackup', 'from-rest', '-o', 'json'])).stdout).spec;
    expect(spec).toMatchObject({ includedNamespaces: ['b'], includedResources: ['configmaps'] });

    // The same list through both doors: every backup REST lists is a resource, and the other way round.
    const runsOf = async () => {
      const out = await kubectl(sim.kubeconfigPath, ['get', 'clusterbackups,backups', '-A', '-o', 'json']);
      const items = (JSON.parse(out.stdout) as { items: Array<{ status?: { runName?: string; phase?: string } }> }).items;
      return items
        .filter((i) => i.status?.phase !== 'FailedValidation')
        .map((i) => i.status?.runName ?? '(none)')
        .sort();
    };
    const restNames = async () =>
      ((await admin('GET', '/v1/backups?limit=500')).json().items as Array<{ name: string }>).map((b) => b.name).sort();
    const same = await waitFor('kubectl and REST to list the same backups', async () => {
      const [k, r] = await Promise.all([runsOf(), restNames()]);
      return JSON.stringify(k) === JSON.stringify(r) ? r : undefined;
    });
    expect(same).toContain('from-rest');
    expect(same.length).toBeGreaterThanOrEqual(3);

    // Deleted through REST, the resource goes too.
    expect((await admin('DELETE', '/v1/backups/from-rest')).status).toBeLessThan(300);
    await waitFor('the ClusterBackup to go', async () =>
      (await kubectl(sim.kubeconfigPath, ['get', 'clusterbackup', 'from-rest'])).code !== 0 ? true : undefined,
    );
  });

  it('kubectl get backups -A shows phase and progress while a backup runs; kubectl delete then removes its data', async () => {
    sim.setExecBehaviour('c', 'app-0', { '*': { rules: [{ command: ['/bin/freeze'], hold: true }] } });
    const applied = await apply('held', 'apiVersion: stowage.dev/v1\nkind: Backup\nmetadata:\n  name: held\n  namespace: c\nspec: {}\n');
    expect(applied.code, applied.stderr).toBe(0);
    await waitFor('the hook to be held', async () => (sim.execLog({ namespace: 'c', pod: 'app-0' }).length > 0 ? true : undefined));
    const row = await waitFor('kubectl to show the running backup', async () => {
      const table = await kubectl(sim.kubeconfigPath, ['get', 'backups', '-A']);
      const lines = table.stdout.trim().split('\n');
      const header = lines[0]?.split(/\s+/);
      const cells = lines.find((l) => l.startsWith('c '))?.split(/\s+/);
      return header && cells && cells[2] === 'InProgress' ? { header, cells } : undefined;
    });
    expect(row.header).toEqual(['NAMESPACE', 'NAME', 'PHASE', 'PROGRESS', 'ERRORS', 'WARNINGS', 'EXPIRES', 'AGE']);
    expect(row.cells.slice(0, 3)).toEqual(['c', 'held', 'InProgress']);
    expect(row.cells[3]).toMatch(/^\d+\/\d+$/);
    // The backup still runs (its hook is held) while kubectl showed it.
    const running = await statusOf('backup', 'held', 'c');
    expect(running.phase).toBe('InProgress');

    expect(sim.releaseExecs('c', 'app-0')).toBeGreaterThan(0);
    const done = await waitFor('the Backup to end', async () => {
      const s = await statusOf('backup', 'held', 'c');
      return ended(s) ? s : undefined;
    });
    expect(done.phase).toBe('Completed');
    const runName = done.runName as string;
    await stat(join(storageDir, 'backups', runName));
    const deleted = await kubectl(sim.kubeconfigPath, ['delete', 'backup', 'held', '-n', 'c', '--wait=true', '--timeout=60s']);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect((await admin('GET', `/v1/backups/${runName}`)).status).toBe(404);
    await expect(stat(join(storageDir, 'backups', runName))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('an invalid spec gets a condition naming every bad field; the controller goes on with the rest', async () => {
    // What the CRD's schema can say is refused at apply, naming the field.
    const typed = await apply(
      'typed',
      'apiVersion: stowage.dev/v1\nkind: ClusterBackup\nmetadata:\n  name: typed\nspec:\n  includedNamespaces: b\n',
    );
    expect(typed.code).not.toBe(0);
    expect(typed.stderr).toContain('spec.includedNamespaces');
    // What only core can say ends in the status, every field named.
    const applied = await apply(
      'invalid',
      [
        'apiVersion: stowage.dev/v1',
        'kind: ClusterBackup',
        'metadata:',
        '  name: invalid',
        'spec:',
        '  ttl: forever',
        '  includedNamespaces: [Not_A_Namespace]',
        '  fsBackupTimeout: soon',
        '',
      ].join('\n'),
    );
    expect(applied.code, applied.stderr).toBe(0);
    const judged = await waitFor('the ClusterBackup to be judged', async () => {
      const s = await statusOf('clusterbackup', 'invalid');
      return s.phase ? s : undefined;
    });
    expect(judged.phase).toBe('FailedValidation');
    const fields = [...new Set((judged.validationErrors as string[]).map((e) => e.split(':')[0]))].sort();
    expect(fields).toEqual(['spec.fsBackupTimeout', 'spec.includedNamespaces[0]', 'spec.ttl']);
    const accepted = (judged.conditions as Condition[]).find((c) => c.type === 'Accepted');
    expect(accepted).toMatchObject({ status: 'False', reason: 'InvalidSpec' });
    for (const field of fields) expect(accepted?.message).toContain(field);
    const events = await kubectl(sim.kubeconfigPath, [
      'get',
      'events',
      '-n',
      'stowage',
      '--field-selector',
      'involvedObject.name=invalid',
      '-o',
      'json',
    ]);
    expect((JSON.parse(events.stdout) as { items: Array<{ type: string; reason: string }> }).items).toContainEqual(
      expect.objectContaining({ type: 'Warning', reason: 'FailedValidation' }),
    );
    // The same for a schedule and a restore.
    await apply(
      'bad-schedule',
      "apiVersion: stowage.dev/v1\nkind: ClusterSchedule\nmetadata:\n  name: bad-schedule\nspec:\n  schedule: '99 * * * *'\n  template:\n    ttl: forever\n",
    );
    await apply(
      'bad-restore',
      'apiVersion: stowage.dev/v1\nkind: ClusterRestore\nmetadata:\n  name: bad-restore\nspec:\n  backupName: no-such-backup\n',
    );
    const schedule = await waitFor('the ClusterSchedule to be judged', async () => {
      const s = await statusOf('clusterschedule', 'bad-schedule');
      return s.phase ? s : undefined;
    });
    expect(schedule.phase).toBe('FailedValidation');
    expect((schedule.validationErrors as string[]).map((e) => e.split(':')[0]).sort()).toEqual(['spec.schedule', 'spec.template.ttl']);
    const restore = await waitFor('the ClusterRestore to be judged', async () => {
      const s = await statusOf('clusterrestore', 'bad-restore');
      return s.phase ? s : undefined;
    });
    expect(restore.phase).toBe('FailedValidation');
    expect(restore.validationErrors).toEqual(['spec.backupName: backup "no-such-backup" does not exist']);

    // The controller goes on: a valid resource applied after them completes.
    await apply(
      'after',
      'apiVersion: stowage.dev/v1\nkind: ClusterBackup\nmetadata:\n  name: after\nspec:\n  includedNamespaces: [b]\n  includedResources: [configmaps]\n',
    );
    const after = await waitFor('the next ClusterBackup to end', async () => {
      const s = await statusOf('clusterbackup', 'after');
      return ended(s) ? s : undefined;
    });
    expect(after.phase).toBe('Completed');
  });

  it('kubectl delete clusterbackup deletes the CSI snapshots the backup kept, with its data', async () => {
    const snapshots = async () => {
      const out = await kubectl(sim.kubeconfigPath, ['get', 'volumesnapshots', '-n', 'd', '-o', 'json']);
      if (out.code !== 0) throw new Error(out.stderr);
      return (JSON.parse(out.stdout) as { items: Array<{ metadata: { name: string } }> }).items.map((i) => i.metadata.name);
    };
    const applied = await apply(
      'snap',
      [
        'apiVersion: stowage.dev/v1',
        'kind: ClusterBackup',
        'metadata:',
        '  name: snap',
        'spec:',
        '  includedNamespaces: [d]',
        '  resourcePolicy:',
        '    volumePolicies:',
        '      - conditions: {storageClass: [standard]}',
        '        action: {type: snapshot}',
        '',
      ].join('\n'),
    );
    expect(applied.code, applied.stderr).toBe(0);
    const done = await waitFor('the ClusterBackup to end', async () => {
      const s = await statusOf('clusterbackup', 'snap');
      return ended(s) ? s : undefined;
    });
    expect(done.phase).toBe('Completed');
    expect(await snapshots()).toHaveLength(1);
    const runName = done.runName as string;
    await stat(join(storageDir, 'backups', runName));

    const deleted = await kubectl(sim.kubeconfigPath, ['delete', 'clusterbackup', 'snap', '--wait=true', '--timeout=60s']);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect((await admin('GET', `/v1/backups/${runName}`)).status).toBe(404);
    await expect(stat(join(storageDir, 'backups', runName))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await snapshots()).toEqual([]);
  });

  it('a ClusterBackup whose ttl lapses is deleted with its run, and never submitted again', async () => {
    const applied = await apply(
      'short-lived',
      'apiVersion: stowage.dev/v1\nkind: ClusterBackup\nmetadata:\n  name: short-lived\nspec:\n  ttl: 3s\n  includedNamespaces: [b]\n  includedResources: [configmaps]\n',
    );
    expect(applied.code, applied.stderr).toBe(0);
    const done = await waitFor('the ClusterBackup to end', async () => {
      const s = await statusOf('clusterbackup', 'short-lived').catch(() => undefined);
      return s && ended(s) ? s : undefined;
    });
    expect(done.phase).toBe('Completed');
    const runName = done.runName as string;
    // The TTL deletes the run (as for a REST backup); the resource goes with it rather than running again.
    await waitFor('the ClusterBackup to go with its run', async () =>
      (await kubectl(sim.kubeconfigPath, ['get', 'clusterbackup', 'short-lived'])).code !== 0 ? true : undefined,
    );
    expect((await admin('GET', `/v1/backups/${runName}`)).status).toBe(404);
    await expect(stat(join(storageDir, 'backups', runName))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
