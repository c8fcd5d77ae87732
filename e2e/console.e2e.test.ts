/*
 * The web console (/ui) in a real headless Chromium (Debian's, through playwright-core) against a
 * real stack in this process: redis-server, the simulator with the demo cluster, the API, the
 * worker queues and a node agent per node (see services/api/test/console-stack.ts).
 */
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleStack, launchChromium, startConsoleStack } from '../services/api/test/console-stack.js';

const OUTPUT_DIR = fileURLToPath(new URL('../test-output/console/', import.meta.url));
const CANARY = 'canary-before-login';

/** Spec hooks on every pod of both namespaces (postgres keeps its own annotation hooks). */
const HOOKS_SPEC = {
  hooks: {
    resources: [
      {
        name: 'quiesce',
        includedNamespaces: ['shop', 'media'],
        pre: [{ exec: { command: ['/bin/sync'] } }],
        post: [{ exec: { command: ['/bin/echo', 'resumed'] } }],
      },
    ],
    // Backup-level hooks: once before the first block, once after every block (in one postgres pod).
    backup: {
      pre: [
        { name: 'pause-shop', namespace: 'shop', labelSelector: { matchLabels: { app: 'postgres' } }, mode: 'one', command: ['/bin/sync'] },
      ],
      post: [
        {
          name: 'resume-shop',
          namespace: 'shop',
          labelSelector: { matchLabels: { app: 'postgres' } },
          mode: 'one',
          command: ['/bin/echo', 'resumed'],
        },
      ],
    },
  },
};

interface Geometry {
  backup?: string;
  phase?: string;
  pxPerMs: number;
  pvbBars: Array<{ blockId: string; pvb: string; node: string; x0: number; x1: number; phase: string; running: boolean }>;
  preHookMarks: Array<{ blockId: string; pod: string; x: number }>;
  itemMarks: Array<{ blockId: string; x: number }>;
  postHookMarks: Array<{ blockId: string; pod: string; x: number }>;
}

interface BlockJson {
  id: string;
  podVolumeBackups: Array<{ name: string; phase: string; startTimestamp?: string; completionTimestamp?: string }>;
  hookRuns: Array<{ phase: 'pre' | 'post'; pod: string; startedAt?: string; exitCode?: number }>;
}

let stack: ConsoleStack;
let browser: { context: BrowserContext; close: () => Promise<void> };

const rest = async (path: string, init: RequestInit = {}) => {
  const res = await fetch(`${stack.apiUrl}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json', ...(init.headers ?? {}) },
  });
  if (!res.ok) throw new Error(`${init.method ?? 'GET'} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
};

beforeAll(async () => {
  // ~1 MB/s per node agent: the demo's volumes take a few seconds, long enough to watch live.
  stack = await startConsoleStack({ bandwidthBytesPerSec: 1_000_000 });
  browser = await launchChromium();
  await rest('/v1/backups', { method: 'POST', body: JSON.stringify({ name: CANARY, spec: { includedNamespaces: ['media'] } }) });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
}, 60_000);

/** Every request the page makes, to assert that none leaves the API's origin. */
function recordRequests(page: Page): Array<{ url: string; status?: number }> {
  const seen: Array<{ url: string; status?: number }> = [];
  page.on('request', (req) => {
    seen.push({ url: req.url() });
  });
  page.on('response', (res) => {
    const entry = [...seen].reverse().find((s) => s.url === res.url() && s.status === undefined);
    if (entry) entry.status = res.status();
  });
  return seen;
}

describe('the console in Chromium', () => {
  it('without a token it asks for one and shows nothing else; a wrong token gets the prompt again with a message', async () => {
    await browser.context.clearCookies();
    const page = await browser.context.newPage();
    const requests = recordRequests(page);
    try {
      await page.goto(`${stack.apiUrl}/ui#/backups/${CANARY}`);
      await page.getByLabel('API token').waitFor({ timeout: 15_000 });
      const text = await page.locator('main').textContent();
      expect(text).toContain('Stowage console');
      expect(text).toContain('API token');
      expect(await page.content()).not.toContain(CANARY);
      expect(await page.locator('table, canvas, header, nav').count()).toBe(0);
      expect(requests.filter((r) => r.url.includes('/v1/'))).toEqual([]); // not even tried without a token

      await page.getByLabel('API token').fill('not-the-token-0123456789');
      await page.getByRole('button', { name: 'Open console' }).click();
      const alert = page.getByRole('alert');
      await expect.poll(() => alert.textContent(), { timeout: 10_000 }).toContain('not accepted');
      expect(await page.getByLabel('API token').isVisible()).toBe(true);
      expect(await page.content()).not.toContain(CANARY);
      await mkdir(OUTPUT_DIR, { recursive: true });
      await page.screenshot({ path: `${OUTPUT_DIR}prompt.png` });
      console.log(`console screenshot: ${OUTPUT_DIR}prompt.png`);
      expect(await page.evaluate(() => sessionStorage.getItem('stowage.token'))).toBeNull();

      // No API call succeeded: the only one made was refused, and the API refuses the page without a bearer header.
      const apiCalls = requests.filter((r) => r.url.includes('/v1/'));
      expect(apiCalls.length).toBeGreaterThan(0);
      expect(apiCalls.every((r) => r.status === 401)).toBe(true);
      const statuses = await page.evaluate(async (name) => {
        const paths = ['/v1/backups', `/v1/backups/${name}`, '/admin/queues', '/docs/json'];
        return Promise.all(paths.map(async (p) => (await fetch(p)).status));
      }, CANARY);
      expect(statuses).toEqual([401, 401, 401, 401]);
      expect(requests.every((r) => r.url.startsWith(stack.apiUrl))).toBe(true);
    } finally {
      await page.close();
    }
  }, 60_000);

  it('with a token: starts a backup, follows it live to Completed, and every post hook lies after its PVBs on the timeline', async () => {
    const page = await browser.context.newPage();
    const requests = recordRequests(page);
    const pageErrors: string[] = [];
    page.on('pageerror', (err) => pageErrors.push(err.message));
    try {
      // A paused schedule (it starts nothing) to see in the schedules list.
      await rest('/v1/schedules', {
        method: 'POST',
        body: JSON.stringify({ name: 'nightly', spec: { schedule: '0 3 * * *', template: {}, paused: true } }),
      });
      await page.goto(`${stack.apiUrl}/ui`);
      await page.getByLabel('API token').fill(stack.token);
      await page.getByRole('button', { name: 'Open console' }).click();
      await page.getByRole('heading', { name: 'Backups' }).waitFor({ timeout: 15_000 });
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Schedules' }).click();
      const scheduleRow = page.locator('table.schedules tbody tr', { hasText: 'nightly' });
      await scheduleRow.waitFor({ timeout: 10_000 });
      expect(await scheduleRow.locator('td').allTextContents()).toEqual([
        '0 3 * * *',
        'paused',
        '–',
        '–',
        '0',
        'Resume Back up now Delete',
      ]);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Backups' }).click();
      await page.getByRole('link', { name: CANARY }).waitFor({ timeout: 10_000 });
      await page.locator('tbody tr', { hasText: 'Completed' }).first().waitFor({ timeout: 30_000 });
      await mkdir(OUTPUT_DIR, { recursive: true });
      await page.screenshot({ path: `${OUTPUT_DIR}backups-list.png` });
      console.log(`console screenshot: ${OUTPUT_DIR}backups-list.png`);

      // The session cookie now opens the dashboard and the docs for this browser (GET only), never the API.
      // (Asked from a second tab, so these deliberate refusals stay out of this page's request log.)
      const probe = await browser.context.newPage();
      try {
        await probe.goto(`${stack.apiUrl}/ui/favicon.svg`);
        const withCookie = await probe.evaluate(async () => {
          const get = async (p: string, init?: RequestInit) => (await fetch(p, init)).status;
          return {
            board: await get('/admin/queues/api/queues'),
            docs: await get('/docs/json'),
            api: await get('/v1/backups'),
            write: await get('/admin/queues/api/queues/backups/clean/completed', { method: 'PUT' }),
          };
        });
        expect(withCookie).toEqual({ board: 200, docs: 200, api: 401, write: 401 });
      } finally {
        await probe.close();
      }

      // Start a backup from the form.
      await page.locator('summary', { hasText: 'New backup' }).click();
      await page.getByLabel('Name', { exact: true }).fill('console-e2e');
      await page.getByLabel('Included namespaces').fill('shop, media');
      await page.getByLabel('More spec fields (JSON, optional)').fill(JSON.stringify(HOOKS_SPEC));
      // Record every phase the page shows, from the moment the backup page renders.
      await page.evaluate(() => {
        const w = window as unknown as { __phases: string[]; __live: boolean; __sameDocument: boolean };
        w.__phases = [];
        w.__live = false;
        w.__sameDocument = true;
        new MutationObserver(() => {
          const phase = document.querySelector('.phase-slot')?.textContent ?? '';
          if (phase && w.__phases.at(-1) !== phase) w.__phases.push(phase);
          if (document.querySelector('.live-status')?.textContent?.includes('live')) w.__live = true;
        }).observe(document.body, { subtree: true, childList: true, characterData: true });
      });
      await page.getByRole('button', { name: 'Start backup' }).click();
      await page.waitForURL(/#\/backups\/console-e2e$/, { timeout: 10_000 });
      await page.getByRole('heading', { name: 'console-e2e' }).waitFor();

      await page.locator('.phase-slot', { hasText: 'Completed' }).waitFor({ timeout: 120_000 });
      const seen = await page.evaluate(() => {
        const w = window as unknown as { __phases: string[]; __live: boolean; __sameDocument?: boolean };
        return { phases: w.__phases, live: w.__live, sameDocument: w.__sameDocument === true };
      });
      expect(seen.sameDocument).toBe(true); // never reloaded: the page followed the backup by itself
      expect(seen.live).toBe(true);
      expect(seen.phases[0]).not.toBe('Completed');
      expect(seen.phases).toContain('InProgress');
      expect(seen.phases.at(-1)).toBe('Completed');

      // The backup-level hooks, each with its run.
      const backupHooks = await page.locator('#backup-hooks').textContent();
      expect(backupHooks).toMatch(/Before the first block.*pause-shop shop\/postgres-0 \(postgres\) exit 0/s);
      expect(backupHooks).toMatch(/After every block.*resume-shop shop\/postgres-0 \(postgres\) exit 0/s);

      // The spec, with durations as a Velero user writes them.
      await page.getByText('Spec', { exact: true }).click();
      const specShown = await page.locator('#backup-spec').textContent();
      expect(specShown).toContain('"fsBackupTimeout": "4h0m0s"');
      expect(specShown).toContain('"ttl": "720h0m0s"');
      expect(specShown).not.toContain('Ms"');

      // The timeline, once it has drawn the final state of every block.
      const blocks = ((await rest('/v1/backups/console-e2e/blocks?limit=1000')) as { items: BlockJson[] }).items;
      const pvbCount = blocks.reduce((n, b) => n + b.podVolumeBackups.length, 0);
      const postCount = blocks.reduce((n, b) => n + b.hookRuns.filter((r) => r.phase === 'post').length, 0);
      const preCount = blocks.reduce((n, b) => n + b.hookRuns.filter((r) => r.phase === 'pre').length, 0);
      expect(pvbCount).toBeGreaterThanOrEqual(4);
      expect(postCount).toBeGreaterThanOrEqual(4);
      await page.waitForFunction(
        ({ pvbs, posts }) => {
          const t = (window as unknown as { __stowageTimeline?: Geometry }).__stowageTimeline;
          return (
            t?.phase === 'Completed' &&
            t.pvbBars.length === pvbs &&
            t.pvbBars.every((b) => !b.running && b.phase === 'Completed') &&
            t.postHookMarks.length === posts
          );
        },
        { pvbs: pvbCount, posts: postCount },
        { timeout: 20_000 },
      );
      const geometry = (await page.evaluate(() => (window as unknown as { __stowageTimeline: Geometry }).__stowageTimeline)) as Geometry;
      expect(geometry.preHookMarks).toHaveLength(preCount);

      // Every post-hook mark lies after the end of its block's PVB bars; every pre hook before their start.
      let blocksWithBarsAndPostHooks = 0;
      for (const mark of geometry.postHookMarks) {
        const bars = geometry.pvbBars.filter((b) => b.blockId === mark.blockId);
        if (bars.length > 0) blocksWithBarsAndPostHooks++;
        for (const bar of bars) expect(mark.x, `post hook of ${mark.pod} vs ${bar.pvb}`).toBeGreaterThanOrEqual(bar.x1);
      }
      expect(blocksWithBarsAndPostHooks).toBeGreaterThanOrEqual(3);
      for (const mark of geometry.preHookMarks) {
        for (const bar of geometry.pvbBars.filter((b) => b.blockId === mark.blockId)) {
          expect(mark.x, `pre hook of ${mark.pod} vs ${bar.pvb}`).toBeLessThanOrEqual(bar.x0);
        }
      }
      // The geometry is the data: a bar's length is its PVB's duration on the drawn scale.
      const byName = new Map(blocks.flatMap((b) => b.podVolumeBackups.map((p) => [p.name, p] as const)));
      for (const bar of geometry.pvbBars) {
        const pvb = byName.get(bar.pvb)!;
        const ms = Date.parse(pvb.completionTimestamp!) - Date.parse(pvb.startTimestamp!);
        expect(Math.abs((bar.x1 - bar.x0) / geometry.pxPerMs - ms)).toBeLessThan(2);
      }

      // Keyboard: focus the timeline, step to an item, Enter shows its block in the table.
      await page.locator('canvas.timeline-canvas').focus();
      await page.keyboard.press('ArrowRight');
      await expect.poll(() => page.locator('#timeline-focus-text').textContent()).toMatch(/Block /);
      await page.keyboard.press('Enter');
      await page.locator('#blocks-table tr.highlight').waitFor({ timeout: 5_000 });
      expect(await page.locator('#blocks-table').textContent()).toContain('exit 0');

      await mkdir(OUTPUT_DIR, { recursive: true });
      await page.locator('canvas.timeline-canvas').blur();
      await page.evaluate(() => window.scrollTo(0, 0));
      const light = `${OUTPUT_DIR}backup-light.png`;
      await page.screenshot({ path: light, fullPage: true });
      await page.emulateMedia({ colorScheme: 'dark' });
      await page.waitForTimeout(300); // one animation frame to redraw the canvas in dark colours
      const dark = `${OUTPUT_DIR}backup-dark.png`;
      await page.screenshot({ path: dark, fullPage: true });
      console.log(`console screenshots: ${light} ${dark}`);

      expect(pageErrors).toEqual([]);
      // Nothing left this origin: no CDN, no fonts, no telemetry.
      expect(requests.filter((r) => !r.url.startsWith(stack.apiUrl))).toEqual([]);
      expect(requests.filter((r) => r.url.includes('/v1/') && r.status !== undefined && r.status >= 400)).toEqual([]);
    } finally {
      await page.close();
    }
  }, 180_000);
  it('at 2,000 blocks the timeline stays one canvas and the table shows one page of rows', async () => {
    const page = await browser.context.newPage();
    const pageErrors: string[] = [];
    page.on('pageerror', (err) => pageErrors.push(err.message));
    try {
      await page.goto(`${stack.apiUrl}/ui`);
      await page.getByLabel('API token').waitFor();
      // The console's own modules, fed 2,000 synthetic blocks on 3 nodes (no API involved).
      // A string, so the test runner's transform leaves this import() alone: the browser loads the modules.
      await page.evaluate(
        "Promise.all([import('/ui/timeline.js'), import('/ui/blocks-table.js')]).then(([t, b]) => { window.__consoleModules = { ...t, ...b }; })",
      );
      const result = await page.evaluate(async () => {
        type Mount = (box: HTMLElement) => { update: (...args: unknown[]) => void };
        type Modules = { createTimeline: Mount; createBlocksTable: Mount };
        const { createTimeline, createBlocksTable } = (window as unknown as { __consoleModules: Modules }).__consoleModules;
        const t0 = Date.parse('2030-01-01T00:00:00Z');
        const iso = (ms: number) => new Date(t0 + ms).toISOString();
        const blocks = Array.from({ length: 2000 }, (_, i) => {
          const node = `node-${i % 3}`;
          const start = Math.floor(i / 3) * 100;
          const pod = `ns/pod-${i}`;
          return {
            id: `blk-${i}`,
            state: 'Done',
            pods: [pod],
            itemCount: 3,
            itemsWritten: 3,
            startedAt: iso(start),
            itemsDoneAt: iso(start + 20),
            completedAt: iso(start + 130),
            podVolumeBackups: [
              {
                name: `pvb-${i}`,
                pod,
                node,
                volume: 'data',
                phase: 'Completed',
                totalBytes: 4096,
                bytesDone: 4096,
                startTimestamp: iso(start + 25),
                completionTimestamp: iso(start + 110),
              },
            ],
            hookRuns: [
              {
                pod,
                container: 'c',
                phase: 'pre',
                source: 'annotation',
                command: ['/bin/true'],
                outcome: 'exited',
                exitCode: 0,
                startedAt: iso(start),
                endedAt: iso(start + 10),
                durationMs: 10,
              },
              {
                pod,
                container: 'c',
                phase: 'post',
                source: 'annotation',
                command: ['/bin/true'],
                outcome: 'exited',
                exitCode: 0,
                startedAt: iso(start + 115),
                endedAt: iso(start + 125),
                durationMs: 10,
              },
            ],
          };
        });
        const backup = { name: 'synthetic', phase: 'Completed', createdAt: iso(0), startedAt: iso(0), completedAt: iso(67_000) };
        document.body.replaceChildren();
        const timelineBox = document.createElement('div');
        const tableBox = document.createElement('div');
        document.body.append(timelineBox, tableBox);
        const timeline = createTimeline(timelineBox);
        const table = createBlocksTable(tableBox);
        // Many updates in a row, as a burst of events would cause: drawn in one frame, not each.
        for (let k = 0; k < 50; k++) timeline.update(backup, blocks);
        table.update(blocks, blocks.length);
        await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
        const g = (window as unknown as { __stowageTimeline: Geometry }).__stowageTimeline;
        const late = g.postHookMarks.filter((m) => {
          const bar = g.pvbBars.find((b) => b.blockId === m.blockId);
          return bar !== undefined && m.x < bar.x1;
        }).length;
        return {
          timelineNodes: timelineBox.querySelectorAll('*').length,
          canvases: timelineBox.querySelectorAll('canvas').length,
          rows: tableBox.querySelectorAll('tbody tr').length,
          bars: g.pvbBars.length,
          posts: g.postHookMarks.length,
          lanes: (g as unknown as { lanes: unknown[] }).lanes.length,
          late,
          pageInfo: tableBox.querySelector('.page-info')?.textContent,
        };
      });
      expect(result.canvases).toBe(1);
      expect(result.timelineNodes).toBeLessThan(40);
      expect(result.rows).toBe(25);
      expect(result.pageInfo).toBe('Page 1 of 80');
      expect(result).toMatchObject({ bars: 2000, posts: 2000, lanes: 3, late: 0 });
      expect(pageErrors).toEqual([]);
    } finally {
      await page.close();
    }
  }, 60_000);
});
