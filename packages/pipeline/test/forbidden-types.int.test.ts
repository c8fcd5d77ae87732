import { validateRestoreRequest } from '@stowage/core';
import type { PipelineDeps, RunningWorkers } from '@stowage/pipeline';
import { startWorkers, submitBackup, submitRestore } from '@stowage/pipeline';
import { QueueName } from '@stowage/queue';
import { deployIdentities, type RenderedObject, renderDevOverlay, useTestRedis } from '@stowage/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readFinishedBackup } from './support/finished-backup.js';
import { backupSpec, configMap, namespace, node, pod } from './support/fixtures.js';
import { depsAs, type Harness, startHarness, waitFor, waitForBackupEnd, waitForRestoreEnd } from './support/harness.js';
import { tarballEntries } from './support/inspect.js';

/*
 * Backups and restores under the deployment's identities (the RBAC `kubectl kustomize
 * k8s/overlays/dev` renders): the api plans, the backup workers write blocks, the restore workers
 * (stowage-restorer) create what a restore writes. A type the reader may not list is a warning
 * naming it and the permission (backup PartiallyFailed); an item the restorer may not create is a
 * failed item with the API server's message (restore PartiallyFailed).
 */

const BUILTIN_READER = 'stowage-resource-reader-builtin';
const BUILTIN_RESTORER = 'stowage-restorer-builtin';
const deployment = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'web', namespace: 'shop' },
  spec: { selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec: { containers: [] } } },
};

describe('backups under the deployed identities', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let identities: RenderedObject[];
  const running: RunningWorkers[] = [];

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    const objects = [namespace('shop'), node('node-a'), configMap('settings'), deployment, pod({ name: 'app-0' })];
    h = await startHarness({ redisUrl: redisHandle.url, fixture: { objects }, agentNodes: ['node-a'] });
    await deployIdentities(h.sim);
    identities = await renderDevOverlay();
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((w) => w.close()));
  });
  afterAll(async () => {
    await h?.close();
    await redisHandle?.stop();
  });

  const runAs = (deps: PipelineDeps, queues: Parameters<typeof startWorkers>[0]['queues']) => {
    running.push(startWorkers({ deps, queues }));
  };
  const start = () => {
    runAs(depsAs(h, 'stowage-api'), [QueueName.backups, QueueName.restores]);
    runAs(depsAs(h, 'stowage-worker'), [QueueName.itemBlocks, QueueName.pvbWatch, QueueName.hooks]);
    runAs(depsAs(h, 'stowage-restorer'), [QueueName.restoreItems]);
  };
  /** The shipped ClusterRole `name`, with `edit` applied to its rules, as an admin would change it. */
  const replaceRules = async (name: string, edit: (rule: { apiGroups: string[]; resources: string[] }) => unknown) => {
    const shipped = identities.find((o) => o.kind === 'ClusterRole' && o.metadata.name === name);
    if (!shipped) throw new Error(`${name} is not rendered`);
    const rules = (shipped.rules as Array<{ apiGroups: string[]; resources: string[] }>).map(edit);
    await h.kube.requestJson({
      method: 'PUT',
      path: `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`,
      body: { ...shipped, rules },
    });
  };
  const deleteShop = async () => {
    await h.kube.core.deleteNamespace({ name: 'shop' });
    await waitFor('namespace shop gone', async () =>
      (await h.kube.core.readNamespace({ name: 'shop' }).then(
        () => false,
        () => true,
      ))
        ? true
        : undefined,
    );
  };
  const restore = async (name: string, backupName: string) => {
    const validation = validateRestoreRequest({ name, spec: { backupName } });
    if (!validation.ok) throw new Error(JSON.stringify(validation.problems));
    await submitRestore({ restores: h.deps.restores!, connection: h.redis, queuePrefix: h.queuePrefix }, { name, spec: validation.value });
    return waitForRestoreEnd(h.deps.restores!, h.deps.storage, name);
  };
  const submit = (name: string, spec: Record<string, unknown>) =>
    submitBackup({ state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix }, { name, spec: backupSpec(spec) });

  it.each([
    ['a backup of named namespaces', 'shop-named', { includedNamespaces: ['shop'] }],
    ['a backup of the whole cluster', 'whole-cluster', { includedNamespaces: ['*'], includeClusterResources: true }],
  ])('%s reads every type it plans over as shipped: Completed, nothing forbidden', async (_case, name, spec) => {
    start();
    await submit(name, spec);
    const finished = await readFinishedBackupWhenEnded(name);
    expect(finished.phase, finished.warnings.join('\n')).toBe('Completed');
    expect(finished.warnings.filter((w) => /forbidden/i.test(w))).toEqual([]);
    expect(tarballEntries(h.storageDir, name)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/resources\/configmaps\/namespaces\/shop\/settings\.json$/),
        expect.stringMatching(/resources\/deployments\.apps\/namespaces\/shop\/web\.json$/),
      ]),
    );
  });

  it('restores the backed-up namespace as shipped: the restorer creates every object (Completed)', async () => {
    start();
    await submit('to-restore', { includedNamespaces: ['shop'] });
    expect((await readFinishedBackupWhenEnded('to-restore')).phase).toBe('Completed');
    await deleteShop();
    const restored = await restore('rs-shipped', 'to-restore');
    expect(restored.phase, JSON.stringify(restored.items)).toBe('Completed');
    expect(Object.values(restored.items).filter((i) => i.outcome === 'failed')).toEqual([]);
    for (const path of [
      '/apis/apps/v1/namespaces/shop/deployments/web',
      '/api/v1/namespaces/shop/configmaps/settings',
      '/api/v1/namespaces/shop/pods/app-0',
    ]) {
      expect(await h.kube.requestJson({ path }), path).toBeDefined();
    }
  });

  it('without create on deployments in the restorer role: PartiallyFailed, the Forbidden item with the API server message, the rest restored', async () => {
    await replaceRules(BUILTIN_RESTORER, (rule) =>
      rule.apiGroups.includes('apps') ? { ...rule, resources: rule.resources.filter((r) => r !== 'deployments') } : rule,
    );
    start();
    await deleteShop();
    const restored = await restore('rs-no-deployments', 'to-restore');
    expect(restored.phase).toBe('PartiallyFailed');
    const failed = Object.entries(restored.items).filter(([, item]) => item.outcome === 'failed');
    expect(failed.map(([key]) => key)).toEqual([expect.stringMatching(/deployments\.apps.*shop.*web/)]);
    expect(failed[0]?.[1].reason).toMatch(
      /deployments\.apps is forbidden: User "system:serviceaccount:stowage:stowage-restorer" cannot create resource "deployments" in API group "apps" in the namespace "shop"/,
    );
    expect(restored.logs.some((l) => l.level === 'error' && /could not restore .*web.*forbidden/.test(l.msg))).toBe(true);
    await expect(h.kube.requestJson({ path: '/apis/apps/v1/namespaces/shop/deployments/web' })).rejects.toThrow(/not found/i);
    expect(await h.kube.requestJson({ path: '/api/v1/namespaces/shop/configmaps/settings' })).toBeDefined();
  });

  it('without list on configmaps in the reader role: PartiallyFailed, a warning naming the type and the permission, the rest backed up', async () => {
    // The shipped role, with configmaps taken out of its core-group rule.
    await replaceRules(BUILTIN_READER, (rule) =>
      rule.apiGroups.includes('') ? { ...rule, resources: rule.resources.filter((r) => r !== 'configmaps') } : rule,
    );
    // The aggregated reader the accounts are bound to no longer holds it (asked of the server).
    const review = await h.kube.requestJson<{ status: { allowed: boolean } }>({
      method: 'POST',
      path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: 'system:serviceaccount:stowage:stowage-api',
          groups: ['system:serviceaccounts', 'system:serviceaccounts:stowage', 'system:authenticated'],
          resourceAttributes: { verb: 'list', resource: 'configmaps', namespace: 'shop' },
        },
      },
    });
    expect(review.status.allowed).toBe(false);

    for (const [name, spec] of [
      ['no-cm-named', { includedNamespaces: ['shop'] }],
      ['no-cm-cluster', { includedNamespaces: ['*'] }],
    ] as const) {
      start();
      await submit(name, spec);
      const finished = await readFinishedBackupWhenEnded(name);
      expect(finished.phase).toBe('PartiallyFailed');
      const forbidden = finished.warnings.filter((w) => w.startsWith('configmaps not backed up'));
      expect(forbidden).toHaveLength(1);
      expect(forbidden[0]).toMatch(/missing RBAC permission: verb "list" on resource "configmaps" in API group "" \(core\)/);
      // The API server's own message, naming the identity.
      expect(forbidden[0]).toMatch(/User "system:serviceaccount:stowage:stowage-api" cannot list resource "configmaps"/);
      // (the deployment is gone: the restore before could not bring it back)
      const entries = tarballEntries(h.storageDir, name);
      expect(entries.some((e) => e.includes('/configmaps/'))).toBe(false);
      expect(entries).toEqual(expect.arrayContaining([expect.stringMatching(/resources\/pods\/namespaces\/shop\/app-0\.json$/)]));
      await Promise.all(running.splice(0).map((w) => w.close()));
    }
  });

  async function readFinishedBackupWhenEnded(name: string): Promise<{ phase: string; warnings: string[] }> {
    const phase = await waitForBackupEnd(h.deps.state, name);
    const { logs } = await readFinishedBackup(h.deps.storage, name);
    return { phase, warnings: logs.filter((l) => l.level === 'warn').map((l) => l.msg) };
  }
});
