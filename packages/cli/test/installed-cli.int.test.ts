/*
 * The CLI as a user installs it: build.mjs bundles it, `npm pack` packs it, `npm i -g --offline`
 * installs the tarball into an empty prefix (no dependency, no network), and every verb runs
 * through the installed `stowage` (and `kubectl stowage`, found by kubectl's plugin discovery on
 * PATH) against a live API on the simulator's demo cluster.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { type CliResult, type Stack, startStack } from './cli-harness.js';

const run = promisify(execFile);
const CLI_DIR = fileURLToPath(new URL('..', import.meta.url));

let stack: Stack;
let work: string;
let prefix: string;
let env: Record<string, string>;

/** Runs an installed program (`stowage` or `kubectl`) with the prefix's bin first on PATH. */
function installed(program: string, args: string[], extraEnv: Record<string, string> = {}, timeoutMs = 120_000): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const childEnv: Record<string, string | undefined> = { ...process.env };
    for (const k of Object.keys(childEnv)) if (k.startsWith('STOWAGE_')) delete childEnv[k];
    const child = spawn(program, args, { env: { ...childEnv, ...env, ...extraEnv }, cwd: work, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${program} ${args.join(' ')} did not finish within ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
const stowage = (...args: string[]) => installed(join(prefix, 'bin', 'stowage'), args);

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'stowage-installed-'));
  prefix = join(work, 'prefix');
  await run(process.execPath, [join(CLI_DIR, 'build.mjs')]);
  const packed = await run('npm', ['pack', '--pack-destination', work, '--silent'], { cwd: CLI_DIR });
  const tarball = join(work, packed.stdout.trim().split('\n').at(-1) as string);
  // --offline: a tarball that needed anything from a registry would fail here.
  await run('npm', ['install', '--global', '--prefix', prefix, '--offline', '--no-audit', '--no-fund', tarball], { cwd: work });
  stack = await startStack();
  env = {
    ...stack.env,
    PATH: `${join(prefix, 'bin')}${delimiter}${process.env.PATH ?? ''}`,
    TZ: 'UTC',
    // kubectl's plugin discovery needs no cluster, but keep it off the user's kubeconfig.
    KUBECONFIG: stack.sim.kubeconfigPath,
  };
}, 180_000);

afterAll(async () => {
  await stack?.close();
  if (work) await rm(work, { recursive: true, force: true });
}, 60_000);

describe('the installed CLI (npm pack → npm i -g → stowage / kubectl stowage)', { timeout: 300_000 }, () => {
  it('installs as one file with no dependencies; `stowage version` answers', async () => {
    const manifest = JSON.parse(await readFile(join(prefix, 'lib', 'node_modules', '@stowage', 'cli', 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
      bin: Record<string, string>;
    };
    expect(manifest.dependencies ?? {}).toEqual({});
    expect(Object.keys(manifest.bin).sort()).toEqual(['kubectl-stowage', 'stowage']);
    expect(await readdir(join(prefix, 'lib', 'node_modules', '@stowage', 'cli'))).not.toContain('node_modules');
    const version = await stowage('version');
    expect([version.code, version.stdout]).toEqual([0, 'stowage 0.1.0\n']);
    const noKey = await stowage('repo', 'verify', '--repo', work);
    expect([noKey.code, noKey.stderr.trim()]).toEqual([1, 'STOWAGE_REPO_KEY is not set; it holds the key the repository was written with']);
    // The repository engine is a native module the installed CLI does not carry: said, not a crash.
    const withKey = await installed(join(prefix, 'bin', 'stowage'), ['repo', 'verify', '--repo', work], { STOWAGE_REPO_KEY: 'k' });
    expect(withKey.code).toBe(1);
    expect(withKey.stderr).toMatch(/^stowage repo needs the volume repository engine .* which the installed CLI does not carry/);
  });

  it('backup create x --include-namespaces shop --wait completes with a progress line; kubectl stowage backup get x -o yaml', async () => {
    const created = await stowage('backup', 'create', 'x', '--include-namespaces', 'shop', '--default-volumes-to-fs-backup', '--wait');
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toContain('backup "x" submitted; waiting for it to end');
    // Not a terminal: one line per notable event and a status line (phase, blocks, PVBs, hooks, elapsed).
    expect(created.stdout).toMatch(/^phase InProgress → Finalizing$/m);
    expect(created.stdout).toMatch(/^Completed: blocks \d+\/\d+, PVBs 3\/3 \(.*\), hooks \d+\/\d+ after \d/m);
    expect(created.stdout).toMatch(/^Phase: +Completed$/m);
    expect(created.stdout).toMatch(
      /^Completed: +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+00:00 \(\d+(\.\d)?s ago\) \(took ((\d+m)?\d+(\.\d)?s|\d+ms)\)$/m,
    );

    const plugin = await installed('kubectl', ['stowage', 'backup', 'get', 'x', '-o', 'yaml']);
    expect(plugin.code, plugin.stderr).toBe(0);
    const doc = parseYaml(plugin.stdout) as { name: string; phase: string; podVolumeBackups: { Completed: number } };
    expect(doc).toMatchObject({ name: 'x', phase: 'Completed', podVolumeBackups: { Completed: 3 } });
  });

  it('-o json|yaml|table on get, describe and list; describe --details lists resources by kind', async () => {
    const [table, json, yaml, list, listYaml, details, detailsJson] = await Promise.all([
      stowage('backup', 'get', 'x'),
      stowage('backup', 'get', 'x', '-o', 'json'),
      stowage('backup', 'describe', 'x', '-o', 'yaml'),
      stowage('backup', 'list'),
      stowage('backup', 'list', '-o', 'yaml'),
      stowage('backup', 'describe', 'x', '--details'),
      stowage('backup', 'describe', 'x', '--details', '-o', 'json'),
    ]);
    expect(table.stdout).toMatch(/^x +Completed +0 +0 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+00:00 +\d+(\.\d)?s +7[12]\d?h\d+m0s +<none>$/m);
    expect((JSON.parse(json.stdout) as { name: string }).name).toBe('x');
    expect((parseYaml(yaml.stdout) as { backup: { name: string }; blocks: unknown[] }).blocks.length).toBeGreaterThan(0);
    expect(list.stdout).toMatch(/^x +Completed +\d{4}-/m);
    expect((parseYaml(listYaml.stdout) as { items: Array<{ name: string }> }).items.map((b) => b.name)).toContain('x');
    expect(details.code, details.stderr).toBe(0);
    expect(details.stdout).toMatch(/^Resource List:\n(?:.*\n)*? {2}v1\/Pod:\n(?: {4}- .*\n)*? {4}- shop\/postgres-0$/m);
    expect(details.stdout).toMatch(/^ {2}apps\/v1\/StatefulSet:\n {4}- shop\/postgres$/m);
    const resources = (JSON.parse(detailsJson.stdout) as { resources: Record<string, string[]> }).resources;
    expect(resources['v1/PersistentVolumeClaim']).toContain('shop/data-postgres-0');
  });

  it('backup download writes the resources tarball; an existing file needs --force', async () => {
    const first = await stowage('backup', 'download', 'x');
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/^backup "x" downloaded to x-data\.tar\.gz \(\d/);
    const listing = await run('tar', ['tzf', join(work, 'x-data.tar.gz')]);
    expect(listing.stdout.split('\n')).toContain('resources/pods/namespaces/shop/postgres-0.json');
    const again = await stowage('backup', 'download', 'x');
    expect(again.code).toBe(2);
    expect(again.stderr.trim()).toBe('backup download: x-data.tar.gz exists; add --force to overwrite it');
    const forced = await stowage('backup', 'download', 'x', '-o', 'copy.tgz', '--force');
    expect(forced.code, forced.stderr).toBe(0);
    expect(await readFile(join(work, 'copy.tgz'))).toEqual(await readFile(join(work, 'x-data.tar.gz')));
  });

  it('labels and annotations; get --selector finds them; delete --selector --confirm removes exactly those', async () => {
    const labeled = await stowage(
      'backup',
      'create',
      'labeled',
      '--include-namespaces',
      'media',
      '--include-resources',
      'configmaps',
      '--labels',
      'team=a,tier=gold',
      '--annotations',
      'note=from the test',
      '--wait',
      '-o',
      'json',
    );
    expect(labeled.code, labeled.stderr).toBe(0);
    const body = JSON.parse(labeled.stdout) as { backup: { labels: Record<string, string>; annotations: Record<string, string> } };
    expect(body.backup.labels).toEqual({ team: 'a', tier: 'gold' });
    expect(body.backup.annotations).toEqual({ note: 'from the test' });
    const badLabel = await stowage('backup', 'create', 'bad-label', '--labels', 'Not A Key=1');
    expect(badLabel.code).toBe(1);
    expect(badLabel.stderr).toMatch(/^ {2}labels\["Not A Key"\]: label key name "Not A Key" may contain only/m);
    const notKv = await stowage('backup', 'create', 'bad-label', '--labels', 'novalue');
    expect([notKv.code, notKv.stderr.trim()]).toEqual([2, '--labels: "novalue" is not key=value']);

    const selected = await stowage('backup', 'get', '--selector', 'team=a', '-o', 'json');
    expect((JSON.parse(selected.stdout) as { items: Array<{ name: string }> }).items.map((b) => b.name)).toEqual(['labeled']);
    const none = await stowage('backup', 'get', '-l', 'team in (b,c)');
    expect(none.stdout.trim()).toBe('no backups');
    const unconfirmed = await stowage('backup', 'delete', '--selector', 'team=a');
    expect(unconfirmed.code).toBe(2);
    const deleted = await stowage('backup', 'delete', '--selector', 'team=a', '--confirm');
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout.trim()).toBe('backup "labeled" deleted (record, jobs, PodVolumeBackups and stored data)');
    const left = JSON.parse((await stowage('backup', 'get', '-o', 'json')).stdout) as { items: Array<{ name: string }> };
    expect(left.items.map((b) => b.name)).toEqual(['x']);
    const both = await stowage('backup', 'delete', 'x', '--all');
    expect([both.code, both.stderr.trim()]).toEqual([2, 'backup delete: give backup names, --all, or --selector (one of them)']);
  });

  it('schedule create with selectors and resource filters; describe; backup --from-schedule; restore --from-schedule --restore-volumes=false; -o on restores and schedules; restore delete', async () => {
    const created = await stowage(
      'schedule',
      'create',
      'media-daily',
      '--schedule',
      '@daily',
      '--include-namespaces',
      'media',
      '--exclude-namespaces',
      'shop',
      '--include-resources',
      'pods,persistentvolumeclaims,persistentvolumes,configmaps',
      '--exclude-resources',
      'secrets',
      '--selector',
      'app=media',
      '--include-cluster-resources=false',
      '--default-volumes-to-fs-backup',
      '--fs-backup-timeout',
      '30m',
      '--ttl',
      '24h',
      '--skip-immediately',
      '-o',
      'yaml',
    );
    expect(created.code, created.stderr).toBe(0);
    const schedule = parseYaml(created.stdout) as { spec: { template: Record<string, unknown> } };
    expect(schedule.spec.template).toMatchObject({
      includedNamespaces: ['media'],
      excludedNamespaces: ['shop'],
      includedResources: ['pods', 'persistentvolumeclaims', 'persistentvolumes', 'configmaps'],
      excludedResources: ['secrets'],
      labelSelector: { matchLabels: { app: 'media' } },
      includeClusterResources: false,
      defaultVolumesToFsBackup: true,
      fsBackupTimeout: '30m',
      ttl: '24h',
    });
    const described = await stowage('schedule', 'describe', 'media-daily');
    expect(described.stdout).toMatch(/^Schedule: +@daily$/m);
    expect(described.stdout).toMatch(/^Paused: +false$/m);
    expect(described.stdout).toMatch(/^Last success: +-$/m);
    expect(described.stdout).toMatch(/^ {2}labelSelector:\n {4}matchLabels:\n {6}app: media$/m);

    const fromSchedule = await stowage('backup', 'create', '--from-schedule', 'media-daily', '--wait');
    expect(fromSchedule.code, fromSchedule.stdout + fromSchedule.stderr).toBe(0);
    const backupName = /backup "(media-daily-\d{14})" submitted/.exec(fromSchedule.stdout)?.[1] as string;
    expect(backupName).toBeDefined();
    expect(fromSchedule.stdout).toMatch(/^Labels: +stowage\.dev\/schedule-name=media-daily$/m);
    const withName = await stowage('backup', 'create', 'n', '--from-schedule', 'media-daily');
    expect(withName.code).toBe(2);
    const schedGet = JSON.parse((await stowage('schedule', 'get', 'media-daily', '-o', 'json')).stdout) as {
      status: { lastSuccessfulBackup?: { name: string } };
    };
    expect(schedGet.status.lastSuccessfulBackup?.name).toBe(backupName);

    const restored = await stowage(
      'restore',
      'create',
      'media-copy',
      '--from-schedule',
      'media-daily',
      '--namespace-mappings',
      'media:media-copy',
      '--restore-volumes=false',
      '--wait',
      '-o',
      'json',
    );
    expect(restored.code, restored.stderr).toBe(0);
    const restore = JSON.parse(restored.stdout) as {
      backupName: string;
      phase: string;
      podVolumeRestores: { total: number };
      spec: { restorePVs: boolean };
    };
    expect(restore).toMatchObject({ backupName, phase: 'Completed', podVolumeRestores: { total: 0 }, spec: { restorePVs: false } });
    const [rget, rlist] = await Promise.all([stowage('restore', 'get', 'media-copy', '-o', 'yaml'), stowage('restore', 'get')]);
    expect((parseYaml(rget.stdout) as { name: string }).name).toBe('media-copy');
    expect(rlist.stdout).toMatch(new RegExp(`^media-copy +${backupName} +Completed +\\d{4}-`, 'm'));
    // -o json|yaml|table on every get, describe and list of restores and schedules too.
    const [rdescJson, rdescYaml, rlistYaml, rlistJson, sdescYaml, sdescJson, slistTable, slistYaml] = await Promise.all([
      stowage('restore', 'describe', 'media-copy', '-o', 'json'),
      stowage('restore', 'describe', 'media-copy', '-o', 'yaml'),
      stowage('restore', 'list', '-o', 'yaml'),
      stowage('restore', 'list', '-o', 'json'),
      stowage('schedule', 'describe', 'media-daily', '-o', 'yaml'),
      stowage('schedule', 'describe', 'media-daily', '-o', 'json'),
      stowage('schedule', 'list', '-o', 'table'),
      stowage('schedule', 'list', '-o', 'yaml'),
    ]);
    expect((JSON.parse(rdescJson.stdout) as { restore: { name: string } }).restore.name).toBe('media-copy');
    expect((parseYaml(rdescYaml.stdout) as { restore: { backupName: string } }).restore.backupName).toBe(backupName);
    expect((parseYaml(rlistYaml.stdout) as { items: Array<{ name: string }> }).items.map((r) => r.name)).toContain('media-copy');
    expect((JSON.parse(rlistJson.stdout) as { items: Array<{ name: string }> }).items.map((r) => r.name)).toContain('media-copy');
    expect((parseYaml(sdescYaml.stdout) as { spec: { schedule: string } }).spec.schedule).toBe('@daily');
    expect((JSON.parse(sdescJson.stdout) as { name: string }).name).toBe('media-daily');
    expect(slistTable.stdout).toMatch(/^media-daily +/m);
    expect((parseYaml(slistYaml.stdout) as { items: Array<{ name: string }> }).items.map((x) => x.name)).toEqual(['media-daily']);
    const badOutput = await stowage('schedule', 'list', '-o', 'wide');
    expect([badOutput.code, badOutput.stderr.trim()]).toEqual([
      2,
      'schedule list: flag -o/--output must be json, yaml or table, got "wide"',
    ]);

    const bad = await stowage('restore', 'create', 'r', '--from-backup', backupName, '--restore-volumes=maybe');
    expect([bad.code, bad.stderr.trim()]).toEqual([
      2,
      'restore create: flag --restore-volumes takes no value (use --flag or --flag=false)',
    ]);

    const rdel = await stowage('restore', 'delete', 'media-copy', '--confirm');
    expect(rdel.code, rdel.stderr).toBe(0);
    expect(rdel.stdout.trim()).toBe('restore "media-copy" deleted (its record, log and results; the restored objects stay)');
    expect((await stowage('restore', 'get', 'media-copy')).code).toBe(1);
    const sdel = await stowage('schedule', 'delete', 'media-daily', '--confirm');
    expect(sdel.code).toBe(0);
  });

  it('backup delete --all --confirm deletes every backup', async () => {
    const res = await stowage('backup', 'delete', '--all', '--confirm', '-o', 'json');
    expect(res.code, res.stderr).toBe(0);
    const after = JSON.parse((await stowage('backup', 'list', '-o', 'json')).stdout) as { items: unknown[] };
    expect(after.items).toEqual([]);
  });
});
