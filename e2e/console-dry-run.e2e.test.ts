/*
 * The console's "Plan (dry run)" on the new-backup form, in a real headless Chromium against the
 * real stack (services/api/test/console-stack.ts: redis-server, the simulator with the demo
 * cluster, the API, workers and node agents): the plan is shown, and nothing was created or run.
 */
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleStack, launchChromium, startConsoleStack } from '../services/api/test/console-stack.js';

const OUTPUT_DIR = fileURLToPath(new URL('../test-output/console/', import.meta.url));

const HOOKS_SPEC = {
  hooks: {
    resources: [
      {
        name: 'quiesce',
        includedNamespaces: ['media'],
        pre: [{ exec: { command: ['/bin/sync'] } }],
        post: [{ exec: { command: ['/bin/echo', 'resumed'] } }],
      },
    ],
  },
};

let stack: ConsoleStack;
let browser: { context: BrowserContext; close: () => Promise<void> };

const rest = async (path: string) => {
  const res = await fetch(`${stack.apiUrl}${path}`, { headers: { authorization: `Bearer ${stack.token}` } });
  if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
  return res.json();
};

beforeAll(async () => {
  stack = await startConsoleStack();
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
}, 60_000);

describe('the console: Plan (dry run)', () => {
  it('shows the plan of the form’s backup (blocks, hooks with their source, volume decisions, estimates) and creates nothing', async () => {
    const page = await browser.context.newPage();
    const pageErrors: string[] = [];
    page.on('pageerror', (err) => pageErrors.push(err.message));
    try {
      await page.goto(`${stack.apiUrl}/ui`);
      await page.getByLabel('API token').fill(stack.token);
      await page.getByRole('button', { name: 'Open console' }).click();
      await page.getByRole('heading', { name: 'Backups' }).waitFor({ timeout: 15_000 });
      const execsBefore = stack.sim.execLog().length;
      const before = stack.sim.requests();

      await page.locator('summary', { hasText: 'New backup' }).click();
      await page.getByLabel('Name', { exact: true }).fill('console-plan');
      await page.getByLabel('Included namespaces').fill('shop, media');
      await page.getByLabel('More spec fields (JSON, optional)').fill(JSON.stringify(HOOKS_SPEC));
      await page.getByRole('button', { name: 'Plan (dry run)' }).click();

      const plan = page.getByRole('region', { name: 'Plan (dry run)' });
      await plan.waitFor({ timeout: 30_000 });
      const text = (await plan.textContent()) ?? '';
      expect(text).toContain('Plan (dry run) of "console-plan"');
      expect(text).toContain('Nothing was created, stored or executed.');
      expect(text).toMatch(/\d+ ItemBlocks, \d+ items, 8 pods; hooks: 3 pre, 3 post/);
      // Hooks per pod and phase, with their source.
      const postgres = plan.locator('li.plan-pod', { hasText: 'pod shop/postgres-0 on node-a' });
      expect(await postgres.locator('li.plan-hook[data-phase="pre"]').textContent()).toContain('(annotation) in postgres: /bin/sh -c psql');
      const uploader = plan.locator('li.plan-pod', { hasText: 'pod media/uploader' });
      expect(await uploader.locator('li.plan-hook[data-phase="pre"]').textContent()).toContain('(spec hook quiesce)');
      expect(await uploader.locator('li.plan-hook[data-phase="post"]').textContent()).toContain('/bin/echo resumed');
      // Every volume's decision with its reason.
      const row = (pod: string, volume: string) =>
        plan.locator('table.plan-volumes tbody tr', { has: page.locator('td', { hasText: pod }) }).filter({ hasText: volume });
      expect(await row('shop/postgres-0', 'data').locator('td').allTextContents()).toEqual([
        'shop/postgres-0',
        'data PVC data-postgres-0',
        'fs-backup',
        '~10.0 GiB (pvc-request)',
        expect.any(String),
      ]);
      expect(await row('shop/reporter', 'scratch').getAttribute('data-decision')).toBe('skip');
      // Estimated bytes per node, labelled an estimate.
      expect(text).toContain('An estimate:');
      const nodeA = plan.locator('table.plan-estimate tbody tr', { hasText: 'node-a' });
      expect(await nodeA.locator('td').nth(2).textContent()).toBe('~10.0 GiB');

      await mkdir(OUTPUT_DIR, { recursive: true });
      await page.screenshot({ path: `${OUTPUT_DIR}dry-run-plan.png`, fullPage: true });
      console.log(`console screenshot: ${OUTPUT_DIR}dry-run-plan.png`);

      // Nothing was created or run: no backup, no exec, no write to the cluster.
      expect(((await rest('/v1/backups')) as { items: unknown[] }).items).toEqual([]);
      expect(stack.sim.execLog().length).toBe(execsBefore);
      const after = stack.sim.requests();
      for (const verb of ['create', 'update', 'patch', 'delete']) expect(after.byVerb[verb] ?? 0).toBe(before.byVerb[verb] ?? 0);
      expect(page.url()).not.toContain('#/backups/'); // still on the list: no backup page to go to

      // A bad spec gets the API's 400: its message shows by the field it names, the alert points there.
      await page.getByLabel('More spec fields (JSON, optional)').fill('{"includedNamespaces": "shop"}');
      await page.getByLabel('Included namespaces').fill('');
      await page.getByRole('button', { name: 'Plan (dry run)' }).click();
      const fieldError = page.locator('#nb-ns-error');
      await expect.poll(() => fieldError.textContent(), { timeout: 15_000 }).not.toBe('');
      expect(await page.getByLabel('Included namespaces').getAttribute('aria-invalid')).toBe('true');
      expect(await page.locator('form.new-backup [role="alert"]').textContent()).toContain('Not accepted');
      expect(pageErrors).toEqual([]);
    } finally {
      await page.close();
    }
  }, 120_000);
});
