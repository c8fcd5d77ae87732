/*
 * Schedules and TTL through real processes: TWO api processes (each hosts the backups queue and
 * reconciles the schedules), one worker, in-process node agents, the simulator and a private
 * redis-server. A seconds-level cron must give exactly one backup per tick, named after the tick
 * (or, while the previous backup still runs, a skip recorded with why); pause/unpause and delete
 * take effect; a backup whose TTL runs out is deleted with its data.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pvbLabels } from '../packages/kube/src/index.js';
import { PruneStatusStore, statePrefixFor } from '../packages/pipeline/src/index.js';
import { createLogger } from '../packages/platform/src/index.js';
import { createQueue, JobName, QueueName } from '../packages/queue/src/index.js';
import { Repository } from '../packages/repository/src/index.js';
import type { NodeAgent } from '../services/node-agent/src/index.js';
import { configMap, namespace, node, pod } from './reliability/support/fixtures.js';
import {
  apiClient,
  type ServiceProcess,
  type Stack,
  startAgents,
  startStack,
  waitFor,
  waitForBackupEnd,
} from './reliability/support/stack.js';

const fixture = {
  objects: [
    namespace('app'),
    namespace('shop'),
    namespace('stowage'),
    namespace('vault'),
    node('node-a'),
    configMap('settings', 'app'),
    // A volume copied at 1 MiB/s: a backup of `shop` runs for several seconds.
    pod({ name: 'db-0', namespace: 'shop', node: 'node-a', volumes: [{ name: 'data', mib: 6 }] }),
    // Backed up by the deletion test only: its first backup reads every byte (no parent snapshot to
    // reuse unchanged files from), so it is still copying when the deletion is requested.
    pod({ name: 'vault-0', namespace: 'vault', node: 'node-a', volumes: [{ name: 'data', mib: 6 }] }),
  ],
};

let stack: Stack;
/** As shipped, the backup workers get the repository key, never the api: a deletion (on the workers' repository queue) forgets its snapshots and runs prune (default grace). */
const REPO_ENV = () => ({ STOWAGE_REPO_KEY: stack.repoKey });
const apis: ServiceProcess[] = [];
const agents: NodeAgent[] = [];
let client: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack({ fixture });
  agents.push(
    ...(await startAgents(stack, ['node-a'], {
      loadConcurrency: { globalConfig: 1 },
      bandwidthBytesPerSec: 1024 * 1024,
      logger: createLogger({ level: 'warn', name: 'schedule-agents' }),
    })),
  );
  apis.push(
    ...(await Promise.all([stack.spawn('api', 'api-1'), stack.spawn('api', 'api-2'), stack.spawn('worker', 'worker-1', REPO_ENV())])).slice(
      0,
      2,
    ),
  );
  // Requests alternate between the two api processes: both serve schedules from the same state.
  let turn = 0;
  client = apiClient(stack, () => apis[turn++ % apis.length] as ServiceProcess);
}, 180_000);

afterAll(async () => {
  await Promise.allSettled(agents.map((a) => a.stop()));
  await stack?.close();
});

/** Backups in the catalogue whose name starts with `<schedule>-`, oldest first. */
async function backupsOf(schedule: string): Promise<Array<{ name: string; createdAt: number }>> {
  const page = await stack.state.listBackups({ limit: 1000 });
  return page.items
    .filter((b) => new RegExp(`^${schedule}-\\d{14}$`).test(b.name))
    .map((b) => ({ name: b.name, createdAt: b.createdAt }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

const tickOf = (backup: string) => {
  const s = backup.slice(-14);
  return Date.UTC(+s.slice(0, 4), +s.slice(4, 6) - 1, +s.slice(6, 8), +s.slice(8, 10), +s.slice(10, 12), +s.slice(12, 14));
};

/** `YYYYMMDDHHMMSS` (UTC) of a tick, as a scheduled backup's name ends. */
const scheduledTick = (ms: number) => new Date(ms).toISOString().replace(/\D/g, '').slice(0, 14);
const STILL_RUNNING = /^the previous backup every2s-\d{14} of this schedule is still (New|InProgress|Finalizing)$/;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('schedules with two api processes', () => {
  it('runs one backup per tick, named after the tick, on time; pause, unpause and delete take effect', async () => {
    const created = await client.call('POST', '/v1/schedules', {
      name: 'every2s',
      spec: { schedule: '*/2 * * * * *', template: { includedNamespaces: ['app'] }, skipImmediately: true },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ name: 'every2s', status: { phase: 'Enabled', skipped: 0 } });

    const ticks = await waitFor(
      'four scheduled backups',
      async () => {
        const found = await backupsOf('every2s');
        return found.length >= 4 ? found : undefined;
      },
      30_000,
    );
    // Ticks of */2, none doubled: each backup is a later tick than the one before, two seconds apart
    // or a multiple of that.
    const times = ticks.map((b) => tickOf(b.name));
    for (let i = 1; i < times.length; i++) expect(((times[i] as number) - (times[i - 1] as number)) % 2_000, ticks[i]?.name).toBe(0);
    for (let i = 1; i < times.length; i++) expect(times[i] as number, ticks[i]?.name).toBeGreaterThan(times[i - 1] as number);
    // None missing: every tick from the first backup's to the last one's ran one run-schedule job
    // (whichever api process), which started the tick's backup or — only while the previous backup
    // still ran (a backup of `app` can take over two seconds on a loaded machine) — skipped the
    // tick and said why.
    const backupsQueue = createQueue(QueueName.backups, { connection: stack.redis, prefix: stack.queuePrefix });
    try {
      const first = times[0] as number;
      const last = times[times.length - 1] as number;
      const outcomes = await waitFor('a finished run-schedule job for every tick of the four backups', async () => {
        const byTick = new Map<number, Array<{ outcome: string; backup?: string; reason?: string }>>();
        for (const job of await backupsQueue.getJobs(['completed'], 0, -1)) {
          const result = job.returnvalue as { outcome: string; backup?: string; reason?: string } | null;
          if (job.name !== JobName.runSchedule || !result?.backup?.startsWith('every2s-')) continue;
          const tick = tickOf(result.backup);
          byTick.set(tick, [...(byTick.get(tick) ?? []), result]);
        }
        for (let t = first; t <= last; t += 2_000) if (!byTick.has(t)) return undefined;
        return byTick;
      });
      for (let t = first; t <= last; t += 2_000) {
        const name = ticks.find((b) => tickOf(b.name) === t)?.name;
        const ran = outcomes.get(t) ?? [];
        expect(ran, `tick ${new Date(t).toISOString()}`).toHaveLength(1);
        if (name) expect(ran[0]).toEqual({ outcome: 'started', backup: name });
        else
          expect(ran[0]).toEqual({
            outcome: 'skipped',
            backup: `every2s-${scheduledTick(t)}`,
            reason: expect.stringMatching(STILL_RUNNING),
          });
      }
    } finally {
      await backupsQueue.close();
    }
    // On time: each backup was recorded within a second and a half of its tick.
    for (const b of ticks) expect(b.createdAt - tickOf(b.name)).toBeLessThan(1_500);
    for (const b of ticks.slice(0, 3)) expect((await waitForBackupEnd(stack.state, b.name)).phase).toBe('Completed');

    // Exactly one run-schedule job per tick, whichever api process ran it: none found its backup already made.
    const backups = createQueue(QueueName.backups, { connection: stack.redis, prefix: stack.queuePrefix });
    try {
      const runs = (await backups.getJobs(['completed'], 0, -1)).filter((j) => j.name === JobName.runSchedule);
      const outcomes = runs.map((j) => (j.returnvalue as { outcome: string; backup?: string }).outcome);
      expect(outcomes.filter((o) => o === 'exists')).toEqual([]);
      const started = runs.map((j) => (j.returnvalue as { backup?: string }).backup);
      expect(new Set(started).size).toBe(started.length);
    } finally {
      await backups.close();
    }

    const shown = await client.call('GET', '/v1/schedules/every2s');
    const status = shown.body.status as { lastBackup?: { name: string }; lastSuccessfulBackup?: { name: string }; nextRunAt?: string };
    expect(status.lastBackup?.name).toMatch(/^every2s-\d{14}$/);
    expect(status.lastSuccessfulBackup?.name).toMatch(/^every2s-\d{14}$/);
    expect(Date.parse(status.nextRunAt ?? '') % 2_000).toBe(0);

    // Pause: no tick runs (wait past a few); nextRunAt is gone.
    const paused = await client.call('PATCH', '/v1/schedules/every2s', { spec: { paused: true } });
    expect(paused.status).toBe(200);
    expect((paused.body.status as { nextRunAt?: string }).nextRunAt).toBeUndefined();
    await sleep(1_000); // a tick already started when the pause landed may still finish
    const atPause = (await backupsOf('every2s')).length;
    await sleep(5_000);
    expect((await backupsOf('every2s')).length).toBe(atPause);

    // Unpause (skipImmediately is still set): ticks resume.
    expect((await client.call('PATCH', '/v1/schedules/every2s', { spec: { paused: false } })).status).toBe(200);
    await waitFor('a backup after unpausing', async () => ((await backupsOf('every2s')).length > atPause ? true : undefined), 15_000);

    // Delete: the schedule and its job scheduler are gone, no tick runs; its backups stay.
    expect((await client.call('DELETE', '/v1/schedules/every2s')).status).toBe(200);
    expect((await client.call('GET', '/v1/schedules/every2s')).status).toBe(404);
    await sleep(1_000);
    const atDelete = (await backupsOf('every2s')).length;
    await sleep(4_500);
    expect((await backupsOf('every2s')).length).toBe(atDelete);
    expect(atDelete).toBeGreaterThan(atPause);
  }, 120_000);

  it('skips a tick while the previous backup still runs, and says why', async () => {
    const created = await client.call('POST', '/v1/schedules', {
      name: 'slow',
      spec: { schedule: '*/2 * * * * *', template: { includedNamespaces: ['shop'], defaultVolumesToFsBackup: true } },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    // Not skipImmediately: the first backup starts at once and copies for several seconds.
    const first = await waitFor('the first backup of "slow"', async () => (await backupsOf('slow'))[0], 10_000);
    const skipped = await waitFor(
      'a skipped tick',
      async () => {
        const res = await client.call('GET', '/v1/schedules/slow');
        const s = res.body.status as { skipped: number; lastSkipped?: { reason: string; backup: string } };
        return s.skipped > 0 ? s : undefined;
      },
      15_000,
    );
    expect(skipped.lastSkipped?.reason).toMatch(
      new RegExp(`^the previous backup ${first.name} of this schedule is still (New|InProgress|Finalizing)$`),
    );
    expect(skipped.lastSkipped?.backup).toMatch(/^slow-\d{14}$/);
    expect((await backupsOf('slow')).map((b) => b.name)).not.toContain(skipped.lastSkipped?.backup);
    const metrics = await (await fetch(`http://127.0.0.1:${apis[0]?.port}/metrics`)).text();
    expect(metrics).toMatch(/stowage_schedule_skipped_ticks\{schedule="slow"\} [1-9]/);
    expect((await client.call('DELETE', '/v1/schedules/slow')).status).toBe(200);
    for (const b of await backupsOf('slow')) await waitForBackupEnd(stack.state, b.name);
  }, 60_000);

  it('refuses a bad schedule, naming each field', async () => {
    const res = await client.call('POST', '/v1/schedules', {
      name: 'Bad_Name',
      spec: { schedule: '0 25 * * *', template: { ttl: 'soon' } },
    });
    expect(res.status).toBe(400);
    const paths = ((res.body.error as { problems?: Array<{ path: string }> }).problems ?? []).map((p) => p.path);
    expect(paths).toEqual(expect.arrayContaining(['name', 'spec.schedule', 'spec.template.ttl']));
  });
});

describe('TTL', () => {
  it('deletes a backup when its TTL runs out: record, storage and PVBs', async () => {
    await client.submit('short-lived', { includedNamespaces: ['shop'], defaultVolumesToFsBackup: true, ttl: '20s' });
    const ended = await waitForBackupEnd(stack.state, 'short-lived');
    expect(ended.phase).toBe('Completed');
    expect((await client.get('short-lived')).expiration).toBe(new Date(ended.createdAt + 20_000).toISOString());
    const dir = join(stack.storageDir, 'backups', 'short-lived');
    expect(existsSync(dir)).toBe(true);
    expect(await stack.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=short-lived` })).toHaveLength(1);
    const repo = await Repository.open({ dir: join(stack.storageDir, 'repository'), key: stack.repoKey });
    expect((await repo.listSnapshots()).map((s) => s.tags.backup)).toContain('short-lived');

    await waitFor(
      'the expired backup to be deleted',
      async () => ((await client.call('GET', '/v1/backups/short-lived')).status === 404 ? true : undefined),
      30_000,
    );
    expect(existsSync(dir)).toBe(false);
    expect(await stack.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=short-lived` })).toEqual([]);
    // Its volume snapshot (written by the node agent, tagged with the backup's name) is gone, the
    // others stay, and a prune job ran (with the default grace it only retires; nothing is deleted).
    const tagged = (await repo.listSnapshots()).map((s) => s.tags.backup);
    expect(tagged).not.toContain('short-lived');
    const prune = new PruneStatusStore(stack.redis, statePrefixFor(stack.queuePrefix));
    const ran = await waitFor('a prune run', async () => ((await prune.read()).runs > 0 ? prune.read() : undefined), 30_000);
    expect(ran.last?.packsDeleted).toBe(0);
    expect(await repo.verify()).toMatchObject({ ok: true });
  }, 90_000);
});

describe('deletion', () => {
  it('cancels a running backup first, and a SIGKILL of every api after the request still ends with the backup and its data gone', async () => {
    await client.submit('doomed', { includedNamespaces: ['vault'], defaultVolumesToFsBackup: true });
    await waitFor('its PVB to start copying', async () => {
      const [pvb] = await stack.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=doomed` });
      return pvb?.status?.phase === 'InProgress' ? true : undefined;
    });
    const requested = await client.call('DELETE', '/v1/backups/doomed');
    expect(requested.status).toBe(202);
    expect(requested.body).toMatchObject({ name: 'doomed', deleting: true });

    // Every api (they host finalize and the deletion job) dies at once; the request is in Redis.
    await Promise.all(apis.map((a) => a.killHard()));
    apis.splice(0, apis.length, await stack.spawn('api', 'api-3'));

    const ended = await waitForBackupEnd(stack.state, 'doomed').catch(() => undefined);
    if (ended) expect(ended.phase).toBe('Canceled');
    await waitFor(
      'the canceled backup to be deleted',
      async () => ((await client.call('GET', '/v1/backups/doomed')).status === 404 ? true : undefined),
      60_000,
    );
    expect(existsSync(join(stack.storageDir, 'backups', 'doomed'))).toBe(false);
    expect(await stack.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=doomed` })).toEqual([]);
    // Deleting again is harmless.
    expect((await client.call('DELETE', '/v1/backups/doomed')).status).toBe(404);
  }, 120_000);
});
