/*
 * Schedules survive Redis: an api and a worker process on a private redis-server, the simulator
 * and backup storage in a directory. Schedules are made and changed (and one deleted), a scheduled
 * and a manual backup finish; then Redis is wiped (FLUSHALL) and the api restarted. The schedules
 * are listed again — paused, so the recovered install starts no backup until told — with their
 * backups, and the finished backups are listed again; unpausing a schedule runs it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobSchedulerId } from '../packages/pipeline/src/index.js';
import { createQueue, QueueName } from '../packages/queue/src/index.js';
import { configMap, namespace, node } from './reliability/support/fixtures.js';
import { apiClient, type ServiceProcess, type Stack, startStack, waitFor, waitForBackupEnd } from './reliability/support/stack.js';

const fixture = { objects: [namespace('app'), namespace('stowage'), node('node-a'), configMap('settings', 'app')] };

let stack: Stack;
let api: ServiceProcess;
const client = () => apiClient(stack, () => api);

interface ScheduleView {
  name: string;
  spec: { schedule: string; paused?: boolean; template: Record<string, unknown> };
  status: { phase: string; nextRunAt?: string; lastBackup?: { name: string }; lastSuccessfulBackup?: { name: string } };
}

async function schedules(): Promise<ScheduleView[]> {
  const res = await client().call('GET', '/v1/schedules');
  expect(res.status).toBe(200);
  return (res.body as unknown as { items: ScheduleView[] }).items;
}

async function backups(): Promise<Array<{ name: string; phase: string }>> {
  const res = await client().call('GET', '/v1/backups?limit=100');
  expect(res.status).toBe(200);
  return (res.body as unknown as { items: Array<{ name: string; phase: string }> }).items;
}

beforeAll(async () => {
  stack = await startStack({ fixture });
  api = await stack.spawn('api', 'api-1');
  await stack.spawn('worker', 'worker-1');
}, 180_000);

afterAll(async () => {
  await stack?.close();
});

describe('schedules after Redis is wiped', () => {
  it('FLUSHALL and an api restart: schedules (paused) and finished backups are listed again; unpausing runs one', async () => {
    // ---- the install before: schedules made and changed, backups finished ----
    const hourly = await client().call('POST', '/v1/schedules', {
      name: 'hourly',
      spec: { schedule: '0 * * * *', template: { includedNamespaces: ['app'], ttl: '24h' } },
    });
    expect(hourly.status, JSON.stringify(hourly.body)).toBe(201);
    // Not skipImmediately: its first backup starts now.
    const firstRun = await waitFor(
      'the first backup of "hourly"',
      async () => (await backups()).find((b) => /^hourly-\d{14}$/.test(b.name))?.name,
      30_000,
    );
    expect((await waitForBackupEnd(stack.state, firstRun)).phase).toBe('Completed');
    expect((await client().call('POST', '/v1/schedules', { name: 'weekly', spec: { schedule: '0 4 * * 0', template: {} } })).status).toBe(
      201,
    );
    const changed = await client().call('PATCH', '/v1/schedules/weekly', {
      spec: { skipImmediately: true, template: { includedNamespaces: ['app'], ttl: '168h' } },
    });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    expect(
      (await client().call('POST', '/v1/schedules', { name: 'gone', spec: { schedule: '0 5 * * *', paused: true, template: {} } })).status,
    ).toBe(201);
    expect((await client().call('DELETE', '/v1/schedules/gone')).status).toBe(200);
    await client().submit('adhoc', { includedNamespaces: ['app'] });
    expect((await waitForBackupEnd(stack.state, 'adhoc')).phase).toBe('Completed');
    // The weekly schedule's first backup (started when it was created) ends too.
    const weeklyRun = (await backups()).find((b) => /^weekly-\d{14}$/.test(b.name))?.name;
    if (weeklyRun) await waitForBackupEnd(stack.state, weeklyRun);
    const before = await backups();

    // ---- Redis wiped, the api restarted ----
    await api.stop();
    expect(await stack.redis.flushall()).toBe('OK');
    expect(await stack.redis.dbsize()).toBe(0);
    api = await stack.spawn('api', 'api-2');

    const after = await schedules();
    expect(after.map((s) => s.name).sort()).toEqual(['hourly', 'weekly']);
    const byName = Object.fromEntries(after.map((s) => [s.name, s]));
    expect(byName.hourly?.spec).toEqual({ schedule: '0 * * * *', template: { includedNamespaces: ['app'], ttl: '24h' }, paused: true });
    expect(byName.weekly?.spec).toEqual({
      schedule: '0 4 * * 0',
      skipImmediately: true,
      template: { includedNamespaces: ['app'], ttl: '168h' },
      paused: true,
    });
    for (const s of after) {
      expect(s.status.phase, s.name).toBe('Enabled');
      expect(s.status.nextRunAt, s.name).toBeUndefined();
    }
    // The schedule knows its backups again: they carry its name in their labels.
    expect(byName.hourly?.status.lastSuccessfulBackup?.name).toBe(firstRun);
    // Paused for real: no job scheduler ticks in the new Redis.
    const backupsQueue = createQueue(QueueName.backups, { connection: stack.redis, prefix: stack.queuePrefix });
    try {
      expect(await backupsQueue.getJobSchedulers()).toEqual([]);
    } finally {
      await backupsQueue.close();
    }
    // Every finished backup is listed again, as it was.
    const listed = await backups();
    expect(listed.map((b) => [b.name, b.phase]).sort()).toEqual(before.map((b) => [b.name, b.phase]).sort());
    expect(listed.map((b) => b.name)).toEqual(expect.arrayContaining(['adhoc', firstRun]));

    // Told to: unpausing hourly resumes it, and (not skipImmediately) runs it now.
    const resumed = await client().call('PATCH', '/v1/schedules/hourly', { spec: { paused: false } });
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    expect((resumed.body.status as { nextRunAt?: string }).nextRunAt).toBeDefined();
    const secondRun = await waitFor(
      'a backup of "hourly" after unpausing',
      async () => (await backups()).find((b) => /^hourly-\d{14}$/.test(b.name) && b.name !== firstRun)?.name,
      30_000,
    );
    expect((await waitForBackupEnd(stack.state, secondRun)).phase).toBe('Completed');
    const jobSchedulers = createQueue(QueueName.backups, { connection: stack.redis, prefix: stack.queuePrefix });
    try {
      expect((await jobSchedulers.getJobSchedulers()).map((j) => j.key)).toEqual([jobSchedulerId('hourly')]);
    } finally {
      await jobSchedulers.close();
    }
  }, 300_000);
});
