/*
 * `stowage install` as an operator runs it: the bundled CLI applies the deployment to the
 * simulator (authentication, RBAC and Pod Security enforced) with S3 storage on a private S3
 * server and an external Redis; then each installed workload runs as an OS process with the
 * environment its stored pod template gives and the token of its ServiceAccount
 * (support/installed-workloads.ts), so the configuration and the rights `install` applied are
 * what is exercised. A backup and a restore into another namespace go through the installed API
 * with the installed token; `stowage uninstall` then removes the deployment: the objects and the
 * identities are gone (their tokens refused), the bucket and the repository key stay. A reinstall
 * on the same bucket with an emptied Redis lists the backup again (backup sync) and restores its
 * volume with the kept key.
 */
import { execFile } from 'node:child_process';
import { access, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { type Simulator, startSimulator } from '../packages/kube-sim/src/index.js';
import {
  type DescribedEntry,
  describeTree,
  REPO_ROOT,
  type RedisServer,
  S3_SERVER_ACCESS_KEY_ID,
  S3_SERVER_SECRET_ACCESS_KEY,
  type S3Server,
  startRedisServer,
  startS3Server,
} from '../packages/testing/src/index.js';
import { configMap, namespace, node, pod } from './reliability/support/fixtures.js';
import { type ServiceProcess, waitFor } from './reliability/support/stack.js';
import { installedWorkload, runWorkload } from './support/installed-workloads.js';

const run = promisify(execFile);
const CLI = join(REPO_ROOT, 'packages/cli/dist/stowage.mjs');
const NODE = 'node-a';
const fixture = {
  objects: [
    namespace('shop'),
    node(NODE),
    pod({ name: 'db-0', node: NODE, volumes: [{ name: 'data', mib: 1 }] }),
    configMap('settings', 'shop'),
  ],
};

let sim: Simulator;
let redis: RedisServer;
let s3: S3Server;
let work: string;
const processes: ServiceProcess[] = [];
/** Every process started, kept past its stop: a failure prints what each of them wrote. */
const startedAll: ServiceProcess[] = [];

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The installed CLI (the bundle), with only `env` added to a clean environment. */
async function stowage(args: string[], env: Record<string, string>): Promise<CliRun> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? '', HOME: work, TZ: 'UTC', ...env },
      timeout: 300_000,
      maxBuffer: 64 << 20,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function kubectl(kubeconfig: string, ...args: string[]): Promise<CliRun> {
  try {
    const { stdout, stderr } = await run('kubectl', ['--kubeconfig', kubeconfig, ...args], { maxBuffer: 64 << 20 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** Starts every installed workload (one process each, the node agent on NODE); the api's first. */
async function startInstalled(): Promise<{ process: ServiceProcess; env: Record<string, string> }> {
  const workloads = await Promise.all([
    installedWorkload(sim, 'Deployment', 'stowage', 'stowage-api'),
    installedWorkload(sim, 'Deployment', 'stowage', 'stowage-worker'),
    installedWorkload(sim, 'Deployment', 'stowage', 'stowage-restorer'),
    installedWorkload(sim, 'DaemonSet', 'stowage', 'stowage-node-agent'),
  ]);
  const started: Array<{ process: ServiceProcess; env: Record<string, string> }> = [];
  for (const workload of workloads) {
    const one = await runWorkload(sim, workload, NODE, { LOG_LEVEL: 'info' });
    processes.push(one.process);
    startedAll.push(one.process);
    started.push(one);
  }
  return started[0] as { process: ServiceProcess; env: Record<string, string> };
}

/** What an operator uses: the api's address and the token install made, read as install says. */
async function operator(api: ServiceProcess): Promise<Record<string, string>> {
  const token = await kubectl(sim.kubeconfigPath, '-n', 'stowage', 'get', 'secret', 'stowage-api-tokens', '-o', 'jsonpath={.data.tokens}');
  return { STOWAGE_API_URL: `http://127.0.0.1:${api.port}`, STOWAGE_API_TOKEN: Buffer.from(token.stdout, 'base64').toString() };
}

const withoutMarkers = (tree: Record<string, DescribedEntry>) =>
  Object.fromEntries(Object.entries(tree).filter(([p]) => p !== '.stowage' && !p.startsWith('.stowage/')));

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'stowage-install-e2e-'));
  [sim, redis, s3] = await Promise.all([
    startSimulator({ fixture, nodeAgents: [NODE] }),
    startRedisServer(),
    startS3Server({ bucket: 'stowage-e2e' }),
    run(process.execPath, [join(REPO_ROOT, 'packages/cli/build.mjs')]),
  ]);
}, 180_000);

afterAll(async () => {
  await Promise.allSettled(processes.map((p) => p.killHard()));
  await sim?.close();
  await redis?.stop();
  await s3?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('stowage install, a backup and a restore through it, stowage uninstall', { timeout: 600_000 }, () => {
  it('installs with S3 storage and an external Redis; backs up and restores under the installed identities; uninstalls and keeps the bucket; a reinstall restores from it', async () => {
    // A failure says what the volume operations, the restored pods and every installed process
    // (the ones uninstall stopped too) did: their info logs are kept in memory, printed only here.
    onTestFailed(async () => {
      const ops = await kubectl(sim.kubeconfigPath, 'get', 'podvolumerestores,podvolumebackups', '-A', '-o', 'yaml');
      console.error(`---- PodVolumeRestores and PodVolumeBackups ----\n${ops.stdout}${ops.stderr}`);
      const pods = await kubectl(sim.kubeconfigPath, 'get', 'pods', '-A', '-o', 'yaml');
      console.error(`---- pods ----\n${pods.stdout}${pods.stderr}`);
      for (const p of startedAll) {
        const exit = p.child.exitCode ?? p.child.signalCode ?? 'running';
        console.error(`---- ${p.name} (pid ${p.pid}, ${exit}) ----\n${p.output.join('').slice(-40_000)}`);
      }
    });
    const admin = { KUBECONFIG: sim.kubeconfigPath };
    const credentials = join(work, 'credentials');
    await writeFile(
      credentials,
      `[default]\naws_access_key_id = ${S3_SERVER_ACCESS_KEY_ID}\naws_secret_access_key = ${S3_SERVER_SECRET_ACCESS_KEY}\n`,
    );

    // The same flags install and reinstall.
    const install = [
      'install',
      '--storage',
      's3://stowage-e2e/cluster-a',
      '--s3-endpoint',
      s3.endpoint,
      '--secret-file',
      credentials,
      '--redis-url',
      redis.url,
    ];
    const installed = await stowage(install, admin);
    expect(installed.code, installed.stderr).toBe(0);
    expect(installed.stdout).toMatch(/^deployment\.apps\/stowage-restorer created$/m);
    expect(installed.stdout).not.toMatch(/^(statefulset.apps|service)\/stowage-redis /m);

    // ---- every workload as its pod template says, under its own ServiceAccount ----
    let api = await startInstalled();
    // What the processes were given came from the installed objects.
    expect(api.env).toMatchObject({
      STOWAGE_STORAGE: 's3://stowage-e2e/cluster-a',
      STOWAGE_S3_ENDPOINT: s3.endpoint,
      REDIS_URL: redis.url,
    });
    expect(api.env.STOWAGE_API_TOKENS).toMatch(/^[0-9a-f]{64}$/);

    // The operator reads the token as install says, and drives Stowage with the same CLI.
    let user = await operator(api.process);

    // The base grants no Secret reading (k8s/components/backup-secrets is opt-in, docs/deploy.md):
    // a backup that asked for Secrets would end PartiallyFailed with a warning naming them.
    const original = withoutMarkers(await describeTree(sim.podVolumes('shop', 'db-0')[0]?.path as string));
    expect(Object.keys(original).length).toBeGreaterThan(1);
    const backup = await stowage(
      [
        'backup',
        'create',
        'x',
        '--include-namespaces',
        'shop',
        '--exclude-resources',
        'secrets',
        '--default-volumes-to-fs-backup',
        '--wait',
      ],
      user,
    );
    expect(backup.code, backup.stdout + backup.stderr).toBe(0);
    expect(backup.stdout).toMatch(/^Phase: +Completed$/m);
    expect(backup.stdout).toMatch(/^Completed: blocks \d+\/\d+, PVBs 1\/1 /m);

    const restore = await stowage(
      ['restore', 'create', 'r', '--from-backup', 'x', '--namespace-mappings', 'shop:shop-copy', '--wait', '-o', 'json'],
      user,
    );
    expect(restore.code, restore.stdout + restore.stderr).toBe(0);
    expect(JSON.parse(restore.stdout)).toMatchObject({ phase: 'Completed', podVolumeRestores: { total: 1 } });
    const copy = await kubectl(sim.kubeconfigPath, '-n', 'shop-copy', 'get', 'pods,configmaps', '-o', 'name');
    expect(copy.stdout.split('\n')).toEqual(expect.arrayContaining(['pod/db-0', 'configmap/settings']));
    const restoredVolume = sim.podVolumes('shop-copy', 'db-0').find((v) => v.volume === 'data');
    expect(withoutMarkers(await describeTree(restoredVolume?.path as string))).toEqual(original);

    // ---- the installed api takes users' Kubernetes tokens and runs the resource controller ----
    expect(api.env).toMatchObject({ STOWAGE_KUBE_AUTH: 'enabled', STOWAGE_CONTROLLER: 'enabled' });
    const bound = await kubectl(
      sim.kubeconfigPath,
      '-n',
      'shop',
      'create',
      'rolebinding',
      'alice-admin',
      '--clusterrole=admin',
      '--user=alice',
    );
    expect(bound.code, bound.stderr).toBe(0);
    const alice = sim.kubeconfigFor({ user: 'alice' });
    const asAlice = (path: string) =>
      fetch(`${user.STOWAGE_API_URL}${path}`, { headers: { authorization: `Bearer ${alice.token}` } }).then(async (r) => ({
        status: r.status,
        body: (await r.json()) as { items?: unknown[]; error?: { message: string } },
      }));
    // x is a cluster-wide backup: alice, admin of shop only, lists nothing and may not read it.
    expect(await asAlice('/v1/backups')).toEqual({ status: 200, body: { items: [] } });
    const theirs = await asAlice('/v1/backups/x');
    expect([theirs.status, theirs.body.error?.message]).toEqual([
      403,
      'User "alice" cannot get resource "clusterbackups" in API group "stowage.dev" at the cluster scope',
    ]);
    // alice's Backup, applied with kubectl as herself, is run by the installed controller.
    const manifest = join(work, 'alice-backup.yaml');
    await writeFile(
      manifest,
      'apiVersion: stowage.dev/v1\nkind: Backup\nmetadata:\n  name: team\n  namespace: shop\nspec:\n  includedResources: [configmaps]\n',
    );
    const applied = await kubectl(alice.path, 'apply', '-f', manifest);
    expect(applied.code, applied.stderr).toBe(0);
    const phase = await waitFor(
      "alice's Backup to complete (the controller holds its Lease)",
      async () => {
        const got = await kubectl(alice.path, '-n', 'shop', 'get', 'backup', 'team', '-o', 'jsonpath={.status.phase}');
        return got.stdout === 'Completed' || got.stdout.startsWith('Failed') ? got.stdout : undefined;
      },
      120_000,
      1_000,
    );
    expect(phase).toBe('Completed');
    const holder = await kubectl(
      sim.kubeconfigPath,
      '-n',
      'stowage',
      'get',
      'lease',
      'stowage-controller',
      '-o',
      'jsonpath={.spec.holderIdentity}',
    );
    expect(holder.stdout).not.toBe('');
    // Deleted with kubectl: the controller deletes the run first (its finalizer), then the resource goes.
    const deleted = await kubectl(alice.path, '-n', 'shop', 'delete', 'backup', 'team', '--wait=false');
    expect(deleted.code, deleted.stderr).toBe(0);
    await waitFor(
      "alice's Backup gone",
      async () => ((await kubectl(alice.path, '-n', 'shop', 'get', 'backups', '-o', 'name')).stdout.trim() === '' ? true : undefined),
      60_000,
      1_000,
    );

    // ---- uninstall: the deployment and its identities go, the bucket and the key stay ----
    const apiKubeconfig = sim.kubeconfigFor({ serviceAccount: { namespace: 'stowage', name: 'stowage-api' } }).path;
    expect((await kubectl(apiKubeconfig, 'auth', 'can-i', 'list', 'pods', '-n', 'shop')).stdout.trim()).toBe('yes');
    const removed = await stowage(['uninstall', '--confirm'], admin);
    expect(removed.code, removed.stderr).toBe(0);
    const refs = installed.stdout
      .split('\n')
      .map((l) => /^(\S+\/\S+) created$/.exec(l)?.[1])
      .filter((r): r is string => r !== undefined);
    const left = await kubectl(sim.kubeconfigPath, 'get', ...refs, '-n', 'stowage', '--ignore-not-found', '-o', 'name');
    expect(left.stdout.trim().split('\n').sort()).toEqual(['namespace/stowage', 'secret/stowage-repo-key']);
    // The ServiceAccounts are gone, and their tokens with them.
    const refused = await kubectl(apiKubeconfig, 'get', 'pods', '-n', 'shop');
    expect(refused.stderr).toMatch(/Unauthorized|must be logged in/);
    // The bucket keeps the backup and the volume repository.
    await access(s3.objectFile('cluster-a/backups/x/x.tar.gz'));
    await access(s3.objectFile('cluster-a/repository/config.json'));

    for (const p of processes.splice(0)) await p.stop();

    // ---- a reinstall on the same bucket, with a new Redis: the backup is there, its volume restores with the kept key ----
    await run('redis-cli', ['-u', redis.url, 'flushall']);
    const again = await stowage(install, admin);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^secret\/stowage-repo-key unchanged$/m);
    api = await startInstalled();
    user = await operator(api.process);
    const synced = await waitFor(
      'backup x listed again (backup sync from the bucket)',
      async () => {
        const got = await stowage(['backup', 'get', 'x', '-o', 'json'], user);
        return got.code === 0 ? (JSON.parse(got.stdout) as { phase: string }) : undefined;
      },
      120_000,
      1_000,
    );
    expect(synced.phase).toBe('Completed');
    const second = await stowage(
      ['restore', 'create', 'r2', '--from-backup', 'x', '--namespace-mappings', 'shop:shop-again', '--wait', '-o', 'json'],
      user,
    );
    expect(second.code, second.stdout + second.stderr).toBe(0);
    const againVolume = sim.podVolumes('shop-again', 'db-0').find((v) => v.volume === 'data');
    expect(withoutMarkers(await describeTree(againVolume?.path as string))).toEqual(original);

    for (const p of processes.splice(0)) await p.stop();
  });
});
