/*
 * The console's restore pages in a real headless Chromium against a real stack in this process
 * (services/api/test/console-stack.ts: redis-server, the simulator with the demo cluster, the API,
 * the worker queues and a node agent per node): back up shop, delete it, restore it, and follow
 * the restore in the browser — its tiers, PVRs, hooks and items in tables, and the same timeline
 * as a backup's with every post-restore hook after its pod's PVRs.
 */
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createKubeClients, type KubeClients } from '../packages/kube/src/index.js';
import { type ConsoleStack, launchChromium, startConsoleStack } from '../services/api/test/console-stack.js';

const OUTPUT_DIR = fileURLToPath(new URL('../test-output/console/', import.meta.url));
const HOOK = ['/bin/sh', '-c', 'echo restored'];

interface Geometry {
  subject: string;
  backup?: string;
  phase?: string;
  pvbBars: Array<{ blockId: string; pvb: string; node: string; x0: number; x1: number; phase: string }>;
  itemMarks: Array<{ blockId: string; x: number }>;
  postHookMarks: Array<{ blockId: string; pod: string; x: number }>;
}

interface RestoreJson {
  phase: string;
  progress: { totalItems: number; itemsRestored: number };
  tiers: Array<{ index: number; groupResources: string[] }>;
  pvrs: Array<{ name: string; pod: string; phase: string }>;
  hookRuns: Array<{ pod: string; outcome: string; exitCode?: number }>;
}

let stack: ConsoleStack;
let kube: KubeClients;
let browser: { context: BrowserContext; close: () => Promise<void> };

const rest = async (path: string, init: RequestInit = {}) => {
  const res = await fetch(`${stack.apiUrl}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json', ...(init.headers ?? {}) },
  });
  if (!res.ok) throw new Error(`${init.method ?? 'GET'} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
};

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

beforeAll(async () => {
  // ~2 MB/s per node agent: the volumes take a few seconds, long enough to watch the restore live.
  stack = await startConsoleStack({ bandwidthBytesPerSec: 2_000_000 });
  kube = createKubeClients({ kubeconfigPath: stack.sim.kubeconfigPath });
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
}, 60_000);

it('a restore followed live in the console: tiers, PVRs, hooks and items, and every hook after its PVRs on the timeline', async () => {
  await rest('/v1/backups', {
    method: 'POST',
    body: JSON.stringify({ name: 'bk-ui', spec: { includedNamespaces: ['shop'], defaultVolumesToFsBackup: true } }),
  });
  await until('backup bk-ui Completed', async () => ((await rest('/v1/backups/bk-ui')).phase === 'Completed' ? true : undefined), 120_000);
  // shop lost with its volumes.
  const claims = await kube.core.listNamespacedPersistentVolumeClaim({ namespace: 'shop' });
  await kube.core.deleteNamespace({ name: 'shop' });
  for (const c of claims.items) {
    if (c.spec?.volumeName) await kube.core.deletePersistentVolume({ name: c.spec.volumeName }).catch(() => undefined);
  }
  await until(
    'shop gone',
    async () => ((await kube.core.readNamespace({ name: 'shop' }).catch(() => undefined)) ? undefined : true),
    30_000,
  );

  const page = await browser.context.newPage();
  const pageErrors: string[] = [];
  const failed: string[] = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));
  page.on('response', (res) => {
    if (res.url().includes('/v1/') && res.status() >= 400) failed.push(`${res.status()} ${res.url()}`);
  });
  try {
    await page.goto(`${stack.apiUrl}/ui`);
    await page.getByLabel('API token').fill(stack.token);
    await page.getByRole('button', { name: 'Open console' }).click();
    await page.getByRole('heading', { name: 'Backups' }).waitFor({ timeout: 15_000 });
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Restores' }).click();
    await page.getByRole('heading', { name: 'Restores' }).waitFor();
    await page.getByText('No restores yet.').waitFor({ timeout: 10_000 });

    await rest('/v1/restores', {
      method: 'POST',
      body: JSON.stringify({
        name: 'rs-ui',
        spec: {
          backupName: 'bk-ui',
          hooks: { resources: [{ name: 'mark', includedNamespaces: ['shop'], postHooks: [{ exec: { command: HOOK } }] }] },
        },
      }),
    });
    const row = page.locator('table.restores tbody tr', { hasText: 'rs-ui' });
    await row.waitFor({ timeout: 15_000 });
    expect(await row.locator('a', { hasText: 'bk-ui' }).getAttribute('href')).toBe('#/backups/bk-ui');
    await row.getByRole('link', { name: 'rs-ui' }).click();
    await page.waitForURL(/#\/restores\/rs-ui$/);
    await page.getByRole('heading', { name: 'rs-ui' }).waitFor();
    await page.evaluate(() => {
      const w = window as unknown as { __phases: string[] };
      // The phase shown now counts too: on a fast run the restore may already be Completed here.
      const shown = document.querySelector('.phase-slot')?.textContent ?? '';
      w.__phases = shown ? [shown] : [];
      new MutationObserver(() => {
        const phase = document.querySelector('.phase-slot')?.textContent ?? '';
        if (phase && w.__phases.at(-1) !== phase) w.__phases.push(phase);
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    await page.locator('.phase-slot', { hasText: 'Completed' }).waitFor({ timeout: 180_000 });
    const phases = await page.evaluate(() => (window as unknown as { __phases: string[] }).__phases);
    expect(phases.at(-1)).toBe('Completed');

    const view = (await rest('/v1/restores/rs-ui')) as RestoreJson;
    expect(view.phase).toBe('Completed');
    expect(view.pvrs.length).toBeGreaterThan(0);
    expect(view.hookRuns.length).toBeGreaterThan(0);
    // The tables: every tier, PVR, hook run and item, as the API has them.
    await expect.poll(async () => page.locator('table.items tbody tr').count(), { timeout: 10_000 }).toBe(view.progress.totalItems);
    const stats = await page.locator('dl.stats').textContent();
    expect(stats).toContain(`${view.progress.totalItems} / ${view.progress.totalItems}`);
    expect(stats).toContain(`${view.progress.totalItems} created`);
    expect(stats).toContain('bk-ui');
    const tierRows = await page.locator('table.tiers tbody tr').allTextContents();
    expect(tierRows.length).toBe(view.tiers.length);
    expect(tierRows[0]).toContain(view.tiers[0]?.groupResources[0]);
    for (const r of tierRows) expect(r).not.toMatch(/–$/); // every tier shows when it was done
    const pvrRows = page.locator('table.pvrs tbody tr');
    expect(await pvrRows.count()).toBe(view.pvrs.length);
    for (const text of await pvrRows.allTextContents()) expect(text).toContain('Completed');
    const hookRows = await page.locator('table.hooks tbody tr').allTextContents();
    expect(hookRows.length).toBe(view.hookRuns.length);
    for (const text of hookRows) expect(text).toContain('exit 0');
    const outcomes = await page.locator('table.items tbody tr td:nth-child(2)').allTextContents();
    expect(new Set(outcomes)).toEqual(new Set(['created']));

    // The timeline: a bar per PVR, a mark per tier and per hook run, every hook after its pod's PVRs.
    const g = await until(
      'the timeline of rs-ui drawn',
      async () => {
        const geo = await page.evaluate(() => (window as unknown as { __stowageTimeline?: Geometry }).__stowageTimeline);
        return geo?.backup === 'rs-ui' && geo.phase === 'Completed' ? geo : undefined;
      },
      10_000,
    );
    expect(g.subject).toBe('Restore');
    expect(g.pvbBars.map((b) => b.pvb).sort()).toEqual(view.pvrs.map((p) => p.name).sort());
    expect(g.itemMarks.length).toBe(view.tiers.length);
    expect(g.postHookMarks.length).toBe(view.hookRuns.length);
    const withVolumes = g.postHookMarks.filter((m) => g.pvbBars.some((b) => b.blockId === m.blockId));
    expect(withVolumes.length).toBe(new Set(view.pvrs.map((p) => p.pod)).size);
    for (const mark of withVolumes) {
      for (const bar of g.pvbBars.filter((b) => b.blockId === mark.blockId)) {
        expect(mark.x, `${mark.pod}: hook after ${bar.pvb}`).toBeGreaterThanOrEqual(bar.x1 - 0.5);
      }
    }
    const legend = await page.locator('.timeline-legend').textContent();
    expect(legend).toContain('PVR Completed');
    expect(legend).toContain('post-restore hook');
    await mkdir(OUTPUT_DIR, { recursive: true });
    await page.screenshot({ path: `${OUTPUT_DIR}restore.png`, fullPage: true });
    console.log(`console screenshot: ${OUTPUT_DIR}restore.png`);

    // Back on the list, the restore is Completed.
    await page.getByRole('link', { name: '← All restores' }).click();
    await page.locator('table.restores tbody tr', { hasText: 'Completed' }).waitFor({ timeout: 10_000 });
    expect(pageErrors).toEqual([]);
    expect(failed).toEqual([]);
  } finally {
    await page.close();
  }
}, 360_000);
