/*
 * `stowage install` / `uninstall` (the bundle users install) against the simulator with
 * authentication and RBAC enforced, as a cluster admin's kubeconfig: what it applies is k8s/ as
 * kustomize renders it, with the flags written in; a second install changes nothing; the
 * identities it makes get the rights k8s/ grants (asked of the API server); uninstall removes it
 * and keeps the repository key. The dry run touches no cluster.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { runStowage } from './cli-harness.js';

const run = promisify(execFile);
const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

let sim: Simulator;
let work: string;
let creds: string;
let env: Record<string, string>;

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
}

async function kubectl(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run('kubectl', ['--kubeconfig', sim.kubeconfigPath, ...args]);
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** The resourceVersion of each object (`kind.group/name`) as the API server holds it now; one kubectl call. */
async function installedObjects(refs: string[]): Promise<Map<string, string>> {
  const res = await kubectl('get', ...refs, '-n', 'stowage', '-o', 'json');
  expect(res.code, res.stderr).toBe(0);
  const items = (JSON.parse(res.stdout) as { items: Obj[] }).items;
  expect(items).toHaveLength(refs.length);
  return new Map(items.map((o) => [`${o.kind}/${o.metadata.name}`, o.metadata.resourceVersion as string]));
}

const refsOf = (stdout: string) =>
  stdout
    .split('\n')
    .map((l) => /^(\S+\/\S+) (created|configured|unchanged)$/.exec(l))
    .filter((m) => m !== null)
    .map((m) => ({ ref: m[1] as string, outcome: m[2] as string }));

beforeAll(async () => {
  sim = await startSimulator({ fixture: { objects: [] } });
  work = await mkdtemp(join(tmpdir(), 'stowage-install-'));
  creds = join(work, 'credentials');
  await writeFile(creds, '# the bucket user\n[default]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = s3cr3t/Key+\n');
  env = { KUBECONFIG: sim.kubeconfigPath };
}, 60_000);

afterAll(async () => {
  await sim?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('stowage install / uninstall', { timeout: 240_000 }, () => {
  it('--dry-run -o yaml prints k8s/ as kustomize renders it, with the flags written in, and touches no cluster', async () => {
    const res = await runStowage(
      [
        'install',
        '--dry-run',
        '-o',
        'yaml',
        '--storage',
        's3://backups/team-a',
        '--s3-endpoint',
        'https://minio.example:9000',
        '--s3-region',
        'eu-west-1',
        '--secret-file',
        creds,
        '--image',
        'registry.example/stowage',
        '--tag',
        '1.2.3',
        '--redis-url',
        'redis://:pw@redis.example:6379',
        '--replicas',
        'api=2,worker=3',
      ],
      // A kubeconfig naming nothing reachable: the dry run must not need one.
      { KUBECONFIG: join(work, 'missing-kubeconfig') },
    );
    expect(res.code, res.stderr).toBe(0);
    const objects = parseAllDocuments(res.stdout).map((d) => d.toJSON() as Obj);
    const find = (kind: string, name: string | RegExp) =>
      objects.find((o) => o.kind === kind && (typeof name === 'string' ? o.metadata.name === name : name.test(o.metadata.name)));

    // Every object kustomize renders for the S3 layout is there, less the bundled Redis.
    const { stdout: rendered } = await run('kubectl', ['kustomize', 'k8s/overlays/s3'], { cwd: REPO_ROOT, maxBuffer: 64 << 20 });
    const expected = parseAllDocuments(rendered)
      .map((d) => d.toJSON() as Obj)
      .filter((o) => !o.metadata.name.startsWith('stowage-redis'))
      .map((o) => `${o.kind}/${o.metadata.name}`);
    const printed = objects.map((o) => `${o.kind}/${o.metadata.name}`);
    expect(printed.filter((ref) => !ref.startsWith('Secret/'))).toEqual(expected);
    expect(printed.filter((ref) => ref.startsWith('Secret/')).sort()).toEqual([
      'Secret/stowage-api-tokens',
      'Secret/stowage-redis-url',
      'Secret/stowage-repo-key',
      'Secret/stowage-s3-credentials',
    ]);
    expect(find('StatefulSet', 'stowage-redis')).toBeUndefined();
    expect(find('PersistentVolumeClaim', 'stowage-backups')).toBeUndefined();

    expect(find('ConfigMap', /^stowage-config-/)?.data).toMatchObject({
      STOWAGE_STORAGE: 's3://backups/team-a',
      STOWAGE_S3_ENDPOINT: 'https://minio.example:9000',
      STOWAGE_S3_REGION: 'eu-west-1',
      STOWAGE_RESTORE_WAIT_IMAGE: 'registry.example/stowage/node-agent:1.2.3',
    });
    expect(find('ConfigMap', /^stowage-config-/)?.data).not.toHaveProperty('REDIS_URL');
    const secretData = (name: string) =>
      Object.fromEntries(Object.entries(find('Secret', name)?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
    expect(secretData('stowage-s3-credentials')).toEqual({ AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 's3cr3t/Key+' });
    expect(secretData('stowage-redis-url')).toEqual({ url: 'redis://:pw@redis.example:6379' });
    expect(secretData('stowage-repo-key').key).toMatch(/^[0-9a-f]{64}$/);

    type Template = {
      metadata: { annotations: Record<string, string> };
      spec: { containers: Array<{ image: string; env: Array<{ name: string; valueFrom?: unknown }> }> };
    };
    for (const [kind, name, image] of [
      ['Deployment', 'stowage-api', 'registry.example/stowage/api:1.2.3'],
      ['Deployment', 'stowage-worker', 'registry.example/stowage/worker:1.2.3'],
      ['DaemonSet', 'stowage-node-agent', 'registry.example/stowage/node-agent:1.2.3'],
    ] as const) {
      const template = (find(kind, name)?.spec as { template: Template } | undefined)?.template as Template;
      expect(template.spec.containers[0]?.image).toBe(image);
      expect(template.spec.containers[0]?.env).toContainEqual({
        name: 'REDIS_URL',
        valueFrom: { secretKeyRef: { name: 'stowage-redis-url', key: 'url' } },
      });
      expect(template.metadata.annotations['stowage.dev/config-sha256']).toMatch(/^[0-9a-f]{64}$/);
    }
    expect(find('Deployment', 'stowage-api')?.spec?.replicas).toBe(2);
    // The worker's autoscaler owns its count: the floor is raised instead.
    expect(find('Deployment', 'stowage-worker')?.spec).not.toHaveProperty('replicas');
    expect(find('HorizontalPodAutoscaler', 'stowage-worker')?.spec?.minReplicas).toBe(3);
  });

  it('bad flags: one line naming the flag, exit 2', async () => {
    const cases: Array<[string[], string]> = [
      [['--storage', '/var/backups'], '--storage: "/var/backups" is not s3://BUCKET[/PREFIX];'],
      [['--storage', 's3://b-1'], '--secret-file: --storage s3://… needs the bucket credentials'],
      [['--s3-endpoint', 'http://x'], '--s3-endpoint: only with --storage s3://…'],
      [['--storage', 's3://b-1', '--secret-file', join(work, 'nope')], `--secret-file: ${join(work, 'nope')} is not a readable file`],
      [['--redis-url', 'http://redis'], '--redis-url: "http://redis" must start with redis:// or rediss://'],
      [['--replicas', 'api=two'], '--replicas: "api=two" is not COMPONENT=N'],
      [['--replicas', 'db=2'], '--replicas: no component "db"; the deployment has api, restorer, worker'],
      [['-o', 'table'], 'install: -o yaml|json prints the objects with --dry-run'],
      [['--bogus'], 'install: unknown flag --bogus; see "stowage install --help"'],
    ];
    for (const [args, message] of cases) {
      const res = await runStowage(['install', '--dry-run', ...args], env);
      expect([res.code, res.stderr.split('\n').length, res.stderr], args.join(' ')).toEqual([2, 2, expect.stringContaining(message)]);
    }
    await writeFile(join(work, 'not-aws'), '[default]\naws_access_key_id = A\n');
    const partial = await runStowage(['install', '--dry-run', '--storage', 's3://b-1', '--secret-file', join(work, 'not-aws')], env);
    expect([partial.code, partial.stderr.trim()]).toEqual([
      2,
      `--secret-file: ${join(work, 'not-aws')} has no aws_access_key_id and aws_secret_access_key in its [default] profile`,
    ]);
  });

  it('applies the deployment; a second install changes nothing; the identities have the rights k8s/ grants; uninstall keeps the key', async () => {
    const first = await runStowage(['install'], env);
    expect(first.code, first.stderr).toBe(0);
    const applied = refsOf(first.stdout);
    expect(applied.length).toBeGreaterThan(30);
    expect(applied.every((a) => a.outcome === 'created')).toBe(true);
    expect(applied.map((a) => a.ref)).toEqual(
      expect.arrayContaining([
        'namespace/stowage',
        'customresourcedefinition.apiextensions.k8s.io/backups.stowage.dev',
        'serviceaccount/stowage-worker',
        'clusterrolebinding.rbac.authorization.k8s.io/stowage-worker-exec',
        'secret/stowage-repo-key',
        'statefulset.apps/stowage-redis',
        'persistentvolumeclaim/stowage-backups',
        'deployment.apps/stowage-api',
        'daemonset.apps/stowage-node-agent',
      ]),
    );
    const versions = await installedObjects(applied.map((a) => a.ref));
    const key = (await kubectl('get', 'secret', 'stowage-repo-key', '-n', 'stowage', '-o', 'jsonpath={.data.key}')).stdout;
    expect(Buffer.from(key, 'base64').toString()).toMatch(/^[0-9a-f]{64}$/);

    // The API server says what the installed identities may do (RBAC from k8s/, nothing more).
    const can = async (sa: string, ...args: string[]) =>
      (await kubectl('auth', 'can-i', `--as=system:serviceaccount:stowage:${sa}`, ...args)).stdout.trim();
    expect(await can('stowage-worker', 'create', 'pods', '--subresource=exec', '-n', 'shop')).toBe('yes');
    expect(await can('stowage-node-agent', 'update', 'podvolumebackups.stowage.dev', '--subresource=status', '-n', 'stowage')).toBe('yes');
    expect(await can('stowage-api', 'delete', 'namespaces')).toBe('no');
    // Only the backup workers exec: the api's backup-level hooks run in them.
    expect(await can('stowage-api', 'create', 'pods', '--subresource=exec', '-n', 'shop')).toBe('no');

    // Again, same flags: every object unchanged, not one resourceVersion moved, the key kept.
    const second = await runStowage(['install'], env);
    expect(second.code, second.stderr).toBe(0);
    expect(refsOf(second.stdout)).toEqual(applied.map((a) => ({ ref: a.ref, outcome: 'unchanged' })));
    expect(await installedObjects(applied.map((a) => a.ref))).toEqual(versions);

    // A changed flag changes exactly what it names.
    const scaled = await runStowage(['install', '--replicas', 'api=3'], env);
    expect(scaled.code, scaled.stderr).toBe(0);
    expect(refsOf(scaled.stdout).filter((a) => a.outcome !== 'unchanged')).toEqual([
      { ref: 'deployment.apps/stowage-api', outcome: 'configured' },
    ]);
    expect((await kubectl('get', 'deployment', 'stowage-api', '-n', 'stowage', '-o', 'jsonpath={.spec.replicas}')).stdout).toBe('3');

    const unconfirmed = await runStowage(['uninstall'], env);
    expect([unconfirmed.code, unconfirmed.stderr.trim()]).toEqual([
      2,
      'uninstall: this cannot be undone; add --confirm (there is no terminal to ask on)',
    ]);
    const removed = await runStowage(['uninstall', '--confirm'], env);
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stdout).toContain('deployment.apps/stowage-api deleted');
    expect(removed.stdout).toContain('kept: namespace/stowage, secret/stowage-repo-key, persistentvolumeclaim/stowage-backups.');
    const left = await kubectl('get', ...applied.map((a) => a.ref), '-n', 'stowage', '--ignore-not-found', '-o', 'name');
    expect(left.stdout.trim().split('\n').sort()).toEqual([
      'namespace/stowage',
      'persistentvolumeclaim/stowage-backups',
      'secret/stowage-repo-key',
    ]);
    expect((await kubectl('get', 'secret', 'stowage-repo-key', '-n', 'stowage', '-o', 'jsonpath={.data.key}')).stdout).toBe(key);

    // Reinstalled: the kept key is used, not replaced.
    const again = await runStowage(['install'], env);
    expect(again.code, again.stderr).toBe(0);
    expect(refsOf(again.stdout)).toContainEqual({ ref: 'secret/stowage-repo-key', outcome: 'unchanged' });
    expect((await kubectl('get', 'secret', 'stowage-repo-key', '-n', 'stowage', '-o', 'jsonpath={.data.key}')).stdout).toBe(key);
  });

  it("a user without the rights gets the API server's refusal, naming the object", async () => {
    const bob = sim.kubeconfigFor({ user: 'bob' }, join(work, 'bob.kubeconfig'));
    const res = await runStowage(['install'], { KUBECONFIG: bob.path });
    expect(res.code).toBe(1);
    expect(res.stderr.trim()).toMatch(
      /^kubernetes: .*namespaces "stowage" is forbidden: User "bob" cannot (get|patch) resource "namespaces"/,
    );
  });
});
