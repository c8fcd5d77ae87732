import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ApiService, startApiService } from '@stowage/api';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { createLogger, loadConfig } from '@stowage/platform';
import { deployIdentities, uniquePrefix, useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/cli.js';

/*
 * `stowage … --kubeconfig FILE -n NS`: the CLI calls the API as the kubeconfig's current user (its
 * token, reviewed by the cluster), creating and listing in one namespace; RBAC's refusals come back
 * in the API server's words.
 */

const objects = [
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'a' } },
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'b' } },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'alice-admin', namespace: 'a' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }],
  },
];

describe('stowage --kubeconfig and -n', () => {
  let redis: { url: string; stop: () => Promise<void> };
  let sim: Simulator;
  let api: ApiService;
  let dir: string;
  let alice: string;

  const run = async (...argv: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(
      argv,
      { STOWAGE_API_URL: api.url },
      { stdout: { write: (t: string) => out.push(t) }, stderr: { write: (t: string) => err.push(t) } },
    );
    return { code, stdout: out.join(''), stderr: err.join('') };
  };

  beforeAll(async () => {
    redis = await useTestRedis();
    sim = await startSimulator({ fixture: { objects }, port: 0, materializeVolumes: 'none' });
    const ids = await deployIdentities(sim);
    dir = await mkdtemp(join(tmpdir(), 'stowage-cli-kube-'));
    alice = sim.kubeconfigFor({ user: 'alice' }, join(dir, 'alice.kubeconfig')).path;
    const loaded = loadConfig({
      REDIS_URL: redis.url,
      KUBECONFIG: ids.api,
      STOWAGE_STORAGE: join(dir, 'storage'),
      STOWAGE_KUBE_AUTH: 'enabled',
      STOWAGE_QUEUE_PREFIX: uniquePrefix(),
      LOG_LEVEL: 'warn',
    });
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    api = await startApiService({
      config: loaded.config,
      logger: createLogger({ level: 'warn', name: 'cli-kube-auth-test' }),
      port: 0,
      host: '127.0.0.1',
      hostBackupsQueue: false,
    });
    api.markReady();
  }, 120_000);

  afterAll(async () => {
    await api?.stopHttp();
    await api?.stopWorkers();
    await api?.stopQueues();
    await api?.stopRedis();
    await sim?.close();
    await redis?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("creates in the namespace as the kubeconfig's user and lists only it; RBAC's refusal is named", async () => {
    const made = await run('backup', 'create', 'nightly', '-n', 'a', '--kubeconfig', alice, '-o', 'json');
    expect(made.code, made.stderr).toBe(0);
    expect(JSON.parse(made.stdout)).toMatchObject({ namespace: 'a', spec: { includedNamespaces: ['a'] } });

    const listed = await run('backup', 'list', '--namespace=a', '--kubeconfig', alice, '-o', 'json');
    expect(listed.code, listed.stderr).toBe(0);
    const items = (JSON.parse(listed.stdout) as { items: Array<{ namespace?: string }> }).items;
    expect(items.map((i) => i.namespace)).toEqual(['a']);

    const refused = await run('backup', 'create', 'theirs', '-n', 'b', '--kubeconfig', alice);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('User "alice" cannot create resource "backups" in API group "stowage.dev" in the namespace "b"');

    const noToken = await run('backup', 'list');
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toContain('STOWAGE_API_TOKEN');
  });
});
