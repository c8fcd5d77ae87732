/*
 * The console as two teams see it, in a real headless Chromium against the console stack
 * (services/api/test/console-stack.ts) with users' Kubernetes tokens on (STOWAGE_KUBE_AUTH=enabled,
 * as the shipped deployment runs it). alice is admin of `shop`, bob of `media` (RoleBindings to
 * Kubernetes' own `admin`, which Stowage's roles aggregate into). Each signs in with their own
 * Kubernetes token in their own browser: the console says who is signed in, lists only what that
 * identity may see, and when the API refuses an action it says why in the API server's words
 * (verb, resource, namespace). The test reads the API with the static token only to check.
 */
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runKey } from '../packages/core/src/index.js';
import { type ConsoleStack, launchChromium, startConsoleStack } from '../services/api/test/console-stack.js';

const OUTPUT_DIR = fileURLToPath(new URL('../test-output/console/', import.meta.url));
const ONLY_CONFIGMAPS = { includedResources: ['configmaps'], defaultVolumesToFsBackup: false };

let stack: ConsoleStack;
const browsers: Array<{ close: () => Promise<void> }> = [];
const tokens: Record<'alice' | 'bob', string> = { alice: '', bob: '' };
const pageErrors: string[] = [];

/** A call with `token` (the static one by default). */
async function call(path: string, init: { method?: string; body?: unknown; token?: string } = {}) {
  const res = await fetch(`${stack.apiUrl}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${init.token ?? stack.token}`, 'content-type': 'application/json' },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {} };
}

/** As the simulator's admin: a RoleBinding of `user` to Kubernetes' `admin` in `namespace`. */
async function bindAdmin(user: string, namespace: string): Promise<void> {
  const res = await fetch(`${stack.sim.url}/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.sim.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: `${user}-admin`, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    }),
  });
  if (!res.ok) throw new Error(`RoleBinding ${user} in ${namespace}: ${res.status} ${await res.text()}`);
}

/** A fresh browser signed in with `token`, on the backups list. */
async function signIn(token: string): Promise<Page> {
  const browser = await launchChromium();
  browsers.push(browser);
  const page = await browser.context.newPage();
  page.on('pageerror', (err) => pageErrors.push(err.message));
  await page.goto(`${stack.apiUrl}/ui`);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Open console' }).click();
  await page.getByRole('heading', { name: 'Backups' }).waitFor({ timeout: 15_000 });
  return page;
}

/**
 * How long the page may take to show the API's answer to what it just sent (a form's POST): the
 * bound of expect.poll, whose own default (1 s) a loaded machine's round trip can exceed.
 */
const SHOWN = { timeout: 30_000 };

/** The backups list's rows as [name, namespace], once they are `expected` (polled: the list refreshes). */
async function listedBackups(page: Page, expected: string[][]): Promise<void> {
  await page.goto(`${stack.apiUrl}/ui#/`);
  await expect
    .poll(
      async () => {
        const rows = page.locator('table.backups tbody tr');
        const out: string[][] = [];
        for (let i = 0; i < (await rows.count()); i++) {
          const row = rows.nth(i);
          out.push([(await row.locator('th').textContent()) ?? '', (await row.locator('td').first().textContent()) ?? '']);
        }
        return out.sort();
      },
      { timeout: 15_000 },
    )
    .toEqual(expected.sort());
}

const bobsBackup = runKey('media', 'media-cm');
const alicesBackup = runKey('shop', 'shop-cm');

beforeAll(async () => {
  stack = await startConsoleStack({ kubeAuth: true });
  await bindAdmin('alice', 'shop');
  await bindAdmin('bob', 'media');
  tokens.alice = stack.sim.addUser('alice');
  tokens.bob = stack.sim.addUser('bob');
  // What is there besides: bob's Backup of media (by REST, his token) and a cluster-wide one.
  const bobs = await call('/v1/backups', {
    method: 'POST',
    token: tokens.bob,
    body: { namespace: 'media', name: 'media-cm', spec: ONLY_CONFIGMAPS },
  });
  expect(bobs.status, JSON.stringify(bobs.body)).toBe(201);
  expect(bobs.body.name).toBe(bobsBackup);
  const cluster = await call('/v1/backups', {
    method: 'POST',
    body: { name: 'cluster-cm', spec: { ...ONLY_CONFIGMAPS, includedNamespaces: ['shop', 'media'] } },
  });
  expect(cluster.status, JSON.stringify(cluster.body)).toBe(201);
}, 180_000);

afterAll(async () => {
  for (const browser of browsers) await browser.close();
  await stack?.close();
}, 60_000);

describe('the console for two teams, each with its own Kubernetes token', () => {
  it("team A signs in as itself, sees only shop's backups, and is told why each refused action is refused", async () => {
    const page = await signIn(tokens.alice);
    await expect.poll(() => page.locator('#signed-in-as').textContent()).toBe('Signed in as User "alice"');
    // The dashboard and docs open with Stowage's own rights: not offered to a Kubernetes user.
    expect(await page.getByRole('link', { name: 'Queue dashboard' }).count()).toBe(0);
    await listedBackups(page, []);

    await page.locator('summary', { hasText: 'New backup' }).click();
    const form = page.getByRole('form', { name: 'New backup' });
    const formError = form.locator('.form-error');
    await form.getByLabel('Name', { exact: true }).fill('shop-cm');
    await form.getByLabel('Back up all pod volumes (defaultVolumesToFsBackup)').uncheck();
    await form.getByLabel('More spec fields (JSON, optional)').fill(JSON.stringify({ includedResources: ['configmaps'] }));
    // Another team's namespace, then the whole cluster: refused, saying which right is missing.
    await form.getByLabel('In namespace', { exact: true }).fill('media');
    await form.getByRole('button', { name: 'Start backup' }).click();
    await expect
      .poll(() => formError.textContent(), SHOWN)
      .toBe('Refused: User "alice" cannot create resource "backups" in API group "stowage.dev" in the namespace "media"');
    await form.getByLabel('In namespace', { exact: true }).fill('');
    await form.getByRole('button', { name: 'Start backup' }).click();
    await expect
      .poll(() => formError.textContent(), SHOWN)
      .toBe('Refused: User "alice" cannot create resource "clusterbackups" in API group "stowage.dev" at the cluster scope');
    expect((await call(`/v1/backups/${runKey('media', 'shop-cm')}`)).status).toBe(404);
    expect((await call('/v1/backups/shop-cm')).status).toBe(404);

    // Its own namespace: accepted, and it runs to the end.
    await form.getByLabel('In namespace', { exact: true }).fill('shop');
    await form.getByRole('button', { name: 'Start backup' }).click();
    await page.waitForURL(new RegExp(`#/backups/${alicesBackup}$`), { timeout: 10_000 });
    await page.locator('.phase-slot', { hasText: 'Completed' }).waitFor({ timeout: 120_000 });
    expect((await call(`/v1/backups/${alicesBackup}`)).body).toMatchObject({ namespace: 'shop', phase: 'Completed' });
    await listedBackups(page, [[alicesBackup, 'shop']]);
    await mkdir(OUTPUT_DIR, { recursive: true });
    await page.screenshot({ path: `${OUTPUT_DIR}tenant-alice-backups.png` });

    // Restoring into bob's namespace needs alice's own right to create there what the backup holds.
    await page.goto(`${stack.apiUrl}/ui#/backups/${alicesBackup}`);
    const restore = page.getByRole('form', { name: `Restore ${alicesBackup}` });
    await restore.waitFor({ timeout: 15_000 });
    await restore.getByLabel('Namespace mapping').fill('shop:media');
    await restore.getByRole('button', { name: 'Restore' }).click();
    await expect
      .poll(() => restore.locator('.form-error').textContent(), SHOWN)
      .toBe('Refused: User "alice" cannot create resource "configmaps" in API group "" in the namespace "media"');
    expect((await call('/v1/restores')).body.items).toEqual([]);

    // bob's backup, asked for by name: the page says it may not be seen, and why.
    await page.goto(`${stack.apiUrl}/ui#/backups/${bobsBackup}`);
    await expect
      .poll(() => page.getByRole('alert').first().textContent(), { timeout: 10_000 })
      .toBe(
        'You may not see this backup. Refused: User "alice" cannot get resource "backups" in API group "stowage.dev" in the namespace "media"',
      );
    // Schedules are cluster-wide (ClusterSchedules): the page says alice may not list them.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Schedules' }).click();
    await expect
      .poll(() => page.locator('main').textContent(), { timeout: 10_000 })
      .toContain(
        'Could not load schedules: Refused: User "alice" cannot list resource "clusterschedules" in API group "stowage.dev" at the cluster scope',
      );
    await page.screenshot({ path: `${OUTPUT_DIR}tenant-alice-refused.png` });
    expect(pageErrors).toEqual([]);
  }, 240_000);

  it("team B, in its own browser, sees only media's backup and may not open shop's", async () => {
    const page = await signIn(tokens.bob);
    await expect.poll(() => page.locator('#signed-in-as').textContent()).toBe('Signed in as User "bob"');
    await listedBackups(page, [[bobsBackup, 'media']]);
    await page.getByRole('link', { name: bobsBackup }).click();
    await page.locator('.phase-slot', { hasText: 'Completed' }).waitFor({ timeout: 120_000 });

    await page.goto(`${stack.apiUrl}/ui#/backups/${alicesBackup}`);
    await expect
      .poll(() => page.getByRole('alert').first().textContent(), { timeout: 10_000 })
      .toBe(
        'You may not see this backup. Refused: User "bob" cannot get resource "backups" in API group "stowage.dev" in the namespace "shop"',
      );
    // The static token still sees all three: the console showed each team its own.
    const all = (await call('/v1/backups')).body.items.map((b: { name: string }) => b.name).sort();
    expect(all).toEqual([alicesBackup, bobsBackup, 'cluster-cm'].sort());
    expect(pageErrors).toEqual([]);
  }, 180_000);
});
