/*
 * The console acts, in a real headless Chromium against a real stack in this process
 * (services/api/test/console-stack.ts: redis-server, the simulator with the demo cluster, the API,
 * the worker queues and a node agent per node). Everything below is done by clicking and typing
 * in the page; the test reads the API and the cluster only to check what happened:
 * - a backup started from the console completes, and is restored from its page into another
 *   namespace (namespace mapping; an "update" restore asks first);
 * - a schedule created on the schedules page runs; it pauses, resumes and is deleted (confirmed);
 * - a backup is canceled and deleted, each confirmed, "Keep it" changing nothing;
 * - a bad value shows the API's own message next to its field, in each form.
 */
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKubeClients, type KubeClients } from '../packages/kube/src/index.js';
import { type ConsoleStack, launchChromium, startConsoleStack } from '../services/api/test/console-stack.js';

const OUTPUT_DIR = fileURLToPath(new URL('../test-output/console/', import.meta.url));

let stack: ConsoleStack;
let kube: KubeClients;
let browser: { context: BrowserContext; close: () => Promise<void> };
let page: Page;
const pageErrors: string[] = [];

/** The API as the test (not the page) sees it. */
async function api(path: string, init: { method?: string; body?: unknown } = {}) {
  const res = await fetch(`${stack.apiUrl}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {} };
}

/** The problems the API reports for a request: path → its messages. */
async function problemsOf(path: string, body: unknown): Promise<Record<string, string[]>> {
  const res = await api(path, { method: 'POST', body });
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  const byPath: Record<string, string[]> = {};
  for (const p of res.body.error.problems as Array<{ path: string; message: string }>)
    byPath[p.path] = [...(byPath[p.path] ?? []), p.message];
  return byPath;
}

/** What a field shows for the API's problems at `path` (the part below the field's own path first). */
const shown = (messages: string[] | undefined, below = '') =>
  (messages ?? ['(none)']).map((m) => (below ? `${below}: ${m}` : m)).join('; ');

/**
 * How long the page may take to show the answer to what it just sent (a POST, a list read): the
 * bound of expect.poll, whose own default (1 s) a loaded machine's round trip can exceed.
 */
const SHOWN = { timeout: 30_000 };

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Waits for the page to show `phase`; if it never does, fails with what the page and the API say of the run. */
async function pageShowsPhase(phase: string, apiPath: string, timeoutMs: number) {
  try {
    await page.locator('.phase-slot', { hasText: phase }).waitFor({ timeout: timeoutMs });
  } catch (err) {
    const run = await api(apiPath);
    const shows = await page
      .locator('.page-head')
      .textContent({ timeout: 5_000 })
      .catch(() => '(no page head)');
    throw new Error(`${apiPath} never showed ${phase}; the page shows "${shows}"; the API: ${JSON.stringify(run.body).slice(0, 6000)}`, {
      cause: err,
    });
  }
}

beforeAll(async () => {
  stack = await startConsoleStack();
  kube = createKubeClients({ kubeconfigPath: stack.sim.kubeconfigPath });
  browser = await launchChromium();
  page = await browser.context.newPage();
  page.on('pageerror', (err) => pageErrors.push(err.message));
  await page.goto(`${stack.apiUrl}/ui`);
  await page.getByLabel('API token').fill(stack.token);
  await page.getByRole('button', { name: 'Open console' }).click();
  await page.getByRole('heading', { name: 'Backups' }).waitFor({ timeout: 15_000 });
}, 120_000);

afterAll(async () => {
  await page?.close().catch(() => undefined);
  await browser?.close();
  await stack?.close();
}, 60_000);

describe('the console acts', () => {
  it('a backup started from the console completes and is restored from its page into another namespace', async () => {
    await page.locator('summary', { hasText: 'New backup' }).click();
    const form = page.getByRole('form', { name: 'New backup' });

    // A bad namespace and a bad TTL: the API's messages, each by its field; nothing created.
    const expected = await problemsOf('/v1/backups', {
      name: 'ui-backup',
      spec: { defaultVolumesToFsBackup: true, includedNamespaces: ['Not_A_Namespace'], ttl: 'soon' },
    });
    await form.getByLabel('Name', { exact: true }).fill('ui-backup');
    await form.getByLabel('Included namespaces').fill('Not_A_Namespace');
    await form.getByLabel('Keep for (TTL)').fill('soon');
    await form.getByRole('button', { name: 'Start backup' }).click();
    await expect.poll(() => page.locator('#nb-ttl-error').textContent(), SHOWN).toBe(shown(expected['spec.ttl']));
    expect(await page.locator('#nb-ns-error').textContent()).toBe(shown(expected['spec.includedNamespaces[0]'], '[0]'));
    expect(await form.getByLabel('Keep for (TTL)').getAttribute('aria-invalid')).toBe('true');
    expect(await page.locator('#nb-name-error').textContent()).toBe('');
    expect((await api('/v1/backups/ui-backup')).status).toBe(404);
    await mkdir(OUTPUT_DIR, { recursive: true });
    await page.screenshot({ path: `${OUTPUT_DIR}new-backup-problems.png` });

    await form.getByLabel('Included namespaces').fill('shop');
    await form.getByLabel('Keep for (TTL)').fill('24h');
    await form.getByRole('button', { name: 'Start backup' }).click();
    await page.waitForURL(/#\/backups\/ui-backup$/, { timeout: 10_000 });
    await pageShowsPhase('Completed', '/v1/backups/ui-backup', 180_000);
    expect((await api('/v1/backups/ui-backup')).body).toMatchObject({ phase: 'Completed', spec: { ttl: '24h0m0s' } });

    // The restore form, on the backup's page.
    const restore = page.getByRole('form', { name: 'Restore ui-backup' });
    await restore.waitFor({ timeout: 10_000 });
    // A target namespace the API refuses: its message by the mapping field.
    const badMapping = await problemsOf('/v1/restores', {
      name: 'ui-restore',
      spec: { backupName: 'ui-backup', existingResourcePolicy: 'none', restorePVs: true, namespaceMapping: { shop: 'Shop_Copy' } },
    });
    await restore.getByLabel('Restore name').fill('ui-restore');
    await restore.getByLabel('Namespace mapping').fill('shop:Shop_Copy');
    await restore.getByRole('button', { name: 'Restore' }).click();
    await expect
      .poll(() => page.locator('#rf-mapping-error').textContent(), SHOWN)
      .toBe(shown(badMapping['spec.namespaceMapping.shop'], 'shop'));
    // The form's own syntax: said before anything is sent.
    await restore.getByLabel('Namespace mapping').fill('shop');
    await restore.getByRole('button', { name: 'Restore' }).click();
    await expect.poll(() => page.locator('#rf-mapping-error').textContent(), SHOWN).toContain('write each mapping as source:target');

    // "update" replaces what exists: asked first; "Keep it" sends nothing.
    await restore.getByLabel('Namespace mapping').fill('shop:shop-copy');
    await restore.getByLabel('Objects that already exist').selectOption('update');
    await restore.getByRole('button', { name: 'Restore' }).click();
    const dialog = page.getByRole('dialog', { name: 'Restore ui-backup over existing objects?' });
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Keep it' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect((await api('/v1/restores/ui-restore')).status).toBe(404);

    await restore.getByLabel('Objects that already exist').selectOption('none');
    await restore.getByRole('button', { name: 'Restore' }).click();
    await page.waitForURL(/#\/restores\/ui-restore$/, { timeout: 10_000 });
    await pageShowsPhase('Completed', '/v1/restores/ui-restore', 180_000);
    const restored = (await api('/v1/restores/ui-restore')).body;
    expect(restored).toMatchObject({
      phase: 'Completed',
      backupName: 'ui-backup',
      spec: { namespaceMapping: { shop: 'shop-copy' }, existingResourcePolicy: 'none' },
    });
    // In the cluster: shop's pods and claims, now in shop-copy; shop itself untouched.
    const [original, copy] = await Promise.all([
      kube.core.listNamespacedPod({ namespace: 'shop' }),
      kube.core.listNamespacedPod({ namespace: 'shop-copy' }),
    ]);
    expect(copy.items.map((p) => p.metadata?.name).sort()).toEqual(original.items.map((p) => p.metadata?.name).sort());
    expect((await kube.core.listNamespacedPersistentVolumeClaim({ namespace: 'shop-copy' })).items.length).toBeGreaterThan(0);
    await page.screenshot({ path: `${OUTPUT_DIR}restore-from-console.png`, fullPage: true });
  }, 420_000);

  it('a schedule created in the console runs; it pauses, resumes and is deleted after a confirmation', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Schedules' }).click();
    await page.getByRole('heading', { name: 'Schedules' }).waitFor();
    await page.locator('summary', { hasText: 'New schedule' }).click();
    const form = page.getByRole('form', { name: 'New schedule' });

    const expected = await problemsOf('/v1/schedules', {
      name: 'ui-schedule',
      spec: { schedule: '0 25 * * *', template: { defaultVolumesToFsBackup: false, includedNamespaces: ['media'] } },
    });
    await form.getByLabel('Name', { exact: true }).fill('ui-schedule');
    await form.getByLabel('Schedule', { exact: true }).fill('0 25 * * *');
    await form.getByLabel('Included namespaces').fill('media');
    await form.getByRole('button', { name: 'Create schedule' }).click();
    await expect.poll(() => page.locator('#ns-schedule-error').textContent(), SHOWN).toBe(shown(expected['spec.schedule']));
    expect((await api('/v1/schedules/ui-schedule')).status).toBe(404);

    // Not paused, not skipImmediately: its first backup starts at once.
    await form.getByLabel('Schedule', { exact: true }).fill('0 3 * * *');
    await form.getByRole('button', { name: 'Create schedule' }).click();
    const row = page.locator('table.schedules tbody tr', { hasText: 'ui-schedule' });
    await row.waitFor({ timeout: 10_000 });
    const first = await until(
      'the schedule’s first backup to complete',
      async () => {
        const s = (await api('/v1/schedules/ui-schedule')).body;
        return s.status?.lastSuccessfulBackup?.name as string | undefined;
      },
      180_000,
    );
    expect(first).toMatch(/^ui-schedule-\d{14}$/);
    expect((await api(`/v1/backups/${first}`)).body).toMatchObject({
      phase: 'Completed',
      labels: { 'stowage.dev/schedule-name': 'ui-schedule' },
    });
    await expect.poll(() => row.locator('td').nth(2).textContent(), SHOWN).toBe(first);
    expect(await row.locator('td').nth(1).textContent()).toBe('enabled');

    await row.getByRole('button', { name: 'Pause' }).click();
    await expect.poll(() => row.locator('td').nth(1).textContent(), SHOWN).toBe('paused');
    expect((await api('/v1/schedules/ui-schedule')).body.spec.paused).toBe(true);
    await row.getByRole('button', { name: 'Resume' }).click();
    await expect.poll(() => row.locator('td').nth(1).textContent(), SHOWN).toBe('enabled');
    expect((await api('/v1/schedules/ui-schedule')).body.status.nextRunAt).toBeDefined();

    await row.getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete schedule ui-schedule?' });
    await dialog.getByRole('button', { name: 'Keep it' }).click();
    expect((await api('/v1/schedules/ui-schedule')).status).toBe(200);
    await row.getByRole('button', { name: 'Delete' }).click();
    await dialog.getByRole('button', { name: 'Delete schedule' }).click();
    await row.waitFor({ state: 'detached', timeout: 10_000 });
    expect((await api('/v1/schedules/ui-schedule')).status).toBe(404);
    expect((await api(`/v1/backups/${first}`)).status).toBe(200); // its backups stay
  }, 300_000);

  it('cancels a running backup and deletes it, each after a confirmation', async () => {
    // The postgres pre hook is held until the cancel has been confirmed: the backup is running then.
    stack.sim.setExecBehaviour('shop', 'postgres-0', {
      postgres: { rules: [{ commandContains: 'fsfreeze -f', hold: true }], default: { exitCode: 0, durationMs: 10 } },
    });
    try {
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Backups' }).click();
      await page.locator('summary', { hasText: 'New backup' }).click();
      const form = page.getByRole('form', { name: 'New backup' });
      await form.getByLabel('Name', { exact: true }).fill('ui-cancel');
      await form.getByLabel('Included namespaces').fill('shop');
      await form.getByRole('button', { name: 'Start backup' }).click();
      await page.waitForURL(/#\/backups\/ui-cancel$/, { timeout: 10_000 });
      await until(
        'the held pre hook',
        async () =>
          stack.sim.execLog({ namespace: 'shop', pod: 'postgres-0' }).some((r) => r.command.join(' ').includes('fsfreeze -f') && !r.endedAt)
            ? true
            : undefined,
        60_000,
      );
      const cancel = page.getByRole('button', { name: 'Cancel backup' });
      await cancel.click();
      const dialog = page.getByRole('dialog', { name: 'Cancel backup ui-cancel?' });
      await dialog.getByRole('button', { name: 'Keep it' }).click();
      expect((await api('/v1/backups/ui-cancel')).body.cancelRequestedAt).toBeUndefined();
      await cancel.click();
      await dialog.getByRole('button', { name: 'Cancel backup' }).click();
      await until('the cancel to be recorded', async () => (await api('/v1/backups/ui-cancel')).body.cancelRequestedAt, 10_000);
      expect(stack.sim.releaseExecs('shop', 'postgres-0')).toBe(1);
      await page.locator('.phase-slot', { hasText: 'Canceled' }).waitFor({ timeout: 120_000 });
    } finally {
      stack.sim.setExecBehaviour('shop', 'postgres-0', undefined);
      stack.sim.releaseExecs('shop', 'postgres-0');
    }

    await page.getByRole('button', { name: 'Delete backup' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete backup ui-cancel?' });
    await dialog.getByRole('button', { name: 'Delete backup' }).click();
    await page.waitForURL(/#\/$/, { timeout: 10_000 });
    await until('ui-cancel to be gone', async () => ((await api('/v1/backups/ui-cancel')).status === 404 ? true : undefined), 30_000);
    expect(pageErrors).toEqual([]);
  }, 300_000);
});
